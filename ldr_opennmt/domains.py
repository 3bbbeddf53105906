"""Domain names, domain ids and the reserved ``generic`` label.

A domain id is the index of the domain name in the configured domain list
(``data: domains: [...]`` in the YAML configuration). The reserved label
:data:`GENERIC` maps to :data:`GENERIC_ID`, which activates no domain-specific
parameter: ``tf.one_hot(GENERIC_ID, depth)`` is an all-zero row, so every
domain-aware layer reads "no domain" without a special case.
"""

import math

import tensorflow as tf

from ldr_opennmt.errors import UserError

GENERIC = "generic"
GENERIC_ID = -1
UNKNOWN_ID = -2


def validate_domain_names(names, source="the configuration"):
    """Checks a declared domain list and returns it as a list of strings.

    Args:
      names: The declared domain names.
      source: Where the names come from, for error messages.

    Returns:
      The list of domain names.

    Raises:
      UserError: if the list is empty, has duplicates, blank names or uses the
        reserved ``generic`` label.
    """
    if names is None:
        raise UserError("%s declares no domains (set data: domains: [name, ...])" % source)
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise UserError("%s: domains must be a list of names, got %r" % (source, names))
    names = [str(name).strip() for name in names]
    if not names:
        raise UserError("%s declares an empty domain list" % source)
    seen = set()
    for name in names:
        if not name or any(c.isspace() for c in name):
            raise UserError("%s: invalid domain name %r" % (source, name))
        if name == GENERIC:
            raise UserError(
                "%s: %r is reserved (it selects no domain) and cannot be declared"
                % (source, GENERIC)
            )
        if name in seen:
            raise UserError("%s: domain %r is declared twice" % (source, name))
        seen.add(name)
    return names


def label_id(label, domains, where):
    """The id of one domain label.

    Args:
      label: A declared domain name or ``generic``.
      domains: The declared domain names, or ``None`` to accept any label (the id
        is then :data:`GENERIC_ID`).
      where: Where the label comes from (``file:line``, an option), for errors.

    Raises:
      UserError: on an undeclared label.
    """
    if label == GENERIC or domains is None:
        return GENERIC_ID
    if label not in domains:
        raise UserError(
            "%s: unknown domain label %r (declared: %s, or %s)"
            % (where, label, ", ".join(domains), GENERIC)
        )
    return domains.index(label)


def read_label_file(path, domains, expected_lines=None, source_path=None):
    """Reads and validates a domain label file (one label per line).

    Args:
      path: The label file.
      domains: The declared domain names, or ``None`` to accept any non-empty
        label (the returned ids are then all :data:`GENERIC_ID`).
      expected_lines: If set, the number of lines the file must have.
      source_path: The file the labels are aligned with, for error messages.

    Returns:
      The list of domain ids, one per line.

    Raises:
      UserError: on an empty label, an unknown label or a line count mismatch,
        with the file, line number and value in the message.
    """
    ids = []
    with tf.io.gfile.GFile(path, "r") as label_file:
        for line_number, line in enumerate(label_file, start=1):
            label = line.strip()
            if not label:
                raise UserError("%s:%d: empty domain label" % (path, line_number))
            ids.append(label_id(label, domains, "%s:%d" % (path, line_number)))
    if expected_lines is not None and len(ids) != expected_lines:
        raise UserError(
            "%s:%d: %s (%d labels, but %s has %d lines)"
            % (
                path,
                min(len(ids), expected_lines) + 1,
                "missing domain label" if len(ids) < expected_lines else "extra domain label",
                len(ids),
                source_path or "the source",
                expected_lines,
            )
        )
    return ids


def count_lines(path):
    """Counts the lines of a text file."""
    count = 0
    with tf.io.gfile.GFile(path, "rb") as f:
        for _ in f:
            count += 1
    return count


def sampling_probabilities(sizes, alpha=1.0):
    """Returns the domain sampling distribution ``|C_i|^alpha / sum_j |C_j|^alpha``.

    Args:
      sizes: The corpus size of each domain.
      alpha: The temperature: 1 follows the data, 0.5 is the paper's LDR^0.5 and
        0 is uniform.

    Raises:
      UserError: if alpha is negative or a corpus is empty.
    """
    if alpha < 0:
        raise UserError("alpha must be >= 0, got %s" % alpha)
    for i, size in enumerate(sizes):
        if size <= 0:
            raise UserError("domain #%d has an empty corpus" % i)
    weights = [math.pow(size, alpha) for size in sizes]
    total = sum(weights)
    return [w / total for w in weights]


def make_lookup_table(domains):
    """Returns a ``tf.lookup.StaticHashTable`` from domain name to id.

    Undeclared names map to :data:`UNKNOWN_ID`; callers must check for it (see
    :func:`lookup_domain_ids`).
    """
    keys = list(domains) + [GENERIC]
    values = list(range(len(domains))) + [GENERIC_ID]
    initializer = tf.lookup.KeyValueTensorInitializer(
        tf.constant(keys, dtype=tf.string), tf.constant(values, dtype=tf.int32)
    )
    return tf.lookup.StaticHashTable(initializer, default_value=UNKNOWN_ID)


def lookup_domain_ids(table, labels, domains):
    """Maps a string tensor of domain labels to ids, failing on undeclared labels.

    Args:
      table: The table made by :func:`make_lookup_table` for :obj:`domains`.
      labels: A string tensor of domain labels.
      domains: The declared domain names, for the error message.

    The failure is an in-graph assertion: a lookup must never turn an unknown
    label into a silent all-zero domain vector.
    """
    labels = tf.strings.strip(labels)
    ids = table.lookup(labels)
    unknown = tf.equal(ids, UNKNOWN_ID)

    def _fail():
        # The message is only built when a label is unknown (not on every example).
        flat_unknown = tf.boolean_mask(tf.reshape(labels, [-1]), tf.reshape(unknown, [-1]))
        first_unknown = tf.strings.reduce_join(flat_unknown[:1])
        message = tf.strings.join(
            [
                "Unknown domain label '",
                first_unknown,
                "' (declared: %s, or %s)" % (", ".join(domains), GENERIC),
            ]
        )
        check = tf.debugging.Assert(False, [message], name="unknown_domain_label")
        with tf.control_dependencies([check]):
            return tf.identity(ids)

    return tf.cond(tf.reduce_any(unknown), _fail, lambda: ids)
