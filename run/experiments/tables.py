"""The papers' tables on one corpus: every family of the registry trained and compared in one
report (``docs/tables.md``).

    bash run/tables.sh [--quick] [--families NAME ...] [--scale paper ...]
    PYTHONPATH=run python -m experiments.tables [--quick]     # the same, from the root

The demo's pipeline (:mod:`experiments.demo`: declared, stamped stages on two lanes,
resumable after a crash, each stage reused while its stamp is unchanged) with every family of
:mod:`ldr_opennmt.registry` instead of the demo's few, each evaluated in every label mode it
supports (its registry capabilities: oracle, generic, wrong and predicted labels for the
families that read them, ensembles of domain views where it has them, no label for those that
ignore labels or need them for training only). Rows:

* one row per registered Transformer family (``--families`` chooses others, RNNs included,
  or a user module's: ``--user_module FILE``), started the registry's way: from scratch, or
  from its stage-1 family (Factorized PA unfolded from Mixed, residual adapters on a frozen
  Mixed);
* the variants of :data:`VARIANTS`: Mixed again with another seed (the spread every
  difference is judged by) and with an output layer of its own (the control of the families
  that have one), LDR trained jointly besides Procedure 1, encoder-only domain
  mixing (E) besides E/DC, and the Factorized designs SF and DF with the paper's curriculum
  (a stage 1 of their own, every sentence generic, then unfolded);
* FT_<domain> (Mixed fine-tuned on one domain) and the domain classifier behind the
  predicted labels, as in the demo.

The report (``report.md``) has BLEU and chrF per domain with a paired bootstrap test against
Mixed, the parameters of every system (total, and specific to the domains), its training time,
the contrastive lexical-choice accuracy and label effect, the figures the papers print for the
same rows (quoted from :mod:`experiments.quoted`, marked as such), and a paragraph generated
from the figures: which rows beat their Mixed beyond the seed spread (the Mixed whose output
layer is tied like theirs: ``Mixed``, or the control ``Mixed (untied)``), and how the ordering
of the systems compares with each paper's. A section says where each system's domain knowledge
sits (:mod:`ldr_opennmt.analysis.label_use`: LDR's region shares, the mixing proportions at
the contrastive items' ambiguous words, the context's margin and the label's pull).

``--scale paper`` is the same pipeline with the paper-size model definitions
(``model_defs/``), the papers' schedule (:data:`BUDGETS` ``paper``) and a corpus of
``data_configs/`` (``--config data_configs/opus_en_fr.yml --data data/opus_en_fr``, built by
``ldr-data build opus`` first); ``--onmt-options=--mixed_precision,--jit_compile`` and
``--num_gpus N`` go to every training. Its cost per row is estimated in ``docs/tables.md``.
"""

import argparse
import dataclasses
import functools
import json
import os
import re
import sys
import time

from ldr_opennmt import config_loader, errors, registry, stamps
from ldr_opennmt.analysis import label_use
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.evaluation import contrastive, evaluate
from ldr_opennmt.evaluation.contrastive import lexicon
from ldr_opennmt.reports import markdown_table, pyplot
from ldr_opennmt.utils import (
    DEFAULT_CACHE,
    make_directories,
    read_lines,
    save_figure,
    write_lines_atomic,
    write_text_atomic,
)

from . import advl_grid, common, defects, demo, equal_budgets, quoted
from .common import ROOT, output_layers
from .demo import Run

#: The families the default run trains (the registry's Transformers: the papers compare
#: Transformers; ``--families`` adds the RNNs).
DEFAULT_ARCHITECTURE = "transformer"

#: The family of the baseline row, always in the table.
BASELINE_FAMILY = "mixed_transformer"

#: A value of :data:`VARIANTS` replaced by the budget's training steps.
MAX_STEP = "<max_step>"

#: The rows beyond one per family: the options of this experiment, not a list of families
#: (a family not named here gets its one default row). Each entry: family -> the extra
#: :class:`experiments.demo.Run` of that family, and the options of its default row.
#: Mixed with tied target embeddings at both scales: the stage 1 of Factorized PA (tied, as
#: the Factorized paper) and the base of the residual adapters.
TIED_MIXED = {
    "small": "model_defs/small/mixed_transformer_tied.py",
    "paper": "model_defs/mixed_transformer_tied.py",
}

VARIANTS = {
    "mixed_transformer": {
        "default": {"headline": True, "model_defs": TIED_MIXED},
        # The run-to-run spread: Mixed again, another seed.
        "extra": [
            Run(
                "mixed_transformer",
                suffix=" (seed 2)",
                slug="mixed_seed2",
                seed=2,
                model_defs=TIED_MIXED,
            ),
            # Mixed with its own output layer, as LDR, DC, TTM, ML, AdvL and domain mixing
            # have: the control that separates their method from the untying.
            Run(
                "mixed_transformer",
                suffix=" (untied)",
                slug="mixed_untied",
                model_defs={
                    "small": "model_defs/small/mixed_transformer.py",
                    "paper": "model_defs/mixed_transformer.py",
                },
            ),
        ],
    },
    "residual_adapters": {
        "default": {
            "model_defs": {
                "small": "model_defs/small/residual_adapters_tied.py",
                "paper": "model_defs/residual_adapters_tied.py",
            }
        }
    },
    "ldr_transformer": {
        "default": {"params": {"domain_training": "procedure1"}, "pred": True},
        # The LDR paper's ablation: one pass with the true labels instead of Procedure 1, and
        # the authors' code's summed mode (0.5 L_domain + 0.5 L_generic, every parameter).
        "extra": [
            Run(
                "ldr_transformer",
                suffix=" (joint)",
                slug="ldr_joint",
                params={"domain_training": "joint"},
            ),
            Run(
                "ldr_transformer",
                suffix=" (summed)",
                slug="ldr_summed",
                params={"domain_training": "summed"},
            ),
        ],
    },
    "mixing_transformer": {
        "default": {"row": "Domain mixing"},
        # The mixing paper's encoder-only variant (E) besides E/DC.
        "extra": [
            Run(
                "mixing_transformer",
                row="Domain mixing (E)",
                slug="mixing_e",
                model_defs={
                    "small": "model_defs/small/mixing_transformer_encoder.py",
                    "paper": "model_defs/mixing_transformer_encoder.py",
                },
            )
        ],
    },
    # AdvL's gradient reversal ramps up over the whole training (Ganin and Lempitsky).
    "advl_transformer": {"default": {"params": {"gradient_reversal_steps": MAX_STEP}}},
    # The Factorized paper's curriculum (section 3.1) for the designs whose attention has
    # other shapes than Mixed's (multi-query K/V): a stage 1 of their own.
    "factorized_sf": {"default": {"curriculum": True}},
    "factorized_df": {"default": {"curriculum": True}},
}

