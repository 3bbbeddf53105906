"""What an export says about its labels and inputs, and the domain labels of a run, without
TensorFlow: shared by ``ldr-translate`` (SavedModel and CTranslate2), ``ldr-serve`` and
:class:`ldr_opennmt.serving.translator.Translator`.

**Domain labels the model ignores.** Some exports translate without reading the label:
a SavedModel whose ``serving_default`` signature has no ``domain`` input (families that
use labels for training only: domain mixing, ML, AdvL), an export that declares no
domains (an empty ``domains.txt``: a Mixed model trained without them), or one whose
``assets.extra/inference.json`` says so (``ignored_domain_labels``: a Mixed model,
which has no domain-specific parameters). An ensemble label is then refused (one line
naming the file and line, or ``--domain``): it asks for a mixture of domain views the
model does not have. A plain label other than ``generic`` is translated the same as
``generic``, with one warning line (see :func:`label_policy` for why).
"""

import json
import os
import sys

from ldr_opennmt import assets as assets_lib
from ldr_opennmt import domains as domains_lib
from ldr_opennmt import ensembles
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import textio

SIGNATURE = "serving_default"

#: ``assets.extra/inference.json``: what the client needs to know about the exported
#: model beyond its signature. Optional (exports made before it have none); a JSON
#: object whose keys are all optional:
#:
#: * ``maximum_source_length``: the number of source tokens the SavedModel keeps
#:   (an integer >= 1; longer sources are truncated in its graph);
#: * ``ignored_domain_labels``: why the model's translation does not depend on the
#:   domain label (a string), or ``null``;
#: * ``ensemble_refusal``: why the model translates no ensemble of domain views (a
#:   string), or ``null``.
INFERENCE_INFO = assets_lib.INFERENCE
MAXIMUM_SOURCE_LENGTH = "maximum_source_length"
IGNORED_DOMAIN_LABELS = "ignored_domain_labels"
ENSEMBLE_REFUSAL = "ensemble_refusal"


def read_inference_info(export_dir):
    """Reads ``assets.extra/inference.json`` of an export (see :data:`INFERENCE_INFO`).

    Returns:
      The JSON object as a dictionary (empty when the export has no such file; keys
      this client does not know are ignored).

    Raises:
      UserError: if the file is not a JSON object or a known key has a bad value.
    """
    path = os.path.join(assets_lib.assets_dir(export_dir), INFERENCE_INFO)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as info_file:
            info = json.load(info_file)
    except (ValueError, UnicodeDecodeError) as e:
        raise UserError("%s: not valid JSON (%s)" % (path, e)) from None
    if not isinstance(info, dict):
        raise UserError("%s: expected a JSON object, got %s" % (path, json.dumps(info)[:80]))
    limit = info.get(MAXIMUM_SOURCE_LENGTH)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise UserError(
            "%s: %s must be an integer >= 1, got %s"
            % (path, MAXIMUM_SOURCE_LENGTH, json.dumps(limit))
        )
    for key in (IGNORED_DOMAIN_LABELS, ENSEMBLE_REFUSAL):
        if info.get(key) is not None and not isinstance(info[key], str):
            raise UserError(
                "%s: %s must be a string or null, got %s" % (path, key, json.dumps(info[key]))
            )
    return info


def source_length_limit(export_dir, info, requested=None):
    """The number of source tokens translated per sentence, or ``None`` for no limit.

    Args:
      export_dir: The export (for messages).
      info: Its :func:`read_inference_info`.
      requested: ``--max_source_length``, or ``None``.

    Raises:
      UserError: if :obj:`requested` is below 1, or above the export's own limit (its
        SavedModel truncates there whatever the client sends).
    """
    exported = info.get(MAXIMUM_SOURCE_LENGTH)
    if requested is None:
        return exported
    if requested < 1:
        raise UserError("--max_source_length must be >= 1, got %d" % requested)
    if exported is not None and requested > exported:
        raise UserError(
            "--max_source_length: %d is above the export's %s (%d, in %s), where its SavedModel "
            "truncates every source: export the model again with a larger params: %s"
            % (
                requested,
                MAXIMUM_SOURCE_LENGTH,
                exported,
                os.path.join(assets_lib.assets_dir(export_dir), INFERENCE_INFO),
                MAXIMUM_SOURCE_LENGTH,
            )
        )
    return requested


