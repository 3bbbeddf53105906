"""Ensembles of domain views: labels that mix several domains' translations.

A multi-domain model is one model per domain plus a general one (its *views*: the
declared domains, then ``generic``). For text of unknown or unseen domain, every view
can translate at once and the views' word probabilities are mixed at each decoding
step (Deng et al., 2020, section 5): ``p(y_t) = sum_k w_k p_k(y_t | y_<t, x)``, each
view with its own encoder pass under its own domain
(:mod:`ldr_opennmt.models.ensemble`).

The weights reach the model the way a domain does: as the sentence's domain label,
in a label file, on the command line, or in the SavedModel's ``domain`` input. Besides
a domain name or ``generic``, a label can be:

* ``ens-uniform``: equal weights over every declared domain and ``generic``;
* ``ens-learned``: the weight vector fitted on development data
  (``ldr-eval fit-ensemble``, stored as ``ensemble.json`` in the model directory and
  read into ``data: ensemble_weights`` by ``ldr-main``; under stock ``onmt-main``, set
  ``data: ensemble_weights`` by hand);
* ``NAME:WEIGHT NAME:WEIGHT ...``: explicit weights (e.g. a domain classifier's
  posterior, which is how ``ens-soft`` is written), non-negative, summing to one.

A label that puts all its weight on one view is that view's plain translation; a
batch whose labels are all of that kind is translated the ordinary way (one
encoder pass, one decoder state per hypothesis).

This module reads and checks those labels in Python (label files: one line, file
and line number) and in the graph (the SavedModel's input: an assertion naming the
label), formats them, and fits learned weights.
"""

import json
import math
import os
import re

import numpy as np

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.utils import lazy_module

# Imported on first use: the label checks in Python run without TensorFlow (ldr-serve).
tf = lazy_module("tensorflow")

ENS_UNIFORM = "ens-uniform"
ENS_LEARNED = "ens-learned"
#: Domain names starting with this prefix are reserved for named ensembles.
RESERVED_PREFIX = "ens-"
#: How far from one the weights of a label may sum (they are renormalized).
SUM_TOLERANCE = 1e-3
#: The file of fitted weights in a model directory (read by ``ldr-main``).
WEIGHTS_FILE = "ensemble.json"
#: The feature holding each sentence's view weights (``[batch, views]``).
WEIGHTS_FEATURE = "domain_weights"
#: The data configuration key holding fitted weights (``{view: weight}``).
CONFIG_KEY = "ensemble_weights"

_NUMBER = r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?"
#: The longest weight: ``tf.strings.to_number`` fails on a string of 32 characters or more.
_NUMBER_MAX_LENGTH = 31


def is_ensemble_label(label):
    """Whether a label line asks for an ensemble (rather than naming one view)."""
    label = label.strip(domains_lib.ASCII_SPACE)
    return label in (ENS_UNIFORM, ENS_LEARNED) or ":" in label


def view_names(domains):
    """The views of a model with :obj:`domains`: every domain, then ``generic``."""
    return list(domains) + [domains_lib.GENERIC]


def view_ids(domains):
    """The domain id of each view (``generic``: :data:`~ldr_opennmt.domains.GENERIC_ID`)."""
    return list(range(len(domains))) + [domains_lib.GENERIC_ID]


def format_label(weights, domains, digits=6):
    """An explicit ensemble label for a weight vector over the views of :obj:`domains`.

    Views with zero weight are left out; the weights are written with :obj:`digits`
    decimals (the reader renormalizes them).
    """
    parts = [
        "%s:%.*f" % (name, digits, float(weight))
        for name, weight in zip(view_names(domains), weights)
        if round(float(weight), digits) > 0
    ]
    if not parts:
        raise ValueError("an ensemble needs a positive weight")
    return " ".join(parts)