#: The label modes of a family that reads labels (its capabilities add ``ens-uniform`` when
#: it translates ensembles of its domain views, ``pred`` with the classifier's labels).
LABEL_MODES = ("oracle", "generic", "wrong")

BUDGETS = {
    # The demo's recipe and budget per system (run/experiments/demo.py, BUDGETS["default"]),
    # for every row: the whole table's time is estimated in docs/tables.md.
    "default": dict(demo.BUDGETS["default"], contrastive_items=500),
    # Two points per curve: evaluating the dev sets costs more than a quick training step.
    "quick": dict(demo.BUDGETS["quick"], curve_points=2),
    # The papers' schedule (the LDR paper's section 3.2, the Factorized paper's 3.1):
    # Transformer base, Noam decay with 4000 warmup steps, 200,000 steps (Factorized stage 2:
    # 50,000), batches of 4096 tokens, the whole test sets. For GPUs.
    "paper": {
        "steps": 200000,
        "warmup": 4000,
        "batch_size": 4096,
        "alpha": 0.5,
        "max_length": 100,
        "finetune_steps": 20000,
        "stage2_steps": 50000,
        "classifier_steps": 20000,
        "eval_sentences": None,
        "evaluate_in_lanes": True,
        "contrastive_items": 2000,
        "examples": 2,
        "log_steps": 100,
        "max_decoding_length": 250,
        "model_dim": 512,
    },
}

#: The report's layout, part of its stamp (3: rows judged against their matched Mixed; 4: the
#: share of FT's gain).
REPORT_LAYOUT = 4

#: Where the domain knowledge sits (:func:`label_use_figures`): the file, and its layout
#: (part of its stamp).
LABEL_USE_FILE = "label_use.json"
LABEL_USE_LAYOUT = 2
COMMAND = ["bash", "run/tables.sh"]


def table_runs(families=None, architecture=DEFAULT_ARCHITECTURE):
    """The rows of the table: a :class:`experiments.demo.Run` per family (its options from
    :data:`VARIANTS`), then the family's extra rows.

    Args:
      families: Registry names, in the order wanted (default: every registered family of
        :obj:`architecture`, in registration order). Mixed, the baseline, is always there,
        and so is the registry stage 1 of a family (Factorized PA's is Mixed).
      architecture: The architecture of the default families.

    Returns:
      The runs, the baseline (Mixed) first.
    """
    if families is None:
        families = [f.name for f in registry.families() if f.architecture == architecture]
    else:
        families = list(dict.fromkeys(families))
        for name in list(families):
            stage1 = registry.get(name).stage1
            if stage1 is not None and stage1 not in families:
                families.insert(0, stage1)
    # Mixed, the baseline of every comparison (and its seed spread), leads.
    families = [BASELINE_FAMILY] + [name for name in families if name != BASELINE_FAMILY]
    runs = []
    for name in families:
        options = VARIANTS.get(name, {})
        runs.append(Run(name, **options.get("default", {})))
        runs.extend(options.get("extra", []))
    return [_with_modes(run) for run in runs]


def _with_modes(run):
    """:obj:`run` with the label modes its family supports (:data:`LABEL_MODES`, ``pred``
    where asked, ``ens-uniform`` where it translates ensembles of its domain views)."""
    caps = registry.capabilities(run.family)
    if run.modes is not None or caps.labels != registry.LABEL_NEEDED:
        return run
    modes = LABEL_MODES + (("pred",) if run.pred else ())
    if caps.ensembles is None:
        modes += ("ens-uniform",)
    return dataclasses.replace(run, modes=modes)


def baseline_run(runs):
    """The baseline of the comparisons: the first run (Mixed when it is in the table)."""
    return runs[0]


def contrastive_rows(runs):
    """The rows of the contrastive test: the baseline and every row whose family has domain
    parameters or reads labels (the test asks whether the label picks the word)."""
    rows = []
    for run in runs:
        caps = registry.capabilities(run.family)
        if run is runs[0] or caps.labels != registry.LABEL_IGNORED:
            rows.append(run.name)
    return tuple(rows)


# Parameters.


def _is_model_variable(name):
    """Whether a checkpoint key names a model weight (not an optimizer slot, step or
    counter)."""
    return name.startswith("model/") and "OPTIMIZER_SLOT" not in name


