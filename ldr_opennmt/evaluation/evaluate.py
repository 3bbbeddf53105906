"""Translate every domain's test set with several label modes and score it.

Label modes:

* ``oracle``: the true domain of each sentence;
* ``generic``: the reserved ``generic`` label (no domain parameter active);
* ``wrong``: a fixed, deliberately wrong domain: the next domain in the
  declared list (medical -> religious -> software -> medical);
* ``pred``: labels predicted by a domain classifier, read from
  ``{pred_dir}/test.{domain}.pred`` (one label per line);
* ``ens-uniform``, ``ens-soft``, ``ens-learned``: ensembles of the model's domain
  views (:mod:`ldr_opennmt.ensembles`): equal weights over the domains and generic; the
  posterior of a domain classifier (``classifier``) over the known domains, per
  sentence; the weights fitted on balanced dev data (``ensemble.json`` in the model
  directory, fitted first when missing, see :mod:`ldr_opennmt.evaluation.open_domain`).

A test domain that a system does not declare (open-domain evaluation: trained on the
other domains) has no oracle label: ``oracle`` gives it ``generic``, ``wrong`` the
system's first domain. ``scores.json`` lists those domains per system (``unseen``).

The inputs are checked whole before anything is translated or written: every source,
reference and predicted label file must be UTF-8 and have as many lines as its source
file (``--max-sentences`` cuts them all the same way, after the check), so a reference
file shifted by one line is refused rather than scored.

Models that ignore domains (Mixed) are translated once. Each output (and
``scores.json``, ``table.md``, ``bleu.png``) is written under an exclusive temporary
name and renamed when complete, so an interrupted evaluation resumes from the
translations it already has. A translation is reused only while its system's stamp
(``NAME.stamp``, a :mod:`ldr_opennmt.stamps` file, see :func:`translation_stamp`) still
matches: the same checkpoint files (a model retrained at the same path differs), decoding
options and vocabularies, the same source sentences and, per label mode, the same labels;
the log says why translations are redone (``checkpoint differs``). Only files under a stamp
are ever removed or replaced: a file at a system's translation path without its stamp is
refused (:func:`check_outputs`). System
names become file names (:func:`~ldr_opennmt.evaluation.systems.system_file_name`): a name
that looks like a path is refused where a :class:`~ldr_opennmt.evaluation.systems.System` is
made, and so are two systems of one name or of one file name.

The systems are :mod:`ldr_opennmt.evaluation.systems`'s, the ensembles' weights
:mod:`ldr_opennmt.evaluation.open_domain`'s and the report (``table.md``, ``bleu.png``)
:mod:`ldr_opennmt.evaluation.report`'s.
"""

import collections
import functools
import json
import os
import tempfile

import tensorflow as tf
from tqdm import tqdm

from ldr_opennmt import domains as domains_lib
from ldr_opennmt import ensembles, stamps
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.domains import GENERIC
from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation import open_domain, progress, report, scoring

# The report of an evaluation and the systems: here too, where their callers (commands,
# experiments) take them.
from ldr_opennmt.evaluation.report import average, examples, format_tables  # noqa: F401
from ldr_opennmt.evaluation.systems import System  # noqa: F401
from ldr_opennmt.evaluation.systems import (
    ENSEMBLE_MODES,
    MODES,
    check_system_domains,
    check_system_names,
)
from ldr_opennmt.utils import atomic_output, read_lines, write_lines, write_lines_atomic


def check_line_count(path, count, source_path, source_count, what):
    """Refuses a file aligned line by line with a source file but of another length.

    Raises:
      UserError: naming both files, e.g. ``raw/test.medical.fr:7: extra reference (7 lines,
        but the source test.medical.en has 6)``.
    """
    if count != source_count:
        raise UserError(
            "%s:%d: %s %s (%d lines, but the source %s has %d)"
            % (
                path,
                min(count, source_count) + 1,
                "extra" if count > source_count else "missing",
                what,
                count,
                source_path,
                source_count,
            )
        )