def check_weights(weights, domains, where):
    """Checks a weight vector over the views and returns it normalized (a list).

    Args:
      weights: ``{view name: weight}`` (missing views weigh 0) or a list with one
        weight per view (:func:`view_names` order).
      domains: The declared domains.
      where: Where the weights come from, for the error message.

    Raises:
      UserError: on an unknown view, a list of the wrong length, a negative or non-finite
        weight, or weights that do not sum to one (within :data:`SUM_TOLERANCE`).
    """
    names = view_names(domains)
    if isinstance(weights, dict):
        unknown = [name for name in weights if name not in names]
        if unknown:
            raise UserError(
                "%s: unknown view %r in the ensemble weights (views: %s)"
                % (where, unknown[0], ", ".join(names))
            )
        weights = [weights.get(name, 0.0) for name in names]
    elif not isinstance(weights, (list, tuple)) or len(weights) != len(names):
        raise UserError(
            "%s: ensemble weights must have one value per view (%d: %s), got %r"
            % (where, len(names), ", ".join(names), weights)
        )
    try:
        values = [float(w) for w in weights]
    except (TypeError, ValueError, OverflowError):
        raise UserError("%s: ensemble weights must be numbers, got %r" % (where, weights)) from None
    for name, value in zip(names, values):
        if not math.isfinite(value) or value < 0:
            raise UserError(
                "%s: negative or invalid ensemble weight %r for %s" % (where, value, name)
            )
    total = sum(values)
    if abs(total - 1) > SUM_TOLERANCE:
        raise UserError("%s: ensemble weights sum to %g, not 1" % (where, total))
    return [value / total for value in values]


def parse_label(label, domains, learned=None, where="label"):
    """The view weights of an ensemble label (Python side of :func:`label_weights`).

    Args:
      label: An ensemble label (see the module documentation).
      domains: The declared domains.
      learned: The fitted weights (a list over the views) or ``None``.
      where: ``file:line`` or the option the label comes from.

    Returns:
      A list of one weight per view, normalized.

    Raises:
      UserError: on a malformed label, an unknown view, a repeated view, a negative weight,
        weights that do not sum to one, or ``ens-learned`` without fitted weights.
    """
    label = label.strip(domains_lib.ASCII_SPACE)
    names = view_names(domains)
    if label == ENS_UNIFORM:
        return [1.0 / len(names)] * len(names)
    if label == ENS_LEARNED:
        if learned is None:
            raise UserError(
                "%s: %s: the model has no fitted ensemble weights (run `ldr-eval fit-ensemble`, "
                "or set data: %s)" % (where, ENS_LEARNED, CONFIG_KEY)
            )
        return list(learned)
    weights = {}
    # Split and read as the graph does (ASCII whitespace, the same number syntax).
    for part in re.split("[%s]+" % re.escape(domains_lib.ASCII_SPACE), label):
        name, sep, value = part.rpartition(":")
        if not sep or not name or not value:
            raise UserError(
                "%s: malformed ensemble label %r (expected NAME:WEIGHT ..., %s or %s)"
                % (where, label, ENS_UNIFORM, ENS_LEARNED)
            )
        if name in weights:
            raise UserError("%s: view %r appears twice in %r" % (where, name, label))
        shown = name if name in names else repr(name)  # Quoted unless a declared view.
        if not re.fullmatch(_NUMBER, value):
            raise UserError("%s: weight %r of %s is not a number" % (where, value, shown))
        if len(value) > _NUMBER_MAX_LENGTH:
            raise UserError(
                "%s: weight %r of %s is longer than %d characters"
                % (where, value, shown, _NUMBER_MAX_LENGTH)
            )
        weights[name] = float(value)
    return check_weights(weights, domains, "%s: %r" % (where, label))


def make_view_table(domains):
    """A ``tf.lookup.StaticHashTable`` from view name to view index (-1 if unknown)."""
    names = view_names(domains)
    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(names), tf.range(len(names), dtype=tf.int32)
        ),
        default_value=-1,
    )


