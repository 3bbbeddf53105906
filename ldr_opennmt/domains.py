"""Domain names, domain ids and the reserved ``generic`` label.

A domain id is the index of the domain name in the configured domain list
(``data: domains: [...]`` in the YAML configuration). The reserved label
:data:`GENERIC` maps to :data:`GENERIC_ID`, which activates no domain-specific
parameter: ``tf.one_hot(GENERIC_ID, depth)`` is an all-zero row, so every
domain-aware layer reads "no domain" without a special case.

It also holds the checks of the text files themselves, shared by label files,
per-domain corpora and training files (the lowest layer that both
:mod:`ldr_opennmt.inputters` and :mod:`ldr_opennmt.training` import): every line
must be UTF-8 (:func:`scan_text_file`), and the pairs of a parallel corpus with
an empty side are counted and reported before training
(:func:`check_parallel_files`).
"""

import array
import collections
import math
import re

from ldr_opennmt.errors import UserError, not_utf8_error
from ldr_opennmt.names import check_path_name
from ldr_opennmt.utils import BOM, lazy_module, note_bom

# Imported on first use: the label checks in Python run without TensorFlow (ldr-serve).
tf = lazy_module("tensorflow")

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
    for name in names:
        if not isinstance(name, str):
            check_path_name(name, "domain name", source)  # Names the YAML cause.
    names = [name.strip() for name in names]
    if not names:
        raise UserError("%s declares an empty domain list" % source)
    seen = set()
    for name in names:
        if not name or any(c.isspace() for c in name):
            raise UserError("%s: invalid domain name %r" % (source, name))
        if ":" in name or name.startswith("ens-"):
            # Reserved for ensemble labels (ldr_opennmt.ensembles): "ens-uniform", "a:0.5".
            raise UserError(
                "%s: invalid domain name %r (':' and the prefix 'ens-' are reserved for "
                "ensemble labels)" % (source, name)
            )
        if name == GENERIC:
            raise UserError(
                "%s: %r is reserved (it selects no domain) and cannot be declared"
                % (source, GENERIC)
            )
        # A domain name becomes a file or directory name (CTranslate2 exports, ldr-data,
        # ldr-eval): checked here, where it enters.
        check_path_name(name, "domain name", source)
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


#: ASCII whitespace: what ``tf.strings.strip`` (label lookup) and the tokenizers strip.
ASCII_SPACE = " \t\n\r\f\v"
#: A blank line (ASCII whitespace only) inside a block of whole lines.
_BLANK_LINE = re.compile(rb"^[ \t\r\f\v]*\n", re.MULTILINE)
#: Bytes read at a time by :func:`scan_text_file`.
_CHUNK_SIZE = 1 << 20

#: The data configuration key that keeps training pairs with an empty target.
KEEP_EMPTY_TARGETS = "keep_empty_targets"
#: Line numbers shown in a log line (the count is always complete).
_SHOWN_LINES = 5

#: A scanned text file: its line count and the numbers (1-based, ascending, an
#: ``array.array``) of its blank lines.
TextFile = collections.namedtuple("TextFile", ("path", "lines", "blank"))

#: A checked source/target pair of files (see :func:`check_parallel_files`).
ParallelFiles = collections.namedtuple(
    "ParallelFiles", ("source", "target", "size", "empty_source", "empty_target", "dropped")
)


def _scan_block(path, block, lines_before, blank):
    """Checks a block of whole lines; appends its blank line numbers; returns the count."""
    try:
        block.decode("utf-8")
    except UnicodeDecodeError as e:
        raise not_utf8_error(path, block, lines_before + 1, e) from None
    position, line = 0, lines_before
    for match in _BLANK_LINE.finditer(block):
        line += block.count(b"\n", position, match.start()) + 1
        blank.append(line)
        position = match.end()
    return lines_before + block.count(b"\n")


def scan_text_file(path):
    """Reads a text file once, in chunks: its lines, its blank lines, and UTF-8.

    Lines are split on ``\\n`` only, as ``tf.data.TextLineDataset`` does; a last
    line without ``\\n`` counts, unless it holds only ``\\r`` (which the dataset
    drops). A line is blank when it holds ASCII whitespace only: every tokenizer
    makes no token of it.

    Args:
      path: The file.

    Returns:
      A :class:`TextFile`.

    Raises:
      UserError: ``FILE:LINE: not UTF-8 (...)`` on the first line that is not UTF-8
        (invalid bytes would otherwise become unknown words without a word), or
        ``FILE: a directory, not a text file``.
    """
    lines = 0
    blank = array.array("q")
    pending = []  # The start of a line that continues in the next chunk.
    if tf.io.gfile.isdir(path):
        raise UserError("%s: a directory, not a text file" % path)
    first = b""
    with tf.io.gfile.GFile(path, "rb") as f:
        while True:
            chunk = f.read(_CHUNK_SIZE)
            if not chunk:
                break
            first = first or chunk[: len(BOM.encode("utf-8"))]
            # Blocks end on a newline, which is never inside a multi-byte UTF-8 character.
            end = chunk.rfind(b"\n") + 1
            if end == 0:
                pending.append(chunk)
                continue
            block = b"".join(pending + [chunk[:end]]) if pending else chunk[:end]
            pending = [chunk[end:]] if end < len(chunk) else []
            lines = _scan_block(path, block, lines, blank)
    # TextLineDataset drops every "\r": a last line of "\r" only is no line.
    if pending and b"".join(pending).strip(b"\r"):
        lines = _scan_block(path, b"".join(pending) + b"\n", lines, blank)
    if first.startswith(BOM.encode("utf-8")):
        note_bom(path)  # The inputters strip it from every line read (strip_bom).
    return TextFile(path, lines, blank)