def read_predicted_labels(pred_dir, domain, domains, source_path=None, source_count=None):
    """The labels of ``{pred_dir}/test.{domain}.pred``, checked line by line.

    Args:
      pred_dir: The directory of predicted label files.
      domain: The test set's domain.
      domains: The declared domains (a label is one of them or ``generic``).
      source_path: The test set's source file, for the line-count check.
      source_count: If set, the number of lines the file must have.

    Raises:
      UserError: on a missing file, invalid UTF-8, an empty or unknown label, or a line
        count other than :obj:`source_count`, naming the file and line.
    """
    path = os.path.join(pred_dir, "test.%s.pred" % domain)
    if not os.path.exists(path):
        raise UserError("%s: missing predicted labels" % path)
    labels = [line.strip() for line in read_lines(path)]
    for number, label in enumerate(labels, start=1):
        if not label:
            raise UserError("%s:%d: empty domain label" % (path, number))
        domains_lib.label_id(label, domains, "%s:%d" % (path, number))
    if source_count is not None:
        check_line_count(path, len(labels), source_path, source_count, "predicted label")
    return labels


def labels_for(mode, domain, domains, count, pred_dir=None, predicted=None, soft=None):
    """The label lines of :obj:`count` test sentences of :obj:`domain` in :obj:`mode`.

    Args:
      mode: A label mode (:data:`MODES`).
      domain: The test set's domain.
      domains: The domains the system declares.
      count: The number of sentences.
      pred_dir: The directory of predicted label files (mode ``pred``).
      predicted: Optional ``{domain: labels}`` already read by
        :func:`read_predicted_labels` (mode ``pred``).
      soft: ``{domain: ens-soft labels}`` (mode ``ens-soft``).
    """
    if mode == "oracle":
        return [domain if domain in domains else GENERIC] * count
    if mode == "generic":
        return [GENERIC] * count
    if mode == "wrong":
        if domain not in domains:
            return [domains[0]] * count
        return [domains[(domains.index(domain) + 1) % len(domains)]] * count
    if mode in (ensembles.ENS_UNIFORM, ensembles.ENS_LEARNED):
        return [mode] * count
    if mode == "ens-soft":
        if soft is None or domain not in soft:
            raise UserError("label mode ens-soft needs a domain classifier (--classifier)")
        return soft[domain][:count]
    if mode == "pred":
        if predicted is None or domain not in predicted:
            if pred_dir is None:
                raise UserError("label mode 'pred' needs predicted label files (--pred-dir)")
            predicted = {domain: read_predicted_labels(pred_dir, domain, domains)}
        labels = predicted[domain][:count]
        if len(labels) < count:
            path = os.path.join(pred_dir or "", "test.%s.pred" % domain)
            raise UserError(
                "%s:%d: missing predicted label (%d labels for %d test sentences)"
                % (path, len(labels) + 1, len(labels), count)
            )
        return labels
    raise UserError("unknown label mode %r (known: %s)" % (mode, ", ".join(MODES)))


EvaluationData = collections.namedtuple(
    "EvaluationData", ["sources", "references", "counts", "predicted"]
)