def parameter_counts(checkpoint, num_domains):
    """``(total, domain-specific)`` parameters of a trained model, from its checkpoint.

    Every model weight counts (biases and layer norms included, unlike the Factorized
    paper's #P). A weight is domain-specific when it is one domain's copy (its name has
    ``domain_<i>_``: LDR's regions, the Factorized blocks, adapters, DC's vectors) or has a
    dimension of the number of domains (the mixing layers' stacked copies, proportion
    layers, a domain classifier's output layer).

    Args:
      checkpoint: A checkpoint prefix.
      num_domains: The number of declared domains.
    """
    import tensorflow as tf

    total = specific = 0
    for name, shape in tf.train.list_variables(checkpoint):
        if not _is_model_variable(name):
            continue
        size = 1
        for dim in shape:
            size *= dim
        total += size
        if _DOMAIN_COPY.search(name) or (len(shape) > 1 and num_domains in shape):
            specific += size
    return total, specific


_DOMAIN_COPY = re.compile(r"(^|/)domain_\d+_")


def matched_controls(plan, tied):
    """``{row: its Mixed}``: each row is judged against the Mixed row whose output layer is
    tied like its own (``Mixed``, tied, or ``Mixed (untied)``); rows without a matching Mixed
    map to the baseline.

    Args:
      plan: The plan.
      tied: :func:`output_layers`'.
    """
    mixed = {}
    for run in plan.runs:
        if run.family == plan.baseline.family and run.name != plan.seed_row and run.name in tied:
            mixed.setdefault(tied[run.name], run.name)
    return {name: mixed.get(value, plan.baseline.name) for name, value in tied.items()}


def system_rows(plan, steps, num_domains, tied):
    """The systems table's cells: row, family, output layer (:obj:`tied`:
    :func:`output_layers`'), parameters, training minutes, steps/s."""
    import tensorflow as tf

    rows = []
    by_title = {}
    for title, seconds in steps.timings:
        by_title.setdefault(title.replace(" (earlier run)", ""), seconds)
    for trained in plan.trained:
        run = plan.runs_by_name.get(trained.name)
        family = registry.get(run.family) if run else registry.get(plan.baseline.family)
        checkpoint = tf.train.latest_checkpoint(trained.model_dir)
        total, specific = parameter_counts(checkpoint, num_domains) if checkpoint else (0, 0)
        titles = plan.stage_titles.get(trained.slug, [])
        minutes = sum(by_title.get(title, 0.0) for title in titles) / 60
        speeds = [
            speed[0]
            for title, speed in steps.speeds.items()
            if title.replace(" (earlier run)", "") in titles
        ]
        rows.append(
            [
                trained.name,
                family.name,
                {True: "tied", False: "own", None: ""}[tied.get(trained.name)],
                "%.2fM" % (total / 1e6),
                "%.1fk" % (specific / num_domains / 1e3) if specific else "0",
                "%.1f" % minutes,
                "%.2f" % speeds[-1] if speeds else "",
            ]
        )
    return rows


def quoted_lines(averages):
    """The papers' figures beside ours: per paper, its rows with the figure its ordering
    ranks them by (:func:`experiments.quoted.score`: the printed average, or the mean of the
    domains every row of its table reports), and our average BLEU of the same row."""
    lines = []
    for paper, info in quoted.PAPERS.items():
        entries = [e for e in quoted.QUOTED if e["paper"] == paper]
        if not entries:
            continue
        # The figures the paper's ordering ranks by (quoted.score).
        printed = all(e["average"] is not None for e in entries)
        how = "average" if printed else "mean of the domains its rows share"
        cells = []
        for entry in entries:
            figure = quoted.score(entry)
            ours = averages.get(_our_row(entry["row"]))
            cells.append(
                [
                    entry["row"],
                    entry["paper_row"],
                    "%.1f (%s)" % (figure, how),
                    "%.1f" % ours if ours is not None else "not trained",
                ]
            )
        lines += [
            "### %s, %s (quoted)" % (info["citation"], info["table"]),
            "",
            "%s. %s." % (info["data"], info["metric"]),
            "",
            markdown_table(["our row", "paper's row", "paper (quoted)", "ours"], cells, "llrr"),
            "",
        ]
    return lines


def _our_row(row):
    """Our table's row of a quoted row name (the papers' "predicted" labels are our
    ``pred`` mode; other names are ours as they are)."""
    return row.replace(" (predicted)", " (pred)")


#: OpenNMT-tf's log line of a per-domain evaluation
#: (:class:`ldr_opennmt.training.evaluator.MultiDomainEvaluator`).
_EVALUATION = re.compile(
    r"Evaluation result for domain (?P<domain>\S+) at step (?P<step>\d+): .*?loss = "
    r"(?P<loss>[-+0-9.eE]+|nan|inf)"
)