def label_policy(export_dir, domains, info, takes_domain):
    """Whether the export's model reads domain labels, and ensembles of them.

    Decided from what the export says: its signature (no ``domain`` input: labels are
    for training only), then ``inference.json`` (``ignored_domain_labels``, which covers
    a model without domain-specific parameters, whose graph reads labels but no layer
    uses them), or for an export without that key, its domain list (none declared:
    every label reads as ``generic``).

    An ensemble label on a model that ignores labels, or cannot mix its domain views, is
    refused: it asks for a mixture the model cannot make, and translating it as one view
    would be silently wrong. A plain label on a model that ignores labels is translated
    (as ``generic``) with a warning, not refused: that is the documented behaviour of
    these families (``onmt-main infer`` checks the label file and ignores it, the Mixed
    baseline is "trained on all domains, the domain labels are ignored"), and an
    evaluation runs the same label files through every system, the baselines included.

    Args:
      export_dir: The export.
      domains: Its declared domains (:func:`ldr_opennmt.assets.read_domains`).
      info: Its :func:`read_inference_info`.
      takes_domain: Whether its signature has a ``domain`` input.

    Returns:
      ``(ignored, ensemble_refusal)``: why the labels are ignored and why ensemble labels
      are refused, each ``None`` when they are not, each prefixed with :obj:`export_dir`
      (:func:`label_reasons` without it).
    """
    return tuple(
        None if reason is None else "%s: %s" % (export_dir, reason)
        for reason in label_reasons(domains, info, takes_domain)
    )


def label_reasons(domains, info, takes_domain):
    """:func:`label_policy`'s reasons, without the export's name (``ldr-serve`` gives them
    in its answers)."""
    if not takes_domain:
        ignored = (
            "the model reads no domain label to translate (its %s signature has no domain "
            "input)" % SIGNATURE
        )
    elif IGNORED_DOMAIN_LABELS in info:  # The model's own word (null: labels are read).
        ignored = info[IGNORED_DOMAIN_LABELS] or None
    elif domains is None:  # An export made before the model said it.
        ignored = "the model declares no domains (empty %s/%s): every label reads as %s" % (
            assets_lib.ASSETS_EXTRA,
            assets_lib.DOMAINS,
            domains_lib.GENERIC,
        )
    else:
        ignored = None
    refusal = (info.get(ENSEMBLE_REFUSAL) or None) if ignored is None else ignored
    return ignored, refusal


def ensemble_label(domains, refusal=None):
    """Checks ensemble labels as far as the export allows: refused with :obj:`refusal`
    (see :func:`label_policy`); otherwise the weights of ``ens-learned`` and whether the
    model has domain views are the SavedModel's to check."""

    def _read(label, where):
        if not ensembles.is_ensemble_label(label):
            return False
        if refusal:
            raise UserError("%s: ensemble label %r: %s" % (where, label, refusal))
        if domains and label.strip(domains_lib.ASCII_SPACE) != ensembles.ENS_LEARNED:
            ensembles.parse_label(label, domains, where=where)
        return True

    return _read


def check_label_lines(path, lines, domains, expected_lines, source_path, ensemble):
    """Validates the lines of a label file as :func:`ldr_opennmt.domains.read_label_file`
    does (same messages), on lines already read (a stream is read once).

    Returns:
      The labels, stripped of ASCII whitespace.

    Raises:
      UserError: on an empty label, an unknown label or a line count mismatch.
    """
    labels = []
    for line_number, line in enumerate(lines, start=1):
        label = line.strip(domains_lib.ASCII_SPACE)
        if not label:
            raise UserError("%s:%d: empty domain label" % (path, line_number))
        where = "%s:%d" % (path, line_number)
        if not ensemble(label, where):
            domains_lib.label_id(label, domains, where)
        labels.append(label)
    if len(labels) != expected_lines:
        raise domains_lib.label_count_error(path, len(labels), expected_lines, source_path)
    return labels


def read_labels(args, input_name, num_lines, domains, ensemble_refusal=None):
    """One domain label per input line (``--domain``, or ``--domain_file`` read once: a
    file, ``-``, ``/dev/stdin``, ``<(...)``), validated against the declared domains.

    Raises:
      UserError: on a bad label, naming the file and line (or ``--domain``).
    """
    check = ensemble_label(domains, ensemble_refusal)
    if args.domain is not None:
        label = args.domain.strip()
        if not check(label, "--domain"):
            domains_lib.label_id(label, domains, "--domain")
        return [label] * num_lines
    path = args.domain_file
    lines = textio.read_text_lines(path, "domain label file")
    name = textio.STDIN if textio.is_stdin(path) else path
    return check_label_lines(name, lines, domains, num_lines, input_name, check)


def label_source(args):
    """How messages name where the labels come from (``--domain`` or the label file)."""
    if args.domain is not None:
        return "--domain"
    return textio.STDIN if textio.is_stdin(args.domain_file) else args.domain_file


def warn_ignored_labels(ignored, labels, source):
    """One warning line when a label other than ``generic`` goes to a model that
    ignores labels (:func:`label_policy`)."""
    if ignored is None:
        return
    named = [label for label in labels if label != domains_lib.GENERIC]
    if not named:
        return
    others = len(set(named)) - 1
    if source != "--domain":
        first = [label != domains_lib.GENERIC for label in labels].index(True)
        source = "%s:%d" % (source, first + 1)
    print(
        textio.WARNING
        + "%s: domain label %r%s ignored, translated as %s: %s"
        % (
            source,
            named[0],
            " (and %d other%s)" % (others, "s" if others > 1 else "") if others else "",
            domains_lib.GENERIC,
            ignored,
        ),
        file=sys.stderr,
    )