def read_test_set(corpus_dir, src, tgt, domains, max_sentences=None, pred_dir=None, pred=False):
    """Reads and checks every domain's test set, whole, before anything is translated.

    Each source (tokenized, ``test.{domain}.{src}``), reference (``raw/test.{domain}.{tgt}``)
    and, with :obj:`pred`, predicted label file (``{pred_dir}/test.{domain}.pred``) is read
    entirely: it must be UTF-8 and the reference and labels must have exactly as many lines
    as the source. Only then are they cut to :obj:`max_sentences`.

    Returns:
      An :class:`EvaluationData`: the concatenated source lines, ``{domain: references}``,
      ``{domain: sentence count}`` and ``{domain: predicted labels}`` (``None`` without
      :obj:`pred`).

    Raises:
      UserError: on a missing file, invalid UTF-8 (``FILE:LINE: not UTF-8``) or a line
        count that differs from the source's (naming both files).
    """
    if pred and pred_dir is None:
        raise UserError("label mode 'pred' needs predicted label files (--pred-dir)")
    sources, references, counts = [], {}, collections.OrderedDict()
    predicted = {} if pred else None
    for domain in domains:
        source_path = os.path.join(corpus_dir, "test.%s.%s" % (domain, src))
        reference_path = os.path.join(corpus_dir, "raw", "test.%s.%s" % (domain, tgt))
        for path in (source_path, reference_path):
            if not os.path.exists(path):
                raise UserError("test set of %s: %s: no such file" % (domain, path))
        lines = read_lines(source_path)
        refs = read_lines(reference_path)
        check_line_count(reference_path, len(refs), source_path, len(lines), "reference")
        if pred:
            labels = read_predicted_labels(pred_dir, domain, domains, source_path, len(lines))
            predicted[domain] = labels[:max_sentences]
        lines = lines[:max_sentences]
        sources.extend(lines)
        references[domain] = refs[:max_sentences]
        counts[domain] = len(lines)
    return EvaluationData(sources, references, counts, predicted)


def translation_stamp(system, sources):
    """What a system's translations of :obj:`sources` depend on, but the labels (a
    :func:`ldr_opennmt.stamps.make_stamp`).

    Returns:
      A JSON-able dict: the SHA-256 of the checkpoint's files (``checkpoint``: its ``.index``
      and every data shard, :meth:`System.checkpoint_digest`, so that a model retrained in
      the same directory, even to the same step, differs), :meth:`System.decoding_options`,
      :meth:`System.vocabularies`, and the number and SHA-256 of the source lines given to
      the model. The labels are stamped per mode, in the stamp file's record
      (``{"format": 1, "inputs": STAMP, "modes": {MODE: labels SHA-256}}``, see
      :func:`evaluate`).
    """
    return stamps.make_stamp(
        checkpoint=system.checkpoint_digest(),
        decoding=system.decoding_options(),
        vocabularies=system.vocabularies(),
        sentences=len(sources),
        sources_sha256=stamps.lines_digest(sources),
    )


def _translation_path(out_dir, name, mode, tgt):
    return os.path.join(out_dir, "%s.%s.%s" % (name, mode, tgt))


def _stamp_path(out_dir, name):
    return os.path.join(out_dir, "%s.stamp" % name)


def check_outputs(systems, out_dir, tgt):
    """Refuses, before anything is translated, a translation file that ldr-eval did not
    write.

    A system's translations (``NAME.MODE.TGT``) are the evaluation's only while its stamp
    (``NAME.stamp``) is next to them: the stamp is written before the first translation.
    Those files are redone, hence removed or replaced, when an input changes; a file at
    such a path without a stamp (a user's file, or a corpus file in :obj:`out_dir`) would be
    lost.

    Raises:
      UserError: ``OUT/NAME.MODE.TGT: a file ldr-eval did not write (no OUT/NAME.stamp)
        ...``.
    """
    for system in systems:
        stamp_path = _stamp_path(out_dir, system.file_name)
        if os.path.lexists(stamp_path):
            continue
        for mode in MODES:
            path = _translation_path(out_dir, system.file_name, mode, tgt)
            if os.path.lexists(path):
                raise UserError(
                    "%s: a file ldr-eval did not write (no %s), where it would write the "
                    "translations of system %s: move it away or choose another output directory"
                    % (path, stamp_path, system.name)
                )


def _system_modes(system, modes):
    """The label modes a system is translated with: one (``oracle``) if it ignores labels;
    the common modes but the ensembles for a system without domain views.

    Raises:
      UserError: if the system's own modes ask for an ensemble it cannot translate.
    """
    if not system.uses_domains:
        if system.modes and set(system.modes) & set(ENSEMBLE_MODES):
            raise UserError("system %s: %s" % (system.name, system.ensemble_refusal))
        return ("oracle",)
    if system.modes:
        if set(system.modes) & set(ENSEMBLE_MODES) and system.ensemble_refusal:
            raise UserError("system %s: %s" % (system.name, system.ensemble_refusal))
        return system.modes
    if system.ensemble_refusal:
        return tuple(mode for mode in modes if mode not in ENSEMBLE_MODES) or ("oracle",)
    return tuple(modes)


