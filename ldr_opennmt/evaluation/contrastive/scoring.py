"""The scoring of the contrastive test: each system scores the items' references and variants
by forced decoding, per label mode, and the scores are summarized per domain (:func:`evaluate`).

Each system scores every item's reference and variants with OpenNMT-tf's ``score`` run
(:meth:`opennmt.Runner.score` of the system's multi-domain Runner: the sum of the target
tokens' log-probabilities, ``</s>`` included), text tokenized with the corpus' BPE
tokenizers, label files as in :mod:`~ldr_opennmt.evaluation.evaluate`. Label modes:

* ``oracle``, ``generic``, ``wrong``: as :func:`~ldr_opennmt.evaluation.evaluate.labels_for`
  (the item's domain, ``generic``, the next domain); reported: **accuracy**, the % of items
  where the reference scores strictly above every variant (a tie is not right);
* ``flipped``: each variant is compared with the reference under *the variant's* domain label;
  reported: **follow**, the % of (item, variant) pairs where the system then scores the variant
  above the reference, i.e. follows the label.

With both ``oracle`` and ``flipped``, the **label effect** (:func:`label_shift`) compares the
two for each pair: the % of pairs where the variant's label, instead of the item's, raises the
variant's log-probability relative to the reference's. Whole-sentence log-probabilities favour
short texts, and most variants have more target tokens than their reference (a rarer word cut
into more BPE pieces), so accuracy and follow rates carry a length bias that even a random
model shows; the label effect compares the same two texts under two labels, so that bias
cancels out.

Models that ignore labels (Mixed; domain mixing, labels for training only) are scored once;
their follow rate, from the same scores, is what a system that does not listen to the label
gets (their label effect is 0). Scores are written per system and mode (under exclusive
temporary names, renamed when complete) and reused while the system's stamp matches
(``NAME.contrastive.stamp``, a :mod:`ldr_opennmt.stamps` file written before them, see
:func:`scores_stamp`): the same checkpoint files (a model retrained at the same path
differs), items, corpus tokenizers, vocabularies and domains; the log says why scores are
redone (``checkpoint differs``). Only files under a stamp are ever removed: a score file
without its system's stamp is refused (:func:`check_outputs`), and so are two systems of one
name.

The results are written by :mod:`ldr_opennmt.evaluation.contrastive.report`.
"""

import collections
import hashlib
import json
import os
import tempfile

import tensorflow as tf
from tqdm import tqdm

from ldr_opennmt import stamps
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation import evaluate as evaluate_lib
from ldr_opennmt.evaluation.contrastive.items import (
    ITEMS_FILE,
    build_items,
    no_items_reason,
    read_items,
)
from ldr_opennmt.evaluation.contrastive.report import write_report
from ldr_opennmt.evaluation.systems import check_system_domains, check_system_names
from ldr_opennmt.utils import read_lines, write_lines, write_lines_atomic

MODES = ("oracle", "generic", "wrong", "flipped")