def dev_curves(log_path):
    """``{domain: [(step, dev loss)]}`` of a training log (``--with_eval``), in step order;
    empty when the log has no per-domain evaluation."""
    curves = {}
    if not os.path.isfile(log_path):
        return curves
    with open(log_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            match = _EVALUATION.search(line)
            if match:
                point = (int(match.group("step")), float(match.group("loss")))
                curves.setdefault(match.group("domain"), []).append(point)
    return {domain: sorted(dict(points).items()) for domain, points in curves.items()}


def curve_section(plan, out):
    """The curves of the trainings that continue a trained model (stage 2, FT_*): a table of
    each domain's dev loss at the first and the last evaluation, and ``stage2_curves.png``
    (one panel per training, one line per domain). ``[]`` when none was evaluated."""
    curves = {}
    for trained in plan.trained:
        log_path = os.path.join(plan.steps.logs_dir, "%s.train.log" % trained.slug)
        found = dev_curves(log_path)
        if found:
            curves[trained.name] = found
    if not curves:
        return []
    rows = []
    for name, found in curves.items():
        for domain, points in found.items():
            (first_step, first), (last_step, last) = points[0], points[-1]
            best_step, best = min(points, key=lambda point: point[1])
            rows.append(
                [
                    name,
                    domain,
                    "%.3f (step %d)" % (first, first_step),
                    "%.3f (step %d)" % (best, best_step),
                    "%.3f (step %d)" % (last, last_step),
                ]
            )
    plt = pyplot()
    figure, axes = plt.subplots(
        len(curves), 1, figsize=(6, 2.2 * len(curves)), squeeze=False, sharex=False
    )
    try:
        for axis, (name, found) in zip(axes[:, 0], curves.items()):
            for domain, points in found.items():
                axis.plot([p[0] for p in points], [p[1] for p in points], marker=".", label=domain)
            axis.set_title(name, fontsize=9)
            axis.set_ylabel("dev loss")
            axis.legend(fontsize=7)
        axes[-1, 0].set_xlabel("step")
        figure.tight_layout()
        save_figure(figure, os.path.join(out, "stage2_curves.png"))
    finally:
        plt.close(figure)
    return [
        "## Stage 2 and fine-tuning, per domain",
        "",
        "The dev loss of each domain while a stage 2 (Factorized, residual adapters) or a"
        " fine-tuning (FT_*) trains, evaluated %d times in each (every 1/%d of its steps,"
        " `--with_eval`): the first evaluation, the best and the last."
        % (plan.curve_points, plan.curve_points),
        "",
        markdown_table(["training", "domain", "first", "best", "last"], rows, "llrrr"),
        "",
        "![Dev loss per domain during stage 2 and fine-tuning](stage2_curves.png)",
        "",
    ]


def row_averages(results):
    """``{row: average BLEU}``, a family that reads labels under its bare name too (its
    oracle row)."""
    averages = {}
    for row, scores in results["rows"]:
        averages[row] = evaluate.average(scores)
    for row in list(averages):
        if row.endswith(" (oracle)"):
            averages.setdefault(row[: -len(" (oracle)")], averages[row])
    # FT: each domain translated by the model fine-tuned on it (the papers' FT row).
    scores = dict(results["rows"])
    own = [scores.get("FT_%s" % d, {}).get(d) for d in results["domains"]]
    if own and all(score is not None for score in own):
        averages["FT"] = sum(score["bleu"] for score in own) / len(own)
    return averages


def findings(results, spread, baseline, rows, controls=None):
    """The generated paragraph: which rows beat their Mixed beyond the seed spread, which do
    not, and the ordering of the systems against each paper's.

    Args:
      results: The BLEU results of ``evaluate.evaluate``.
      spread: The seed spread of the baseline's average BLEU (``None``: not measured).
      baseline: The baseline row.
      rows: The table's row names (the systems, without their label modes).
      controls: ``{row: the Mixed row it is judged against}`` (:func:`matched_controls`);
        a row not in it is judged against :obj:`baseline`.

    Returns:
      Markdown lines.
    """
    averages = row_averages(results)
    if baseline not in averages:
        return ["- No %s row: nothing to compare with." % baseline]
    base = averages[baseline]
    noise = spread or 0.0
    controls = {row: c for row, c in (controls or {}).items() if c in averages}
    judged_by = sorted(set(controls.values()) - {baseline})
    beat, within, below = [], [], []
    for row in rows:
        if row == baseline or row not in averages or row.endswith("(seed 2)"):
            continue
        control = controls.get(row, baseline)
        if control == row:
            control = baseline
        difference = averages[row] - averages[control]
        cell = "%s (%+.1f%s)" % (row, difference, "" if control == baseline else " on " + control)
        if spread is not None and abs(difference) <= noise:
            within.append(cell)
        elif difference > 0:
            beat.append(cell)
        else:
            below.append(cell)
    spread_text = "%.1f BLEU" % spread if spread is not None else "not measured"
    lines = [
        "- %s averages %.1f BLEU; the seed spread (Mixed trained twice) is %s."
        % (baseline, base, spread_text),
    ]
    for control in judged_by:
        lines.append(
            "- %s averages %.1f BLEU (%+.1f): the rows with an output layer of their own are"
            " judged against it, the others against %s."
            % (control, averages[control], averages[control] - base, baseline)
        )
    lines += [
        "- Beat their Mixed beyond the spread: %s." % (", ".join(beat) or "none"),
        "- Within the spread (no difference this run can show): %s."
        % (", ".join(within) or "none"),
        "- Below their Mixed beyond the spread: %s." % (", ".join(below) or "none"),
    ]
    for paper, info in quoted.PAPERS.items():
        theirs = [row for row in quoted.ordering(paper) if row in averages]
        if len(theirs) < 2:
            continue
        agree, reverse = ordering_agreement(theirs, averages, noise)
        pairs = len(theirs) * (len(theirs) - 1) // 2
        ours = sorted(theirs, key=lambda row: -averages[row])
        verdict = (
            "the same ordering"
            if agree == pairs
            else "of its %d pairs, ours orders %d the same way beyond the spread, %d the other"
            " way, and cannot separate %d" % (pairs, agree, reverse, pairs - agree - reverse)
        )
        lines.append(
            "- %s (%s) orders these rows %s; ours: %s: %s."
            % (
                info["citation"],
                info["table"],
                " > ".join(theirs),
                " > ".join("%s %.1f" % (row, averages[row]) for row in ours),
                verdict,
            )
        )
    return lines


def ordering_agreement(ordering, averages, noise):
    """``(agree, reverse)``: of the pairs of rows of :obj:`ordering` (best first), how many
    our averages put in the same order by more than :obj:`noise`, and how many in the
    other order by more than it (the rest are within it)."""
    agree = reverse = 0
    for i, better in enumerate(ordering):
        for worse in ordering[i + 1 :]:
            difference = averages[better] - averages[worse]
            if difference > noise:
                agree += 1
            elif -difference > noise:
                reverse += 1
    return agree, reverse


def item_files(plan, items, directory):
    """Writes the items' tokenized sources, references and labels (the corpus's lines they
    come from) into :obj:`directory`; returns ``(source, target, labels)`` paths."""
    cache = {}
    lines = {side: [] for side in (plan.source, plan.target, "domain")}
    for item in items:
        for side in lines:
            name = "%s.%s.%s" % (item["split"], item["domain"], side)
            if name not in cache:
                cache[name] = read_lines(plan._corpus_file(name))
            lines[side].append(cache[name][item["line"] - 1])
    paths = []
    for side in (plan.source, plan.target, "domain"):
        path = os.path.join(directory, "items.%s" % side)
        write_lines_atomic(path, lines[side])
        paths.append(path)
    return tuple(paths)


def label_use_figures(plan):
    """Where each system's domain knowledge sits (:mod:`ldr_opennmt.analysis.label_use`):
    for the rows with LDR embeddings, how far their domain regions move the words of the test
    sentences and the contrastive items' ambiguous words; for the domain-mixing rows, their
    proportions at the items' ambiguous words and at the other words.

    Returns:
      ``{"ldr": {row: {"test" | "items": {domain: [ratio, tokens]}}}, "mixing": {row:
      [layer]}}``.
    """
    import tensorflow as tf

    from ldr_opennmt import checkpoints
    from ldr_opennmt.analysis import proportions
    from ldr_opennmt.layers import LDREmbedder
    from ldr_opennmt.models.mixing import MixingTransformer
    from ldr_opennmt.training.runner import Runner

    items = contrastive.read_items(plan.items_path, plan.domains)
    out = os.path.abspath(plan.steps.out)
    directory = make_directories(os.path.join(out, "label_use"), out)
    source, target, labels = item_files(plan, items, directory)
    item_tokens = [line.split() for line in read_lines(source)]
    item_domains = [plan.domains.index(item["domain"]) for item in items]
    item_words = [
        [tokens[p] for p in label_use.word_positions(tokens, item["word"], lexicon.english_key)]
        for tokens, item in zip(item_tokens, items)
    ]
    test, test_domains = [], []
    for i, domain in enumerate(plan.domains):
        lines = read_lines(plan._corpus_file("test.%s.%s" % (domain, plan.source)))
        lines = lines[: plan.budget["eval_sentences"] or len(lines)]
        test += [line.split() for line in lines]
        test_domains += [i] * len(lines)
    figures = {"ldr": {}, "mixing": {}}
    for trained in plan.trained:
        runner = Runner.from_files(trained.config_paths, auto_config=True)
        embedder = getattr(runner.model.features_inputter, "word_inputter", None)
        if isinstance(embedder, LDREmbedder):
            model, latest = runner.restore()
            embedder = model.features_inputter.word_inputter
            test_shares = label_use.region_shares(embedder, test, test_domains)
            item_shares = label_use.region_shares(embedder, item_words, item_domains)
            # The older checkpoints kept too: do the regions grow with training?
            by_step = [[_checkpoint_step(latest), _mean_share(test_shares)]]
            state = tf.train.get_checkpoint_state(trained.model_dir)
            for path in state.all_model_checkpoint_paths:
                if _checkpoint_step(path) == by_step[0][0]:
                    continue
                checkpoints.check_model_checkpoint(model, path)
                tf.train.Checkpoint(model=model).restore(path).expect_partial()
                shares = label_use.region_shares(embedder, test, test_domains)
                by_step.append([_checkpoint_step(path), _mean_share(shares)])
            figures["ldr"][trained.name] = {
                "test": {plan.domains[k]: list(v) for k, v in test_shares.items()},
                "items": {plan.domains[k]: list(v) for k, v in item_shares.items()},
                "by_step": sorted(by_step),
            }
        elif isinstance(runner.model, MixingTransformer):
            model, _ = runner.restore()
            result = proportions.compute(model, source, labels, target, progress=False)
            figures["mixing"][trained.name] = [
                layer._asdict()
                for layer in label_use.item_proportions(
                    result, items, lexicon.english_key, lexicon.french_key
                )
            ]
    return figures


def _checkpoint_step(path):
    """The step of a checkpoint prefix (``.../ckpt-4500`` -> 4500)."""
    return int(path.rsplit("-", 1)[-1])


def _mean_share(shares):
    """The token-weighted mean of :func:`ldr_opennmt.analysis.label_use.region_shares`'."""
    tokens = sum(count for _, count in shares.values())
    return sum(share * count for share, count in shares.values()) / max(tokens, 1)


def _percent(correct, count):
    return "%.1f" % (100.0 * correct / count) if count else "n/a"


def label_use_section(figures, contrastive_results, classification, baseline):
    """The report's section on where the domain knowledge sits: Markdown lines.

    Args:
      figures: :func:`label_use_figures`'s.
      contrastive_results: The contrastive results (``contrastive.json``).
      classification: The domain classifier's scores on the test sets.
      baseline: The baseline row (it reads no label).
    """
    lines = ["## Where the domain knowledge sits", ""]
    rows = contrastive_results["rows"]
    found = [r for r in rows if r["system"] == baseline and r["metric"] == "accuracy"]
    if classification:
        lines.append(
            "- The source sentence gives its domain away: the domain classifier, which reads"
            " the source alone, labels %.1f%% of the test sentences correctly."
            % (100.0 * classification["accuracy"])
        )
    if found:
        lines.append(
            "- %s, which reads no label, prefers the reference to every variant in %.1f%% of"
            " the contrastive items, by %.1f nats of log-probability on average: the context"
            " decides the word's sense before any label does."
            % (baseline, found[0]["values"]["all"], found[0]["margin"]["all"])
        )
    shifts = [r for r in rows if r["metric"] == "shift"]
    if shifts:
        lines.append(
            "- The label's pull: the variant's label instead of the item's changes the"
            " log-probability difference (reference against variant) by %s nats on average."
            % ", ".join(
                "%s %+.2f" % (r["system"], r["margin"]["all"])
                for r in sorted(shifts, key=lambda r: -r["margin"]["all"])
            )
        )
    lines.append("")
    if figures.get("ldr"):
        domains = sorted({d for row in figures["ldr"].values() for d in row["test"]})
        table = []
        for row, values in figures["ldr"].items():
            for name, title in (("test", "test words"), ("items", "ambiguous words")):
                cells = [row, title]
                cells += [
                    "%.3f" % values[name][d][0] if d in values[name] else "n/a" for d in domains
                ]
                table.append(cells)
        lines += [
            "LDR's domain regions: the norm of what the sentence's own domain region adds to a"
            " word's fused embedding, against the norm of its generic embedding (|M_k e_k(v)|"
            " / |M_g e_g(v) + b|), averaged over the tokens of the test sentences of each"
            " domain and over the contrastive items' ambiguous words.",
            "",
            markdown_table(["row", "words"] + domains, table, "ll" + "r" * len(domains)),
            "",
        ]
        for row, values in figures["ldr"].items():
            if len(values.get("by_step", [])) > 1:
                lines.append(
                    "- %s's mean share on the test words at each checkpoint kept: %s."
                    % (row, ", ".join("step %d %.3f" % tuple(p) for p in values["by_step"]))
                )
        lines.append("")
    if figures.get("mixing"):
        table = []
        for row, layers in figures["mixing"].items():
            for layer in layers:
                table.append(
                    [
                        row,
                        layer["label"],
                        _percent(layer["word_correct"], layer["word"]),
                        _percent(layer["other_correct"], layer["other"]),
                        "%.2f" % layer["word_mean"],
                        "%.2f" % layer["other_mean"],
                    ]
                )
        lines += [
            "Domain mixing's proportions on the contrastive items (their sources, and their"
            " references forced on the decoder): at the ambiguous word (the source word; on"
            " the decoder, the positions that predict its translation) and at the other words"
            " of the sentence: how often the largest proportion is the item's domain, and the"
            " mean proportion of that domain (1/k is uniform).",
            "",
            markdown_table(
                [
                    "row",
                    "layer",
                    "argmax = domain, word %",
                    "other words %",
                    "D(domain), word",
                    "other words",
                ],
                table,
                "llrrrr",
            ),
            "",
        ]
    return lines


def write_report(
    plan,
    steps,
    info,
    results,
    contrastive_results,
    total,
    budget,
    mode,
    classification=None,
    label_figures=None,
    advl_choice=None,
):
    """The report's Markdown text (:obj:`label_figures`: :func:`label_use_figures`', with the
    domain :obj:`classification` scores; :obj:`advl_choice`: :func:`experiments.advl_grid.
    read_choice`'s, ``None`` when the table has no AdvL row).

    The rows that are defects (:mod:`experiments.defects`: collapsed, or more than 3 BLEU
    below their control) are listed in the findings and left out of every table and
    comparison."""
    domains = results["domains"]
    tied = output_layers(plan)
    controls = matched_controls(plan, tied)
    names = [run.name for run in plan.runs]
    systems = names + [row for row, _ in results["rows"] if row.startswith("FT_")]
    flagged = defects.find(
        row_averages(results),
        systems,
        plan.baseline.name,
        controls,
        defects.translation_counts(results, systems),
    )
    results = defects.without(results, flagged)
    names = [name for name in names if name not in flagged]
    spread = demo.seed_spread(results, first=plan.baseline.name, second=plan.seed_row)
    advl_choice_lines = advl_grid.choice_lines(advl_choice) if advl_choice else []
    lines = [
        "# The papers' tables on one corpus (%s)" % mode,
        "",
        "Every family of the registry on the corpus of `%s`, %d domains (%s), at the %s"
        " scale: %s steps per system trained from scratch, batches of %s tokens; FT_<domain>"
        " %s steps of its domain; %s; evaluation on %s test sentences per domain, beam 4."
        % (
            plan.data,
            len(domains),
            ", ".join(domains),
            plan.scale,
            budget["steps"],
            budget["batch_size"],
            budget["finetune_steps"],
            (
                plan.stage2.rule()
                if plan.stage2
                else "stage 2 of the two-stage families %s steps" % budget["stage2_steps"]
            ),
            budget["eval_sentences"] or "all the",
        ),
        "",
    ]
    lines += advl_choice_lines
    lines += [
        "## Corpus",
        "",
        corpus_lib.corpus_table(info),
        "",
        "## BLEU and chrF per domain",
        "",
        "Label modes in parentheses: oracle (the true label), generic (no domain), wrong (the"
        " next domain), pred (the domain classifier's), ens-uniform (the average of every"
        " domain view). Rows without one ignore labels or use them for training only.",
        "",
        evaluate.format_tables(results),
        "",
        "Seed spread: %s."
        % ("%.1f BLEU" % spread if spread is not None else "not measured (no second seed)"),
        "",
        "![BLEU per domain](bleu.png)",
        "",
        "## Share of FT's gain",
        "",
        "Every continued training (FT_<domain>, the stage 2 of the two-stage families) starts"
        " from %s. Per row and domain, the share of FT_<domain>'s gain over it that the row"
        " recovers: (row - %s) / (FT_<domain> - %s), in BLEU on that domain; 100%%: as good"
        " as the specialised model, 0%%: no better than the base, below 0: worse. `-`: FT"
        " gains nothing there." % (plan.baseline.name, plan.baseline.name, plan.baseline.name),
        "",
        markdown_table(*common.ft_gain_shares(results, plan.baseline.name)),
        "",
        "## Systems",
        "",
        "Parameters counted in the trained checkpoint (every weight, biases included);"
        " domain-specific ones (the per-domain copies, regions, adapters, proportion layers)"
        " per domain. Output layer: tied with the target embeddings, or its own (each row is"
        " judged against the Mixed of the same kind below). Training: the minutes of its"
        " training stages on one lane (a curriculum's"
        " or a stage 2's own, not its stage-1 family's), and the last stage's steps/s.",
        "",
        markdown_table(
            [
                "row",
                "family",
                "output layer",
                "parameters",
                "per domain",
                "training min",
                "steps/s",
            ],
            system_rows(plan, steps, len(domains), tied),
            "lllrrrr",
        ),
        "",
        "## Contrastive lexical choice",
        "",
        contrastive.format_tables(contrastive_results),
        "",
    ]
    if label_figures is not None:
        lines += label_use_section(
            label_figures, contrastive_results, classification, plan.baseline.name
        )
    lines += curve_section(plan, steps.out)
    lines += [
        "## The papers' figures beside ours",
        "",
        "Quoted from the papers (`run/experiments/quoted.py`), on their data and model sizes:"
        " only the ordering of the rows is comparable with ours.",
        "",
    ]
    lines += quoted_lines(row_averages(results))
    lines += ["## What this shows", "", "Generated from the figures above.", ""]
    lines += findings(results, spread, plan.baseline.name, names, controls)
    lines += defects.lines(flagged)
    lines += ["", "## Time", ""] + steps.timing_lines(total)
    lines += ["", "## Commands to rerun any step", ""]
    for title, command in steps.commands:
        lines += ["- %s: `%s`" % (title, common.command_line(command))]
    return "\n".join(lines) + "\n"


def _with_budget(run, budget):
    """:obj:`run` with the :data:`MAX_STEP` values of its parameters set to the budget's
    steps."""
    params = {k: budget["steps"] if v == MAX_STEP else v for k, v in run.params.items()}
    return dataclasses.replace(run, params=params)


class TablesPlan(demo.Plan):
    """The demo's :class:`experiments.demo.Plan` for the rows of :func:`table_runs`."""

    def __init__(self, args, budget, steps, runs):
        super().__init__(
            args,
            budget,
            steps,
            baseline=baseline_run(runs),
            contrastive_systems=contrastive_rows(runs),
            data_config=args.config,
        )
        self.report_layout = REPORT_LAYOUT
        self.runs = runs = [_with_budget(run, budget) for run in runs]
        self.runs_by_name = {run.name: run for run in runs}
        seeds = [run for run in runs if run.family == runs[0].family and run is not runs[0]]
        self.seed_row = seeds[0].name if seeds else None
        self.stage_titles = {}
        # The per-domain dev loss of every stage 2 and fine-tuning, at curve_points points
        # of each (set per training by _train).
        self.curve_points = budget.get("curve_points", 8)
        self.curve_every = max(1, budget["finetune_steps"] // self.curve_points)
        #: The stage 2's steps and sampling (:class:`experiments.equal_budgets.Stage2Budget`),
        #: known once the corpus is (:meth:`equal_stage2`).
        self.stage2 = None

    def write_data_config(self, info):
        super().write_data_config(info)
        self.equal_stage2(equal_budgets.corpus_sizes(info))

    def equal_stage2(self, sizes):
        """Sets the stage 2's steps from the corpus's sizes (:obj:`sizes`: ``{domain:
        |C_d|}``) so that every domain's blocks see at least FT_<domain>'s batches of that
        domain (:mod:`experiments.equal_budgets`); the budget's ``stage2_steps`` is the
        floor."""
        if self.stage2 is None:
            self.stage2 = equal_budgets.Stage2Budget(sizes, self.budget)
            self.budget["stage2_steps"] = self.stage2.steps
        return self.stage2

    def _train(self, run, config, title, final_step, progress, *args, curve=False, **kwargs):
        finetune = config.get("finetune") or {}
        if curve and finetune.get("domain") is None and self.stage2 is not None:
            # A stage 2: batches of one domain each, as FT's (equal_budgets).
            config = self.stage2.config(config)
        if curve:
            self.curve_every = max(1, finetune["steps"] // self.curve_points)
        return super()._train(
            run, config, title, final_step, progress, *args, curve=curve, **kwargs
        )

    def report_inputs(self):
        return super().report_inputs() + [self.label_use_path]

    @property
    def label_use_path(self):
        return os.path.join(self.steps.out, LABEL_USE_FILE)

    def label_use_stage(self):
        """Where the domain knowledge sits (:func:`label_use_figures`): after the trainings
        and the items; its stamp is their checkpoints and the test files."""
        path = self.label_use_path

        def stamp():
            return stamps.make_stamp(
                layout=LABEL_USE_LAYOUT,
                checkpoints=[[t.name, common.checkpoint_digest(t.model_dir)] for t in self.trained],
                configs=[config_loader.load_run_config(t.config_paths) for t in self.trained],
                items=stamps.file_digest(self.items_path),
                test=stamps.files_digest(self._test_files()),
                sentences=self.budget["eval_sentences"],
            )

        def run(cores):
            figures = label_use_figures(self)
            write_text_atomic(path, json.dumps(figures, indent=2) + "\n")

        return common.Stage(
            "label_use",
            "where the domain knowledge sits",
            "5/6",
            stamp,
            [path],
            run,
            after=[t.slug for t in self.trained] + ["items"],
            owns=[path, os.path.join(self.steps.out, "label_use")],
        )

    def training_stages(self, runs):
        stages = super().training_stages(runs)
        for stage in stages:
            slug = stage.name[: -len("_stage1")] if stage.name.endswith("_stage1") else stage.name
            self.stage_titles.setdefault(slug, []).append(stage.title)
        return stages


def _arguments(argv):
    parser = argparse.ArgumentParser(
        description="Train and evaluate every family of the registry (the papers' tables)."
    )
    parser.add_argument("--quick", action="store_true", help="tiny budgets (a smoke run)")
    parser.add_argument(
        "--scale",
        choices=("small", "paper"),
        default="small",
        help="small: model_defs/small/ on CPU; paper: model_defs/ and the papers' schedule",
    )
    parser.add_argument(
        "--families",
        nargs="+",
        help="registry families to train (default: every Transformer family)",
    )
    parser.add_argument(
        "--user_module",
        action="append",
        default=[],
        help="a Python file or module registering families of your own (repeatable)",
    )
    parser.add_argument("--steps", type=int, help="training steps of a system from scratch")
    parser.add_argument("--stage2_steps", type=int, help="steps of a stage 2")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=N",
        help="a budget entry (repeatable; e.g. --set eval_sentences=5 --set finetune_steps=2:"
        " the paper-scale path on tiny budgets)",
    )
    parser.add_argument("--config", default=demo.DATA_CONFIG, help="data configuration")
    parser.add_argument("--data", default="data/default", help="corpus directory")
    parser.add_argument("--out", help="results directory (default results/tables[-quick])")
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    parser.add_argument(
        "--advl_choice",
        help="AdvL's reversal weight chosen by run/advl_grid.sh (default: %s, or its -quick"
        " twin with --quick; the model's default weight when absent)"
        % advl_grid.default_choice_path(False),
    )
    parser.add_argument("--num_gpus", type=int, default=None, help="onmt-main --num_gpus")
    parser.add_argument(
        "--onmt-options",
        default="",
        help="comma-separated options of every training command before `train` "
        "(e.g. --mixed_precision,--jit_compile on GPUs)",
    )
    args = parser.parse_args(argv)
    key = "quick" if args.quick else ("paper" if args.scale == "paper" else "default")
    budget = dict(BUDGETS[key])
    for name, value in (("steps", args.steps), ("stage2_steps", args.stage2_steps)):
        if value is not None:
            if value < 1:
                raise SystemExit("--%s must be >= 1, got %d" % (name, value))
            budget[name] = value
    for entry in args.set:
        name, _, value = entry.partition("=")
        countable = name in budget and _countable(budget[name])
        if not countable or not value.isdigit() or int(value) < 1:
            raise SystemExit(
                "--set %s: expected KEY=N with N >= 1 and KEY one of %s"
                % (entry, ", ".join(sorted(k for k, v in budget.items() if _countable(v))))
            )
        budget[name] = int(value)
    if args.scale == "paper":
        budget["model_dim"] = 512
    args.out = args.out or ("results/tables-quick" if args.quick else "results/tables")
    args.mode = key + ("" if args.scale == "small" else ", paper scale")
    options = [o for o in args.onmt_options.split(",") if o]
    if args.num_gpus:
        options += ["--num_gpus", str(args.num_gpus)]
    args.options = options
    return args, budget


def _countable(value):
    """Whether a budget entry is a count (``--set`` may change it)."""
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args, budget = _arguments(argv)
    os.chdir(ROOT)
    for spec in args.user_module:
        registry.load_user_module(spec)
    runs = table_runs(args.families)
    advl_choice = None
    if any(run.family == advl_grid.FAMILY for run in runs):
        advl_choice = advl_grid.read_choice(
            args.advl_choice or advl_grid.default_choice_path(args.quick),
            advl_grid.recipe(args, budget),
        )
        runs = advl_grid.apply_choice(runs, advl_choice)
        common.log("[tables] %s" % advl_grid.choice_lines(advl_choice)[0])
    steps = common.Steps(args.out, name="tables", options=args.options)
    plan = TablesPlan(args, budget, steps, runs)
    start = time.time()

    if args.data == "data/default":
        steps.run_stages([plan.corpus_stage()])
    info = corpus_lib.load_info(args.data)  # Fails in one line on a corpus not built.
    plan.write_data_config(info)
    lanes = common.cpu_lanes(2)
    in_lanes = budget["evaluate_in_lanes"]
    parallel = [plan.items_stage()] + plan.training_stages(plan.runs)
    evaluation = plan.evaluation_stages(in_lanes)
    if in_lanes:
        parallel, evaluation = parallel + evaluation, []
    common.log("[tables] %d rows, %d stages on %d lane(s)" % (len(runs), len(parallel), len(lanes)))
    common.log("[tables] %s" % plan.stage2.rule())
    steps.run_stages(demo._by_priority(parallel), lanes)
    steps.run_stages(evaluation + [plan.score_stage(), plan.label_use_stage()])

    loaded = {}
    for name, path in (
        ("results", plan.scores_path),
        ("contrastive", plan.contrastive_path),
        ("classification", plan.classification_path),
        ("label_use", plan.label_use_path),
    ):
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                loaded[name] = json.load(f)
    write = functools.partial(
        write_report,
        plan,
        steps,
        info,
        loaded["results"],
        loaded["contrastive"],
        budget=budget,
        mode=args.mode,
        classification=loaded.get("classification"),
        label_figures=loaded.get("label_use"),
        advl_choice=advl_choice,
    )
    steps.run_stages([plan.report_stage(write, args.mode, start, COMMAND + argv)])
    common.log(
        "[tables] report: %s (total %.1f min)"
        % (os.path.join(steps.out, "report.md"), (time.time() - start) / 60)
    )
    return 0


if __name__ == "__main__":
    sys.exit(errors.run_main("run/tables.sh", main))