def _prepare_ensembles(systems, system_modes, corpus_dir, info, counts, out_dir, classifier):
    """Fits the missing ens-learned weights and computes the ens-soft labels.

    Returns:
      ``{domain: ens-soft labels}`` or ``None`` if no system uses ens-soft.
    """
    soft = None
    src, tgt = info["source_lang"], info["target_lang"]
    for system in systems:
        modes = system_modes[system.name]
        if "ens-soft" in modes:
            if classifier is None:
                raise UserError(
                    "system %s: label mode ens-soft needs a domain classifier (--classifier)"
                    % system.name
                )
            open_domain.check_classifier(classifier, system)
        if ensembles.ENS_LEARNED not in modes:
            continue
        decision = open_domain.learned_weights_decision(system, corpus_dir, src, tgt)
        if not decision:
            tf.get_logger().info(
                "Fitting the ens-learned weights of %s: %s", system.name, decision.reason
            )
            record = open_domain.fit_learned_weights(system, corpus_dir, src, tgt)
            tf.get_logger().info(
                "%s: ens-learned weights %s",
                system.name,
                dict(zip(record["views"], record["weights"])),
            )
            system.reload()
    if any("ens-soft" in modes for modes in system_modes.values()):
        soft = {}
        os.makedirs(out_dir, exist_ok=True)
        for domain, count in counts.items():
            source = os.path.join(corpus_dir, "test.%s.%s" % (domain, src))
            path = os.path.join(out_dir, "%s.test.%s.soft" % (classifier.file_name, domain))
            soft[domain] = open_domain.soft_labels(classifier, source, path, out_dir)[:count]
    return soft


def evaluate(
    corpus_dir,
    systems,
    out_dir,
    modes=("oracle", "generic", "wrong"),
    baseline=None,
    max_sentences=None,
    pred_dir=None,
    bootstrap_samples=1000,
    cache_only=False,
    classifier=None,
):
    """Runs the evaluation and writes ``scores.json``, ``table.md`` and ``bleu.png``.

    Args:
      corpus_dir: A corpus built by ``ldr-data``.
      systems: A list of :class:`System`.
      out_dir: Where translations and results are written.
      modes: Label modes for systems that use domains.
      baseline: Name of the system the significance tests compare against.
      max_sentences: Evaluate only the first N test sentences of each domain.
      pred_dir: Directory of predicted label files (mode ``pred``).
      bootstrap_samples: Paired bootstrap resamples.
      cache_only: Only translate (what is not translated yet) and write no scores: a
        later evaluation of these systems and others reuses the translations. Runs of
        different systems may share :obj:`out_dir` side by side.
      classifier: The domain classifier's :class:`System` (mode ``ens-soft``).

    Returns:
      The results dict (also written to ``scores.json``), or ``None`` with
      :obj:`cache_only`.

    Raises:
      UserError: on an input error (see :func:`read_test_set`), found before anything is
        translated or written.
    """
    if max_sentences is not None and max_sentences < 1:
        raise UserError("max_sentences must be at least 1, got %d" % max_sentences)
    info = corpus_lib.load_info(corpus_dir)
    domains = info["domains"]
    src, tgt = info["source_lang"], info["target_lang"]
    detok = corpus_lib.load_tokenizer(corpus_dir, tgt)
    _check_systems(systems, corpus_dir, domains, out_dir, tgt)
    system_modes = collections.OrderedDict(
        (system.name, _system_modes(system, modes)) for system in systems
    )
    system_modes, notes = _measurable_modes(system_modes, domains, systems)
    _check_baseline(baseline, system_modes)
    test_set = read_test_set(
        corpus_dir,
        src,
        tgt,
        domains,
        max_sentences=max_sentences,
        pred_dir=pred_dir,
        pred=any("pred" in chosen for chosen in system_modes.values()),
    )
    soft = _prepare_ensembles(
        systems, system_modes, corpus_dir, info, test_set.counts, out_dir, classifier
    )
    labels = functools.partial(
        _label_lines, domains=domains, test_set=test_set, pred_dir=pred_dir, soft=soft
    )
    system_stamps = _stamps(systems, system_modes, test_set.sources, labels)
    os.makedirs(out_dir, exist_ok=True)
    outputs = _translate(systems, system_modes, system_stamps, test_set, labels, out_dir, info)
    if cache_only:
        return None
    rows, hypotheses = _score(outputs, test_set, domains, detok)
    baseline, significance = _significance(
        rows, hypotheses, test_set.references, domains, baseline, bootstrap_samples
    )
    results = _results(systems, domains, test_set, outputs, rows, baseline, significance)
    if notes:
        results["notes"] = notes
    _write_results(results, out_dir)
    return results