def strip_bom(lines):
    """In-graph: a string tensor of lines without a leading byte order mark (U+FEFF).

    ``tf.data.TextLineDataset`` keeps the mark of a file's first line: left there, it
    would be part of line 1's first word. Every inputter of the package reads its lines
    through this; lines already tokenized (``{"tokens": ...}``) are returned as they are.
    """
    if isinstance(lines, dict):
        # Already tokenized by a Python tokenizer (OpenNMT-tf's dataset does it before the
        # features): pyonmttok drops U+FEFF as it drops spaces.
        return lines
    return tf.strings.regex_replace(lines, "^" + BOM, "")


def count_lines(path):
    """Counts the lines of a text file (as :func:`scan_text_file`: UTF-8 is checked).

    Raises:
      UserError: on a line that is not UTF-8.
    """
    return scan_text_file(path).lines


def label_count_error(path, count, expected_lines, source_path=None):
    """``FILE:LINE: missing/extra domain label (N labels, but SRC has M lines)``."""
    return UserError(
        "%s:%d: %s (%d labels, but %s has %d lines)"
        % (
            path,
            min(count, expected_lines) + 1,
            "missing domain label" if count < expected_lines else "extra domain label",
            count,
            source_path or "the source",
            expected_lines,
        )
    )


def read_label_file(path, domains, expected_lines=None, source_path=None, ensemble=None):
    """Reads and validates a domain label file (one label per line).

    Args:
      path: The label file.
      domains: The declared domain names, or ``None`` to accept any non-empty
        label (the returned ids are then all :data:`GENERIC_ID`).
      expected_lines: If set, the number of lines the file must have.
      source_path: The file the labels are aligned with, for error messages.
      ensemble: How ensemble labels (:mod:`ldr_opennmt.ensembles`) are read: a function
        ``(label, where)`` that returns ``False`` for a label that is not one, and checks
        one (raising :class:`UserError`) otherwise; ``None``: they are unknown labels.

    Returns:
      The list of domain ids, one per line (an ensemble label: :data:`GENERIC_ID`).

    Raises:
      UserError: on a line that is not UTF-8, an empty label, an unknown label or
        a line count mismatch, with the file, line number and value in the message;
        on a directory.
    """
    ids = []
    # Bytes, decoded line by line: a decoding error names its line. Lines are
    # split on "\n" only and stripped of ASCII whitespace, as the in-graph lookup
    # (tf.data.TextLineDataset, tf.strings.strip) reads them.
    if tf.io.gfile.isdir(path):
        raise UserError("%s: a directory, not a label file" % path)
    with tf.io.gfile.GFile(path, "rb") as label_file:
        for line_number, line in enumerate(label_file, start=1):
            try:
                label = line.decode("utf-8").strip(ASCII_SPACE)
            except UnicodeDecodeError as e:
                raise not_utf8_error(path, line, line_number, e) from None
            if line_number == 1 and label.startswith(BOM):
                note_bom(path)  # The in-graph lookup strips it too (lookup_domain_ids).
                label = label[len(BOM) :].strip(ASCII_SPACE)
            if not label:
                raise UserError("%s:%d: empty domain label" % (path, line_number))
            where = "%s:%d" % (path, line_number)
            if ensemble is not None and ensemble(label, where):
                ids.append(GENERIC_ID)
                continue
            ids.append(label_id(label, domains, where))
    if expected_lines is not None and len(ids) != expected_lines:
        raise label_count_error(path, len(ids), expected_lines, source_path)
    return ids


def keep_empty_targets(data_config):
    """The ``data: keep_empty_targets`` setting (default ``False``).

    Training drops the pairs whose target is empty unless it is ``True``: such a
    pair teaches the model to translate a sentence into nothing. Pairs with an
    empty source are always dropped (OpenNMT-tf does it too: nothing to encode).
    It is a ``data`` key because the model's examples inputter applies it, which
    only reads the ``data`` section (the same under ``ldr-main`` and ``onmt-main``).

    Raises:
      UserError: if the value is not a boolean.
    """
    value = data_config.get(KEEP_EMPTY_TARGETS, False)
    if not isinstance(value, bool):
        raise UserError("data: %s must be true or false, got %r" % (KEEP_EMPTY_TARGETS, value))
    return value


def _line_numbers(numbers):
    shown = ", ".join(str(n) for n in numbers[:_SHOWN_LINES])
    more = ", ..." if len(numbers) > _SHOWN_LINES else ""
    return "%s %s%s" % ("line" if len(numbers) == 1 else "lines", shown, more)