def label_weights(labels, domains, learned=None, table=None):
    """In-graph reading of domain labels: domain ids and view weights.

    Args:
      labels: A string tensor of any shape: domain names, ``generic`` or ensemble labels.
      domains: The declared domains.
      learned: The fitted weights (a list over the views) or ``None``.
      table: The :func:`make_view_table` of :obj:`domains` (a SavedModel must track it:
        give the one its inputter owns); made here if ``None``.

    Returns:
      ``(ids, weights)``: int32 domain ids of the shape of :obj:`labels` (for an ensemble
      label, the id of its largest-weight view), and float32 weights of that shape plus
      one axis of size ``len(domains) + 1`` (a plain label is a one-hot row).

    The failures are in-graph assertions naming the label (the SavedModel's input), as
    :func:`~ldr_opennmt.domains.lookup_domain_ids` does for unknown names.
    """
    names = view_names(domains)
    num_views = len(names)
    shape = tf.shape(labels)
    flat = tf.strings.strip(tf.reshape(labels, [-1]))
    if table is None:
        table = make_view_table(domains)
    uniform = tf.fill(tf.shape(flat), 1.0 / num_views)[:, None] * tf.ones([num_views])
    if learned is None:
        learned_rows = tf.zeros([tf.size(flat), num_views])
    else:
        learned_rows = tf.tile(tf.constant([learned], tf.float32), [tf.size(flat), 1])
    is_uniform = tf.equal(flat, ENS_UNIFORM)
    is_learned = tf.equal(flat, ENS_LEARNED)
    is_mixture = tf.strings.regex_full_match(flat, r"(?s).*:.*")  # (?s): "." matches "\n".
    # Parts "NAME:WEIGHT" of the explicit labels; a plain label is the part "NAME:1".
    text = tf.where(is_mixture, flat, flat + ":1")
    text = tf.where(is_uniform | is_learned, tf.fill(tf.shape(flat), "generic:1"), text)
    parts = tf.strings.split(text)  # Ragged [labels, parts].
    rows = tf.cast(parts.value_rowids(), tf.int32)
    # The weight is after the last colon (names have none, see validate_domain_names).
    part_names = tf.strings.regex_replace(parts.flat_values, ":[^:]*$", "")
    part_values = tf.strings.regex_replace(parts.flat_values, "^.*:", "")
    views = table.lookup(part_names)
    is_number = tf.strings.regex_full_match(part_values, _NUMBER) & (
        tf.strings.length(part_values) <= _NUMBER_MAX_LENGTH
    )
    values = tf.strings.to_number(tf.where(is_number, part_values, "0"), tf.float32)
    weights = tf.math.unsorted_segment_sum(
        values, rows * num_views + tf.maximum(views, 0), tf.size(flat) * num_views
    )
    weights = tf.reshape(weights, [-1, num_views])
    counts = tf.math.unsorted_segment_sum(
        tf.ones_like(values), rows * num_views + tf.maximum(views, 0), tf.size(flat) * num_views
    )
    has_colon = tf.strings.regex_full_match(parts.flat_values, ".+:.*")
    part_ok = (views >= 0) & is_number & (values >= 0) & has_colon
    total = tf.reduce_sum(weights, axis=1)
    row_ok = (tf.math.unsorted_segment_min(tf.cast(part_ok, tf.int32), rows, tf.size(flat)) > 0) & (
        tf.reduce_max(tf.reshape(counts, [-1, num_views]), axis=1) <= 1
    )
    row_ok &= tf.abs(total - 1) <= SUM_TOLERANCE
    row_ok = (row_ok | is_uniform) & (tf.logical_not(is_learned) | (learned is not None))
    weights = tf.math.divide_no_nan(weights, total[:, None])
    weights = tf.where(is_uniform[:, None], uniform, weights)
    weights = tf.where(is_learned[:, None], learned_rows, weights)

    def _fail():
        first = tf.strings.reduce_join(tf.boolean_mask(flat, tf.logical_not(row_ok))[:1])
        message = tf.strings.join(
            [
                "Invalid ensemble label '",
                first,
                "' (expected %s, %s%s, or NAME:WEIGHT ... with NAME in %s and "
                "non-negative weights summing to 1)"
                % (
                    ENS_UNIFORM,
                    ENS_LEARNED,
                    "" if learned is not None else " (not fitted for this model)",
                    ", ".join(view_names(domains)),
                ),
            ]
        )
        check = tf.debugging.Assert(False, [message], name="invalid_domain_label")
        with tf.control_dependencies([check]):
            return tf.identity(weights)

    weights = tf.cond(tf.reduce_all(row_ok), lambda: weights, _fail)
    top = tf.argmax(weights, axis=1, output_type=tf.int32)
    ids = tf.gather(tf.constant(view_ids(domains), tf.int32), top)
    return tf.reshape(ids, shape), tf.reshape(weights, tf.concat([shape, [num_views]], 0))