def _measurable_modes(system_modes, domains, systems=()):
    """The label modes that measure something on a corpus of :obj:`domains`, each left out
    said on the console and in table.md:

    * on a corpus of one domain no label is wrong (``wrong`` would give the true label, rows
      equal to the oracle's byte for byte): no ``wrong`` rows;
    * a system that reads labels but declares none of the corpus's domains has no true label
      for any sentence (``oracle`` would be ``generic`` for all, ``wrong`` its first domain
      for all): no ``oracle`` nor ``wrong`` rows for it (``generic`` at least).

    Returns:
      ``(system_modes, notes)``: the modes kept per system, and one line per mode left out.
    """
    kept, notes = collections.OrderedDict(system_modes), []
    if len(domains) == 1 and any("wrong" in chosen for chosen in kept.values()):
        notes.append(
            "no wrong-label rows: the corpus has one domain (%s), so no label is wrong for its"
            " sentences" % domains[0]
        )
        for name, chosen in kept.items():
            kept[name] = tuple(mode for mode in chosen if mode != "wrong") or ("oracle",)
    for system in systems:
        declared = system.domains if system.uses_domains else None
        if not declared or set(declared) & set(domains):
            continue
        notes.append(
            "no oracle or wrong-label rows for %s: it declares none of the corpus's domains (it"
            " declares %s; the corpus has %s), so every sentence's label would be generic"
            % (system.name, ", ".join(declared), ", ".join(domains))
        )
        chosen = kept[system.name]
        kept[system.name] = tuple(m for m in chosen if m not in ("oracle", "wrong")) or ("generic",)
    for note in notes:
        tf.get_logger().warning("ldr-eval: %s", note)
    return kept, notes


def _check_systems(systems, corpus_dir, domains, out_dir, tgt):
    """Refuses, before anything is read or written, two systems of one name (they would
    share their files and row), a system that declares a domain the corpus lacks, and a
    translation file the evaluation did not write (:func:`check_outputs`).

    Raises:
      UserError: naming the system, domain or file.
    """
    check_system_names(systems, "systems")
    check_system_domains(systems, domains, corpus_dir)
    check_outputs(systems, out_dir, tgt)


def _label_lines(mode, system, domains, test_set, pred_dir, soft):
    """The label line of each test sentence (every domain, in order) for :obj:`system` in
    :obj:`mode` (:func:`labels_for` with the domains it declares).

    Args:
      mode: The label mode.
      system: The :class:`~ldr_opennmt.evaluation.systems.System`.
      domains: The corpus' domains, in order.
      test_set: The :class:`EvaluationData`.
      pred_dir: The directory of predicted label files (mode ``pred``).
      soft: ``{domain: ens-soft labels}`` (mode ``ens-soft``).
    """
    declared = system.domains or domains
    labels = []
    for domain in domains:
        labels.extend(
            labels_for(
                mode,
                domain,
                declared,
                test_set.counts[domain],
                pred_dir,
                test_set.predicted,
                soft,
            )
        )
    return labels