def _report_empty(text_file, side, size, action):
    if not text_file.blank:
        return
    tf.get_logger().warning(
        "%s: %d of %d %s lines are empty (%s): %s",
        text_file.path,
        len(text_file.blank),
        size,
        side,
        _line_numbers(text_file.blank),
        action,
    )


#: (source, target, training, keep) -> (files' (size, mtime) signature, ParallelFiles).
_CHECKED = {}


def _signature(paths):
    stats = [tf.io.gfile.stat(path) for path in paths]
    return tuple((stat.length, stat.mtime_nsec) for stat in stats)


def check_parallel_files(source, target, training=True, keep_empty=False, what=None):
    """Checks a source file and its target file in one pass over each.

    Every line must be UTF-8, both files must have the same number of lines, and
    the pairs with an empty source or target line are counted: a warning per file
    that has empty lines names the file, the count and the first line numbers.
    This is what the user sees before training; the pairs are dropped by the
    model's examples inputter (:class:`ldr_opennmt.inputters.MultiDomainExamplesInputter`),
    in the ``tf.data`` pipeline, so that no file is rewritten.

    A pair of files already checked in this process, unchanged since (same sizes
    and modification times), is not read again: the multi-domain Runner checks the
    per-domain corpora when it reads the configuration, and the inputter checks
    the training files when it builds the training dataset.

    Args:
      source: The source file.
      target: The target file.
      training: Whether the files are training data (empty pairs are then
        dropped) or evaluation data (used as they are).
      keep_empty: ``data: keep_empty_targets``: pairs with an empty target are
        kept for training.
      what: What the files are, for errors (e.g. ``domain 'medical'``).

    Returns:
      A :class:`ParallelFiles`: ``size`` (lines), ``empty_source`` and
      ``empty_target`` (empty lines of each file) and ``dropped`` (pairs training
      drops; 0 for evaluation data).

    Raises:
      UserError: on a missing file (or one TensorFlow cannot open: an unknown
        ``scheme://``), a directory, a line that is not UTF-8, files of different
        lengths, or training files whose every pair would be dropped.
    """
    for path in (source, target):
        try:
            if not tf.io.gfile.exists(path):
                raise UserError("%s: file not found" % path)
        except (tf.errors.OpError, UnicodeError) as e:  # E.g. an unknown scheme://.
            raise UserError("%s: cannot read (%s)" % (path, " ".join(str(e).split()))) from None
    key = (source, target, bool(training), bool(keep_empty))
    signature = _signature((source, target))
    checked = _CHECKED.get(key)
    if checked is not None and checked[0] == signature:
        return checked[1]
    source_file = scan_text_file(source)
    target_file = scan_text_file(target)
    size, target_size = source_file.lines, target_file.lines
    if target_size != size:
        raise UserError(
            "%s:%d: %s target line (%d lines, but %s has %d)"
            % (
                target,
                min(size, target_size) + 1,
                "missing" if target_size < size else "extra",
                target_size,
                source,
                size,
            )
        )
    if training:
        _report_empty(
            source_file, "source", size, "these pairs are dropped from training (nothing to encode)"
        )
        _report_empty(
            target_file,
            "target",
            size,
            (
                "these pairs are kept for training (data: %s: true)" % KEEP_EMPTY_TARGETS
                if keep_empty
                else "these pairs are dropped from training (data: %s: true keeps them)"
                % KEEP_EMPTY_TARGETS
            ),
        )
        if keep_empty:
            dropped = len(source_file.blank)
        else:
            dropped = len(set(source_file.blank) | set(target_file.blank))
        if size and dropped == size:
            # The training pipeline would filter out every example and never end.
            raise UserError(
                "%s, %s: every pair%s has an empty %s: nothing to train on"
                % (
                    source,
                    target,
                    " of %s" % what if what else "",
                    "source" if keep_empty else "source or target",
                )
            )
    else:
        dropped = 0
        for text_file, side in ((source_file, "source"), (target_file, "target")):
            _report_empty(text_file, side, size, "evaluation data are used as they are")
    result = ParallelFiles(
        source, target, size, len(source_file.blank), len(target_file.blank), dropped
    )
    _CHECKED[key] = (signature, result)
    return result


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
    label into a silent all-zero domain vector. Its message holds the label as UTF-8
    (invalid bytes replaced by U+FFFD): TensorFlow decodes the message as UTF-8 when it
    raises the error in Python, and raw bytes would raise ``UnicodeDecodeError`` there
    instead.
    """
    labels = tf.strings.strip(strip_bom(labels))
    ids = table.lookup(labels)
    unknown = tf.equal(ids, UNKNOWN_ID)

    def _fail():
        # The message is only built when a label is unknown (not on every example).
        flat_unknown = tf.boolean_mask(tf.reshape(labels, [-1]), tf.reshape(unknown, [-1]))
        first_unknown = tf.strings.unicode_transcode(
            tf.strings.reduce_join(flat_unknown[:1]), "UTF-8", "UTF-8", errors="replace"
        )
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