def ensemble_rows(labels):
    """In-graph :func:`is_ensemble_label`: a boolean tensor of the shape of :obj:`labels`."""
    labels = tf.strings.strip(labels)
    return (
        tf.strings.regex_full_match(labels, "(?s).*:.*")
        | tf.equal(labels, ENS_UNIFORM)
        | tf.equal(labels, ENS_LEARNED)
    )


def one_hot_views(ids, num_domains):
    """The one-hot view weights of domain ids (``generic``: the last view)."""
    views = tf.where(ids < 0, num_domains, ids)
    return tf.one_hot(views, num_domains + 1, dtype=tf.float32)


def is_mixture(weights):
    """A boolean tensor: whether any row of :obj:`weights` has two views with weight."""
    return tf.reduce_any(tf.math.count_nonzero(weights > 0, axis=-1) > 1)


def fit_weights(log_probs, iterations=200, tolerance=1e-7):
    """The mixture weights maximizing the likelihood of development tokens (EM).

    With teacher forcing, view ``k`` gives each reference token ``t`` a probability
    ``p_k(t)`` that does not depend on the weights, so the development log-likelihood
    ``sum_t log sum_k w_k p_k(t)`` is concave in ``w``; EM (``w_k <- mean_t
    w_k p_k(t) / sum_j w_j p_j(t)``) climbs it from uniform weights and keeps them
    non-negative and summing to one.

    Args:
      log_probs: An array ``[tokens, views]`` of each view's log-probability of each
        reference token.
      iterations: Maximum EM iterations.
      tolerance: Stop when the average log-likelihood gains less.

    Returns:
      ``(weights, average log-likelihood per token)``.
    """
    log_probs = np.asarray(log_probs, dtype=np.float64)
    if log_probs.ndim != 2 or not log_probs.shape[0]:
        raise ValueError("expected [tokens, views] log-probabilities, got %r" % (log_probs.shape,))
    weights = np.full(log_probs.shape[1], 1.0 / log_probs.shape[1])
    previous = -np.inf
    for _ in range(iterations):
        joint = log_probs + np.log(np.maximum(weights, 1e-300))
        total = np.logaddexp.reduce(joint, axis=1, keepdims=True)
        likelihood = float(total.mean())
        if likelihood - previous < tolerance:
            break
        previous = likelihood
        weights = np.exp(joint - total).mean(axis=0)
        weights /= weights.sum()
    return weights.tolist(), likelihood


def read_weights_file(model_dir, domains):
    """The fitted weights stored in :obj:`model_dir` (a list over the views), or ``None``.

    Raises:
      UserError: if the file is not valid JSON, was fitted for other domains, or its
        weights are invalid.
    """
    path = os.path.join(model_dir, WEIGHTS_FILE)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
        weights = record["weights"]
    except (ValueError, KeyError, TypeError, RecursionError) as e:  # Recursion: [[[[...
        raise UserError("%s: not an ensemble weights file (%s)" % (path, e)) from None
    if record.get("views") != view_names(domains):
        raise UserError(
            "%s: weights fitted for the views %s, but the model's views are %s (refit with "
            "`ldr-eval fit-ensemble`)" % (path, record.get("views"), view_names(domains))
        )
    return check_weights(weights, domains, path)


def learned_from_config(data_config, domains):
    """The ``data: ensemble_weights`` of a configuration, checked (a list), or ``None``."""
    weights = data_config.get(CONFIG_KEY)
    if weights is None:
        return None
    return check_weights(weights, domains, "data: %s" % CONFIG_KEY)