def _stamps(systems, system_modes, sources, labels):
    """Everything each system's translations depend on, before anything is written.

    Args:
      systems: The systems.
      system_modes: ``{system name: label modes}``.
      sources: The source lines.
      labels: ``labels(mode, system)``: the label lines (:func:`_label_lines`).

    Returns:
      A list of ``(translation_stamp, {mode: SHA-256 of its labels})``, one per system.
    """
    return [
        (
            translation_stamp(system, sources),
            {mode: stamps.lines_digest(labels(mode, system)) for mode in system_modes[system.name]},
        )
        for system in systems
    ]


def _translate(systems, system_modes, system_stamps, test_set, labels, out_dir, info):
    """Translates, per system, what its stamp does not cover yet (:func:`_translate_system`).

    Args:
      systems: The systems.
      system_modes: ``{system name: label modes}``.
      system_stamps: Their stamps (:func:`_stamps`).
      test_set: The :class:`EvaluationData` (its source lines and counts per domain).
      labels: ``labels(mode, system)``: the label lines (:func:`_label_lines`).
      out_dir: The output directory.
      info: The corpus' ``info.json``.

    Returns:
      An ordered dict ``{(system name, mode): (row name, translation file)}``.
    """
    outputs = collections.OrderedDict()
    for system, (stamp, label_digests) in zip(
        tqdm(systems, desc="translating", unit="system", disable=None), system_stamps
    ):
        chosen = system_modes[system.name]
        paths = {
            mode: _translation_path(out_dir, system.file_name, mode, info["target_lang"])
            for mode in MODES
        }
        for mode in chosen:
            # Models that ignore domains are translated once and named alone.
            row = system.name if len(chosen) == 1 else "%s (%s)" % (system.name, mode)
            outputs[(system.name, mode)] = (row, paths[mode])
        _translate_system(
            system, chosen, paths, stamp, label_digests, test_set, labels, out_dir, info
        )
    return outputs


def _kept_translations(system, chosen, paths, stamp, label_digests, out_dir):
    """The translations of a system that its stamp still covers; removes the others.

    A translation is reused only if the stamp file records the same stamp
    (:func:`ldr_opennmt.stamps.matches`: the same checkpoint files, decoding options and
    sentences) and, for its mode, the same labels; otherwise it is removed (a stale file
    never looks valid) and redone. Only files of a system with a stamp file are removed:
    without one, :func:`check_outputs` found none there.

    Returns:
      ``(kept, valid, decision)``: ``{mode: labels SHA-256}`` of the translations kept, of
      those the stamp file records under the same stamp (``{}`` if it records another), and
      the :class:`~ldr_opennmt.stamps.Decision` on the stamp file.
    """
    stamp_path = _stamp_path(out_dir, system.file_name)
    owned = os.path.lexists(stamp_path)
    decision = stamps.matches(stamp_path, stamp)
    valid = decision.record.get("modes") if decision else None
    if not isinstance(valid, dict):
        valid = {}
    kept = {
        mode: digest
        for mode, digest in valid.items()
        if mode in MODES
        and os.path.exists(paths[mode])
        and (mode not in chosen or digest == label_digests[mode])
    }
    for mode in MODES:
        if owned and mode not in kept and os.path.lexists(paths[mode]):
            os.remove(paths[mode])
    return kept, valid, decision


def _redo_reason(decision, valid, missing, paths, label_digests):
    """Why the modes :obj:`missing` of a system are translated, in one line: what differs
    from its stamp file (:attr:`ldr_opennmt.stamps.Decision.reason`, e.g. ``checkpoint
    differs``), or per mode, other labels or a translation not made or lost."""
    if not decision:
        return decision.reason
    reasons = []
    for mode in missing:
        if mode not in valid:
            reasons.append("%s not translated yet" % mode)
        elif valid[mode] != label_digests[mode]:
            reasons.append("labels of %s differ" % mode)
        else:
            reasons.append("missing: %s" % paths[mode])
    return "; ".join(reasons)