def _items_sha1(path):
    """The SHA-1 of the items file, which names it in the results (``items_sha1``); whether
    scores are reused is the stamp's to say (:func:`scores_stamp`)."""
    with open(path, "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()


def scores_stamp(system, checkpoint, items_path, corpus_dir, info):
    """What a system's scores of the items depend on (a
    :func:`ldr_opennmt.stamps.make_stamp`).

    Args:
      system: The :class:`~ldr_opennmt.evaluation.systems.System`.
      checkpoint: The checkpoint it scores with.
      items_path: The items file.
      corpus_dir: The corpus (its BPE models tokenize the items).
      info: Its ``info.json`` (its domains, in order: the ``wrong`` labels follow them).

    Returns:
      The SHA-256 of the checkpoint's files (``checkpoint``,
      :meth:`~ldr_opennmt.evaluation.systems.System.checkpoint_digest`), of the items file
      (``items``), of the corpus' source and target BPE models (``tokenizers``), the
      system's vocabularies and domains (what its labels mean), and the corpus' domains.
    """
    bpe = [os.path.join(corpus_dir, "bpe.%s" % info[key]) for key in ("source_lang", "target_lang")]
    return stamps.make_stamp(
        checkpoint=system.checkpoint_digest(checkpoint),
        items=stamps.file_digest(items_path),
        tokenizers=stamps.files_digest(bpe),
        vocabularies=system.vocabularies(),
        system_domains=system.domains,
        domains=info["domains"],
    )


def _candidates(item, mode, domains):
    """The (label, target) pairs scored for an item in a mode, in a fixed layout: the
    reference then each variant (one label), or per variant (reference, variant) under the
    variant's label (``flipped``)."""
    if mode == "flipped":
        return [
            (variant["domain"], text)
            for variant in item["variants"]
            for text in (item["reference"], variant["text"])
        ]
    label = evaluate_lib.labels_for(mode, item["domain"], domains, 1)[0]
    return [(label, item["reference"])] + [(label, v["text"]) for v in item["variants"]]


def _score_system(system, items, modes, domains, tokenizers, out_dir, outputs):
    """Scores the items in the given modes with one OpenNMT-tf score run; writes one score
    file per mode (JSON lines: ``{"id", "reference", "variants"}`` log-probabilities)."""
    src_tok, tgt_tok = tokenizers
    lines = collections.OrderedDict()
    layout = {}
    for mode in modes:
        layout[mode] = []
        for item in items:
            source = " ".join(src_tok.tokenize(item["source"])[0])
            indices = []
            for label, target in _candidates(item, mode, domains):
                key = (source, label, " ".join(tgt_tok.tokenize(target)[0]))
                indices.append(lines.setdefault(key, len(lines)))
            layout[mode].append(indices)
    # The score run's inputs and output live in an exclusive temporary directory (no
    # predictable name a planted link could redirect), removed even if the run fails.
    with tempfile.TemporaryDirectory(
        prefix=".%s.contrastive." % system.file_name, dir=out_dir
    ) as directory:
        paths = [os.path.join(directory, name) for name in ("input.src", "input.labels")]
        paths.append(os.path.join(directory, "input.tgt"))
        for i, path in enumerate(paths):
            write_lines(path, [key[i] for key in lines])
        scores_path = os.path.join(directory, "scores")
        system.runner.score(
            [paths[0], paths[1]] if system.reads_labels else paths[0],
            predictions_file=paths[2],
            checkpoint_path=system.checkpoint(),
            output_file=scores_path,
        )
        scored = read_lines(scores_path)
    if len(scored) != len(lines):
        raise UserError(
            "system %s: OpenNMT-tf scored %d targets of %d" % (system.name, len(scored), len(lines))
        )
    log_probs = []
    for number, (line, key) in enumerate(zip(scored, lines), start=1):
        score, sep, tokens = line.partition(" ||| ")
        if not sep or tokens != key[2]:
            raise UserError(
                "system %s: score %d is for %r, not %r" % (system.name, number, tokens, key[2])
            )
        log_probs.append(-float(score))  # OpenNMT-tf's score is the negative log-likelihood.
    for mode in modes:
        records = []
        for item, indices in zip(items, layout[mode]):
            values = [log_probs[i] for i in indices]
            if mode == "flipped":
                record = {"id": item["id"], "reference": values[0::2], "variants": values[1::2]}
            else:
                record = {"id": item["id"], "reference": values[0], "variants": values[1:]}
            records.append(json.dumps(record))
        write_lines_atomic(outputs[mode], records)


def _read_scores(path, items):
    records = [json.loads(line) for line in read_lines(path)]
    if [r["id"] for r in records] != [item["id"] for item in items]:
        raise UserError("%s: scores of other items (delete it to score again)" % path)
    return records


def _percent(hits, total):
    return 100.0 * hits / total if total else None


def summarize(items, records, domains, follow=False):
    """Per-domain results of one system and mode.

    Args:
      items: The items.
      records: Their scores (``{"reference", "variants"}`` per item; for ``flipped``, lists of
        the reference's score under each variant's label).
      domains: The domain order.
      follow: Whether to count pairs where a variant beats the reference (``flipped``, or the
        scores of a system that ignores labels) rather than items where the reference beats
        every variant.

    Returns:
      ``{"values": {domain|"all": percent}, "counts": {...}, "margin": {...}}``; ``margin`` is
      the mean log-probability of the reference minus that of its best variant (accuracy) or
      of each variant minus the reference (follow). Domains without items have ``None``.
    """
    hits = collections.Counter()
    totals = collections.Counter()
    margins = collections.defaultdict(float)
    words = collections.defaultdict(lambda: [0, 0])
    for item, record in zip(items, records):
        domain = item["domain"]
        references = record["reference"]
        if not isinstance(references, list):
            references = [references] * len(record["variants"])
        if follow:
            for reference, variant in zip(references, record["variants"]):
                for key in (domain, "all"):
                    totals[key] += 1
                    hits[key] += variant > reference
                    margins[key] += variant - reference
        else:
            right = all(reference > v for reference, v in zip(references, record["variants"]))
            margin = min(reference - v for reference, v in zip(references, record["variants"]))
            for key in (domain, "all"):
                totals[key] += 1
                hits[key] += right
                margins[key] += margin
            words[item["word"]][0] += right
            words[item["word"]][1] += 1
    keys = list(domains) + ["all"]
    result = {
        "values": {k: _percent(hits[k], totals[k]) for k in keys},
        "counts": {k: totals[k] for k in keys},
        "margin": {k: margins[k] / totals[k] if totals[k] else None for k in keys},
    }
    if not follow:
        result["words"] = {w: _percent(h, n) for w, (h, n) in sorted(words.items())}
    return result


def label_shift(items, oracle, flipped, domains):
    """How much the variant's label moves a system towards the variant, text length aside.

    For each (item, variant) pair, the shift is ``(v_f - r_f) - (v_o - r_o)``: the variant's
    log-probability minus the reference's under the variant's label (``flipped``), minus the
    same difference under the item's label (``oracle``). Both differences compare the same two
    texts, so whatever favours one text under any label (its length in tokens, rare words)
    cancels out; a system that ignores labels has a shift of 0.

    Args:
      items: The items.
      oracle: Their ``oracle`` scores.
      flipped: Their ``flipped`` scores.
      domains: The domain order.

    Returns:
      ``{"values": {domain|"all": % of pairs with a positive shift}, "counts": {...},
      "margin": {...: mean shift}}``.
    """
    hits = collections.Counter()
    totals = collections.Counter()
    shifts = collections.defaultdict(float)
    for item, o, f in zip(items, oracle, flipped):
        for v_o, r_f, v_f in zip(o["variants"], f["reference"], f["variants"]):
            shift = (v_f - r_f) - (v_o - o["reference"])
            for key in (item["domain"], "all"):
                totals[key] += 1
                hits[key] += shift > 0
                shifts[key] += shift
    keys = list(domains) + ["all"]
    return {
        "values": {k: _percent(hits[k], totals[k]) for k in keys},
        "counts": {k: totals[k] for k in keys},
        "margin": {k: shifts[k] / totals[k] if totals[k] else None for k in keys},
    }


def _scores_path(out_dir, name, mode):
    return os.path.join(out_dir, "%s.%s.contrastive.jsonl" % (name, mode))


def _stamp_path(out_dir, name):
    return os.path.join(out_dir, "%s.contrastive.stamp" % name)


def check_outputs(systems, out_dir):
    """Refuses, before any work, two systems of one name and a score file that this
    evaluation did not write.

    A system's score files (``NAME.MODE.contrastive.jsonl``) are the evaluation's only while
    its stamp (``NAME.contrastive.stamp``, written before the first of them) is next to them:
    they are removed when the stamp no longer matches. A file at such a path without a stamp
    would be lost.

    Raises:
      UserError: naming the system name given twice, or the file and the missing stamp.
    """
    check_system_names(systems, "systems")
    for system in systems:
        stamp_path = _stamp_path(out_dir, system.file_name)
        if os.path.lexists(stamp_path):
            continue
        for mode in MODES:
            path = _scores_path(out_dir, system.file_name, mode)
            if os.path.lexists(path):
                raise UserError(
                    "%s: a file ldr-eval contrastive did not write (no %s), where it would "
                    "write the scores of system %s: move it away or choose another output "
                    "directory" % (path, stamp_path, system.name)
                )


def evaluate(
    corpus_dir,
    systems,
    out_dir,
    items_path=None,
    modes=MODES,
    system_modes=None,
    cache_only=False,
):
    """Scores the contrastive items with each system and label mode.

    Writes ``contrastive.json``, ``contrastive.md`` and ``contrastive.png`` in :obj:`out_dir`
    (:func:`~ldr_opennmt.evaluation.contrastive.report.write_report`), and the scores of each
    system and mode (``{name}.{mode}.contrastive.jsonl``, reused while the checkpoint and
    items are the same).

    Args:
      corpus_dir: The corpus the items come from (for its tokenizers and domains).
      systems: A list of :class:`~ldr_opennmt.evaluation.systems.System` (their ``modes``,
        for the BLEU evaluation, are not used here: see :obj:`system_modes`).
      out_dir: The output directory.
      items_path: The items file (default: built by
        :func:`~ldr_opennmt.evaluation.contrastive.items.build_items` into
        ``out_dir/items.jsonl``).
      modes: Label modes for systems that use domains (:data:`MODES`).
      system_modes: Optional ``{system name: modes}`` overriding :obj:`modes`.
      cache_only: Only score (what is not scored yet) and write no summary: a later
        evaluation of these systems and others reuses the scores. Runs of different
        systems may share :obj:`out_dir` side by side (with the same items file).

    Returns:
      The results dict (also written to ``contrastive.json``), or ``None`` with
      :obj:`cache_only`.

    Raises:
      UserError: on an unknown mode or system name, a malformed items file, a domain the
        corpus lacks, or a system without a trained model.
    """
    info = corpus_lib.load_info(corpus_dir)
    domains = info["domains"]
    check_outputs(systems, out_dir)
    os.makedirs(out_dir, exist_ok=True)
    system_modes = dict(system_modes or {})
    _check_modes(systems, modes, system_modes)
    check_system_domains(systems, domains, corpus_dir)
    if items_path is None:
        items_path = os.path.join(out_dir, ITEMS_FILE)
        build_items(corpus_dir, items_path)
    items = read_items(items_path, domains)
    if not items:
        return _not_run(items_path, systems, system_modes, modes, out_dir, domains, cache_only)
    tokenizers = (
        corpus_lib.load_tokenizer(corpus_dir, info["source_lang"]),
        corpus_lib.load_tokenizer(corpus_dir, info["target_lang"]),
    )

    rows = []
    for system in tqdm(systems, desc="scoring", unit="system", disable=None):
        chosen = tuple(system_modes.get(system.name, modes)) if system.uses_domains else ("oracle",)
        checkpoint = system.checkpoint()
        # Scores are reused only for the same checkpoint files, items and tokenizers.
        stamp = scores_stamp(system, checkpoint, items_path, corpus_dir, info)
        outputs = _scores(system, chosen, items, domains, tokenizers, out_dir, stamp)
        if not cache_only:
            rows += _rows(system, chosen, outputs, checkpoint, items, domains)

    if cache_only:
        return None
    results = _results(items_path, _items_sha1(items_path), domains, items, rows)
    write_report(results, out_dir)
    return results


def _not_run(items_path, systems, system_modes, modes, out_dir, domains, cache_only):
    """The contrastive test on an empty items file that
    :func:`~ldr_opennmt.evaluation.contrastive.items.build_items` wrote with ``allow_none``:
    empty score files (the outputs a pipeline waits for) and results without rows that say why
    (``not_run``).

    """
    reason = no_items_reason(items_path)
    for system in systems:
        chosen = tuple(system_modes.get(system.name, modes)) if system.uses_domains else ("oracle",)
        # Its stamp first (as _scores): the empty files are this items file's, and are
        # replaced once there are items.
        stamps.write(
            _stamp_path(out_dir, system.file_name),
            {"items_sha1": _items_sha1(items_path), "not_run": reason},
        )
        for mode in chosen:
            write_lines_atomic(_scores_path(out_dir, system.file_name, mode), [])
    if cache_only:
        return None
    results = _results(items_path, _items_sha1(items_path), domains, [], [])
    results["not_run"] = reason
    write_report(results, out_dir)
    return results


def _check_modes(systems, modes, system_modes):
    """Refuses an unknown or empty list of label modes, and modes given for a system that is
    not one of :obj:`systems`.

    Raises:
      UserError: naming the system and the unknown modes.
    """
    names = [system.name for system in systems]
    for name, chosen in [(None, modes)] + list(system_modes.items()):
        if name is not None and name not in names:
            raise UserError("contrastive modes given for %r, which is not a system" % name)
        unknown = [m for m in chosen if m not in MODES]
        if unknown or not chosen:
            raise UserError(
                "%sunknown contrastive label modes %s (known: %s)"
                % ("system %s: " % name if name else "", unknown or list(chosen), ", ".join(MODES))
            )


def _scores(system, chosen, items, domains, tokenizers, out_dir, stamp):
    """Scores the items in the modes that a system has no scores of under :obj:`stamp` yet.

    Args:
      system: The system.
      chosen: Its label modes.
      items: The items.
      domains: The domain order.
      tokenizers: The source and target tokenizers.
      out_dir: The output directory.
      stamp: What its scores depend on (:func:`scores_stamp`), recorded in its stamp file
        (``NAME.contrastive.stamp``).

    Returns:
      ``{mode: score file}``.
    """
    outputs = {mode: _scores_path(out_dir, system.file_name, mode) for mode in chosen}
    stamp_path = _stamp_path(out_dir, system.file_name)
    decision = stamps.matches(stamp_path, stamp)
    if not decision:
        # The stamp file covers every mode's scores of the system, those of other runs
        # too (the new stamp will cover them); without one (check_outputs found no score
        # file then) nothing is removed. An unreadable stamp file (a former format) is one.
        if os.path.lexists(stamp_path):
            for mode in MODES:
                path = _scores_path(out_dir, system.file_name, mode)
                if os.path.lexists(path):
                    os.remove(path)
        # Written before any score file, so that each is covered by the stamp of the
        # inputs it was computed from (a run killed after the scores used to leave them
        # under the previous stamp, valid again for those inputs).
        stamps.write(stamp_path, stamp)
    missing = [mode for mode in chosen if not os.path.exists(outputs[mode])]
    if missing:
        tf.get_logger().info(
            "Scoring the contrastive items with %s (%s): %s",
            system.name,
            ", ".join(missing),
            decision.reason if not decision else "not scored yet",
        )
        _score_system(system, items, missing, domains, tokenizers, out_dir, outputs)
    return outputs


def _rows(system, chosen, outputs, checkpoint, items, domains):
    """The result rows of one system: accuracy per mode, follow (``flipped``, or the
    scores of a system that ignores labels) and the label effect (``oracle`` and
    ``flipped``)."""
    uses_domains = system.uses_domains
    rows = []
    scores = {}
    for mode in chosen:
        records = scores[mode] = _read_scores(outputs[mode], items)
        if mode == "flipped" or not uses_domains:
            # A system that ignores labels: its follow rate is the baseline.
            row = system.name if not uses_domains else "%s (flipped)" % system.name
            summary = summarize(items, records, domains, follow=True)
            rows.append(_row(system, row, mode, "follow", checkpoint, summary))
        if mode != "flipped":
            row = system.name if len(chosen) == 1 else "%s (%s)" % (system.name, mode)
            summary = summarize(items, records, domains)
            rows.append(_row(system, row, mode, "accuracy", checkpoint, summary))
    if "oracle" in scores and "flipped" in scores:
        summary = label_shift(items, scores["oracle"], scores["flipped"], domains)
        rows.append(_row(system, system.name, "flipped", "shift", checkpoint, summary))
    return rows


def _row(system, row, mode, metric, checkpoint, summary):
    return dict(
        row=row,
        system=system.name,
        mode=mode,
        metric=metric,
        labels=system.uses_domains,
        checkpoint=checkpoint,
        **summary,
    )


def _results(items_path, digest, domains, items, rows):
    """The results dict of :func:`evaluate`: the items file and its SHA-1, the items and
    (item, variant) pairs per domain, and the rows."""
    counts = collections.Counter(item["domain"] for item in items)
    pairs = collections.Counter()
    for item in items:
        pairs[item["domain"]] += len(item["variants"])
    return {
        "items_file": items_path,
        "items_sha1": digest,
        "domains": domains,
        "items": {d: counts[d] for d in domains},
        "pairs": {d: pairs[d] for d in domains},
        "rows": rows,
    }