def _translate_system(system, chosen, paths, stamp, label_digests, test_set, labels, out_dir, info):
    """Translates the modes of one system that its stamp does not cover, in one inference
    run, and writes each mode's translations (``NAME.MODE.TGT``) and the stamp. A progress
    bar per mode, and translations stopped at ``maximum_decoding_length`` counted per mode
    and domain (:class:`~ldr_opennmt.evaluation.progress.TranslationProgress`).

    Args:
      system: The system.
      chosen: Its label modes.
      paths: ``{mode: translation file}``.
      stamp: Its :func:`translation_stamp`.
      label_digests: ``{mode: SHA-256 of its labels}``.
      test_set: The :class:`EvaluationData`.
      labels: ``labels(mode, system)``: the label lines (:func:`_label_lines`).
      out_dir: The output directory.
      info: The corpus' ``info.json``.

    Raises:
      UserError: if the model gives another number of translations than of sources.
    """
    sources = test_set.sources
    stamp_path = _stamp_path(out_dir, system.file_name)
    kept, valid, decision = _kept_translations(system, chosen, paths, stamp, label_digests, out_dir)
    missing = [m for m in chosen if m not in kept]
    if not missing:
        return
    tf.get_logger().info(
        "Translating %s (%s): %s",
        system.name,
        ", ".join(missing),
        _redo_reason(decision, valid, missing, paths, label_digests),
    )
    if not decision or kept != valid:
        # The stale entries go first: a mode redone with other labels and killed after
        # its file is written must not match the old entry in a later run.
        stamps.write(stamp_path, stamp, modes=kept)
    # One inference run per system (one model load and trace): the test set is
    # repeated once per label mode. Its input and output files live in an exclusive
    # temporary directory, removed even if the translation fails.
    with tempfile.TemporaryDirectory(
        prefix=".%s.translate." % system.file_name, dir=out_dir
    ) as tmp:
        run_source = os.path.join(tmp, "input.%s" % info["source_lang"])
        run_labels = os.path.join(tmp, "input.labels")
        run_output = os.path.join(tmp, "output.%s" % info["target_lang"])
        write_lines(run_source, sources * len(missing))
        write_lines(run_labels, [label for mode in missing for label in labels(mode, system)])
        listener = progress.TranslationProgress(system.name, missing, test_set.counts)
        system.translate(run_source, run_labels, run_output, listener=listener)
        listener.report()
        translations = read_lines(run_output)
    if len(translations) != len(sources) * len(missing):
        raise UserError(
            "system %s: %d translations for %d input sentences (infer: n_best must be 1)"
            % (system.name, len(translations), len(sources) * len(missing))
        )
    for i, mode in enumerate(missing):
        write_lines_atomic(paths[mode], translations[i * len(sources) : (i + 1) * len(sources)])
        kept[mode] = label_digests[mode]
    # Written after the translations: one killed in between is redone, never trusted.
    stamps.write(stamp_path, stamp, modes=kept)


def _score(outputs, test_set, domains, detok):
    """Scores each row's detokenized translations per domain (:func:`scoring.score`).

    Args:
      outputs: ``{key: (row name, translation file)}`` (:func:`_translate`).
      test_set: The :class:`EvaluationData`.
      domains: The domains, in the order of the test set.
      detok: The target tokenizer.

    Returns:
      ``(rows, hypotheses)``: a list of ``(row name, {domain: scores})``, and the
      detokenized translations ``{(row name, domain): lines}``.

    Raises:
      UserError: if a translation file does not have a line per source sentence.
    """
    rows = []
    hypotheses = {}
    for row, output in outputs.values():
        lines = read_lines(output)
        scoring.check_aligned(lines, test_set.sources, output)
        start = 0
        scores = {}
        for domain in domains:
            count = test_set.counts[domain]
            hyps = [detok.detokenize(line.split()) for line in lines[start : start + count]]
            start += count
            hypotheses[(row, domain)] = hyps
            scores[domain] = scoring.score(hyps, test_set.references[domain])
        rows.append((row, scores))
    return rows, hypotheses


def _check_baseline(baseline, system_modes):
    """Refuses, before anything is translated, a baseline that names no system nor one of a
    system's rows (``NAME (MODE)``, MODE one of its label modes).

    Raises:
      UserError: naming the baseline and the systems.
    """
    if baseline is None:
        return
    names = set(system_modes)
    names.update(
        "%s (%s)" % (name, mode) for name, chosen in system_modes.items() for mode in chosen
    )
    if baseline not in names:
        raise UserError(
            "--baseline %r is not one of the systems (%s): nothing was translated"
            % (baseline, ", ".join(system_modes))
        )


def _significance(rows, hypotheses, references, domains, baseline, bootstrap_samples):
    """Paired bootstrap tests of each row against the baseline, per domain.

    Args:
      rows: The scored rows (:func:`_score`).
      hypotheses: ``{(row name, domain): lines}``.
      references: ``{domain: references}``.
      domains: The domains.
      baseline: The baseline system's name, or ``None`` (no test); a system that uses
        domains stands for its ``oracle`` row.
      bootstrap_samples: Paired bootstrap resamples.

    Returns:
      ``(baseline row, {row name: {domain: p-value}})``.

    Raises:
      UserError: if the baseline is not one of the rows.
    """
    significance = {}
    if baseline is None:
        return baseline, significance
    row_names = [row for row, _ in rows]
    if baseline not in row_names and "%s (oracle)" % baseline in row_names:
        baseline = "%s (oracle)" % baseline  # A baseline that uses domains.
    if baseline not in row_names:
        raise UserError(
            "baseline %r is not one of the systems (%s)" % (baseline, ", ".join(row_names))
        )
    for domain in domains:
        others = {row: hypotheses[(row, domain)] for row, _ in rows if row != baseline}
        p_values = scoring.paired_bootstrap(
            hypotheses[(baseline, domain)],
            others,
            references[domain],
            n_samples=bootstrap_samples,
        )
        for row, p_value in p_values.items():
            significance.setdefault(row, {})[domain] = p_value
    return baseline, significance


def _results(systems, domains, test_set, outputs, rows, baseline, significance):
    """The results dict of :func:`evaluate` (written to ``scores.json``).

    Args:
      systems: The systems.
      domains: The domains.
      test_set: The :class:`EvaluationData`.
      outputs: ``{key: (row name, translation file)}`` (:func:`_translate`).
      rows: The scored rows (:func:`_score`).
      baseline: The baseline row, or ``None``.
      significance: ``{row name: {domain: p-value}}`` (:func:`_significance`).
    """
    return {
        "domains": domains,
        "sentences": test_set.counts,
        "rows": rows,
        "significance": significance,
        "baseline": baseline,
        # Test domains a system does not declare (oracle: generic; see the module doc).
        "unseen": {
            system.name: [d for d in domains if system.domains and d not in system.domains]
            for system in systems
            if system.domains and set(domains) - set(system.domains)
        },
        "signatures": scoring.signatures(),
        # The tokenized translations of each row, in the order of the domains.
        "outputs": collections.OrderedDict((row, output) for row, output in outputs.values()),
    }


def _write_results(results, out_dir):
    """Writes ``scores.json``, ``table.md`` (:func:`format_tables`) and ``bleu.png``
    (:func:`ldr_opennmt.evaluation.report.score_chart`), each atomically."""
    with atomic_output(os.path.join(out_dir, "scores.json")) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    write_lines_atomic(os.path.join(out_dir, "table.md"), [format_tables(results)])
    report.score_chart(
        results["rows"],
        results["domains"],
        "bleu",
        os.path.join(out_dir, "bleu.png"),
        "BLEU per domain",
    )
