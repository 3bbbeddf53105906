"""The papers' tables on one corpus: every family of the registry trained and compared in one
report (``docs/tables.md``).

    bash run/tables.sh [--quick] [--families NAME ...] [--scale paper ...]
    ldr-experiments tables [--quick]     # the same, from the root

The demo's pipeline (:mod:`ldr_experiments.demo`: declared, stamped stages on two lanes,
resumable after a crash, each stage reused while its stamp is unchanged) with every family of
:mod:`ldr_opennmt.registry` instead of the demo's few, each evaluated in every label mode it
supports (its registry capabilities: oracle, generic, wrong and predicted labels for the
families that read them, ensembles of domain views where it has them, no label for those that
ignore labels or need them for training only). Rows:

* one row per registered Transformer family (``--families`` chooses others, RNNs included,
  or a user module's: ``--user_module FILE``), started the registry's way: from scratch, or
  from its stage-1 family (Factorized PA unfolded from Mixed, residual adapters on a frozen
  Mixed);
* the variants of :data:`VARIANTS`: Mixed, with an output layer of its own, is the base every
  continued training starts from and the control of the rows with an output layer of their
  own; Mixed (tied), its target embeddings tied to the output layer, the control of the tied
  rows; the controls of the same compute (Mixed continued for a two-pass row's passes or a
  stage 2's steps); LDR trained jointly and summed besides Procedure 1, and summed with one
  released option at a time; DC summed; the distilled student; Mixed with balanced sampling;
  encoder-only domain mixing (E) besides E/DC; the adapters with four times the stage 2; and
  the Factorized designs SF and DF with the paper's curriculum (a stage 1 of their own, every
  sentence generic, then unfolded);
* the seed twins (``--seeds N``, 3) of the controls and of the rows of the papers' main
  claims;
* FT_<domain> (the base fine-tuned on one domain: the upper reference of every continued
  training) and the domain classifier behind the predicted labels, as in the demo.

Every stage 2 sees, per domain, at least FT_<domain>'s batches of that domain: its steps come
from the corpus's sizes (:mod:`ldr_experiments.equal_budgets`), on batches of one domain each.
AdvL trains with the reversal weight ``bash run/advl_grid.sh`` chose on the dev sets
(:mod:`ldr_experiments.advl_grid`) when its recipe is the table's. A row that collapses or falls
more than 3 BLEU below its control is a defect in the findings, not a result
(:mod:`ldr_experiments.defects`).

The report (``report.md``) has BLEU and chrF per domain with a paired bootstrap test against
Mixed, the parameters of every system (total, and specific to the domains), its training time,
the contrastive lexical-choice accuracy and label effect, the figures the papers print for the
same rows (quoted from :mod:`ldr_experiments.quoted`, marked as such), the verdicts of the one
stated test (:mod:`ldr_experiments.table_verdicts`: each row against its matched Mixed, whose
output layer is like its own, and its control of the same compute; the seeds' mean and
deviation; the label's effect; the share of FT's gain with its interval), the serving cost of
each row (:mod:`ldr_experiments.table_serving`), a paragraph generated from the verdicts and
how the ordering of the systems compares with each paper's on matched pairs; each paper's
claims, reproduced here or not or not testable (:mod:`ldr_experiments.claims`), and issue 59's
goal. A section says where each system's
domain knowledge sits (:mod:`ldr_opennmt.analysis.label_use`: LDR's region shares, the mixing
proportions at the contrastive items' ambiguous words, the context's margin and the label's
pull).

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

from ldr_experiments import engine
from ldr_opennmt import config_loader, errors, probe, registry, stamps
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.evaluation import contrastive, evaluate
from ldr_opennmt.reports import markdown_table
from ldr_opennmt.utils import DEFAULT_CACHE, write_text_atomic

from . import advl_choice as grid_choice
from . import (
    claims,
    common,
    defects,
    demo,
    distillation,
    equal_budgets,
    table_compute,
    table_serving,
    table_verdicts,
)
from .common import output_layers
from .demo import Run
from .table_curves import curve_section
from .table_findings import findings, quoted_lines, row_averages
from .table_label_use import label_use_figures, label_use_section

#: The families the default run trains (the registry's Transformers: the papers compare
#: Transformers; ``--families`` adds the RNNs).
DEFAULT_ARCHITECTURE = "transformer"

#: The family of the baseline row, always in the table.
BASELINE_FAMILY = "mixed_transformer"

#: A value of :data:`VARIANTS` replaced by the budget's training steps.
MAX_STEP = "<max_step>"

#: The rows beyond one per family: the options of this experiment, not a list of families
#: (a family not named here gets its one default row). Each entry: family -> the extra
#: :class:`ldr_experiments.demo.Run` of that family, and the options of its default row.
#: Mixed with tied target embeddings at both scales: the control of the rows whose output layer
#: is tied (domain mixing, the Factorized designs' own curriculum).
TIED_MIXED = {
    "small": "model_defs/small/mixed_transformer_tied.py",
    "paper": "model_defs/mixed_transformer_tied.py",
}

#: Mixed with an output layer of its own (the demo's family default is tied).
UNTIED_MIXED = {
    "small": "model_defs/small/mixed_transformer.py",
    "paper": "model_defs/mixed_transformer.py",
}

#: Factorized PA with an output layer of its own: its stage 1 is the table's base, Mixed.
UNTIED_PA = {
    "small": "model_defs/small/factorized_pa_untied.py",
    "paper": "model_defs/factorized_pa_untied.py",
}

#: The equal-compute controls (issue 59 item 1): Mixed continued, every parameter trained on
#: the same data, for the forward-backward passes of a two-pass row (Procedure 1 and summed
#: train two batches a step: 4500 steps are 9000 passes), or for a stage 2's steps on the stage
#: 2's batches (the residual adapters, Factorized PA; the tied one for SF and DF's curriculum).
EQUAL_PASSES = "Mixed (equal passes)"
CONTINUED = "Mixed (continued)"
TIED_CONTINUED = "Mixed (tied, continued)"
CONTINUED_LONG = "Mixed (continued 4x)"

#: LDR (summed) with one option of the authors' released code at a time (issue 53 item 2: which
#: of the differences matters, measured): ``(row suffix, slug, data, train)``; a row whose
#: option is the model's has its definitions in ``model_defs/[small/]ablation/<slug>.py``
#: (:func:`ablation_defs`). Each is judged against LDR (summed), the same in all else.
LDR_ABLATION = (
    ("every layer", "ldr_every_layer", {}, {}),
    ("target side", "ldr_target_ldr", {}, {}),
    ("zero regions", "ldr_zero_regions", {}, {}),
    # The released utils/dataprocess.py: one domain per batch, drawn by its natural share.
    (
        "one-domain batches",
        "ldr_domain_batches",
        {"domain_batches": True},
        {"domain_sampling_alpha": 1.0},
    ),
)


def ablation_defs(slug, data):
    """The model definitions of an ablation row (:data:`LDR_ABLATION`): its own when its
    option is the model's, ``None`` (the family's) when it changes the data only."""
    if data:
        return None
    return {
        "small": "model_defs/small/ablation/%s.py" % slug,
        "paper": "model_defs/ablation/%s.py" % slug,
    }


VARIANTS = {
    # Mixed with an output layer of its own, as LDR, DC, TTM, ML, AdvL have: the base every
    # continued training starts from (FT_<domain>, Factorized PA's stage 2, the residual
    # adapters), so that FT is the upper reference of all of them, and the control of every
    # row with an output layer of its own (issue 42, item 3: docs/tables.md says why the tied
    # Mixed is not the base). Every control and every row of a paper's main claim is trained
    # with each seed of --seeds (issue 59 item 2; their twins: demo.seed_twins).
    "mixed_transformer": {
        "default": {"headline": True, "model_defs": UNTIED_MIXED, "seeds": True},
        "extra": [
            # Mixed with its output layer tied to the target embeddings (the demo's and the
            # Factorized paper's): the control of the tied rows.
            Run(
                "mixed_transformer",
                suffix=" (tied)",
                slug="mixed_tied",
                model_defs=TIED_MIXED,
                seeds=True,
            ),
            Run(
                "mixed_transformer",
                suffix=" (equal passes)",
                slug="mixed_passes",
                model_defs=UNTIED_MIXED,
                continues="Mixed",
                continue_steps="passes",
                seeds=True,
            ),
            Run(
                "mixed_transformer",
                suffix=" (continued)",
                slug="mixed_continued",
                model_defs=UNTIED_MIXED,
                continues="Mixed",
                continue_steps="stage2",
                seeds=True,
            ),
            # The control of the adapters given four times the stage 2 (issue 54 item 2).
            Run(
                "mixed_transformer",
                suffix=" (continued 4x)",
                slug="mixed_continued_long",
                model_defs=UNTIED_MIXED,
                continues="Mixed",
                continue_steps="stage2",
                stage2_factor=4,
            ),
            Run(
                "mixed_transformer",
                suffix=" (tied, continued)",
                slug="mixed_tied_continued",
                model_defs=TIED_MIXED,
                continues="Mixed (tied)",
                continue_steps="stage2",
            ),
            # Multi-domain distillation (issue 54 item 1; Currey et al., 2020): a plain
            # Transformer, Mixed's recipe and steps, trained on the FT teachers' translations
            # of each domain's training sources beside the references
            # (ldr_experiments.distillation); judged against Mixed, served as one model.
            Run(
                "mixed_transformer",
                row="Distilled student",
                slug="distilled",
                model_defs=UNTIED_MIXED,
                distilled=True,
            ),
            # Rebalanced sampling, the no-parameter baseline (issue 54 item 3; the TACL 2021
            # table's Mixed-Bal): every domain drawn with the same probability (alpha 0)
            # instead of the table's alpha 0.5; judged against Mixed, the same in all else.
            Run(
                "mixed_transformer",
                suffix=" (balanced)",
                slug="mixed_balanced",
                train={"domain_sampling_alpha": 0.0},
                model_defs=UNTIED_MIXED,
            ),
        ],
    },
    # DC trained as LDR (summed) is (issue 59 item 1): its domain tag and the generic tag in
    # the two passes of each step, so that LDR's gain over DC is not the summed recipe's.
    "dc_transformer": {
        "extra": [
            Run(
                "dc_transformer",
                suffix=" (summed)",
                slug="dc_summed",
                params={"domain_training": "summed"},
                control=EQUAL_PASSES,
            )
        ]
    },
    "factorized_pa": {"default": {"model_defs": UNTIED_PA, "seeds": True, "control": CONTINUED}},
    "residual_adapters": {
        "default": {"seeds": True, "control": CONTINUED},
        # Issue 54 item 2: the adapters given what they need. Their inner size is already 4x
        # the model's (256 for 64 units, as the papers' 2048 for 512); their stage 2 is what
        # the TACL comparison gives more of: four times the steps, judged against Mixed
        # continued for as many.
        "extra": [
            Run(
                "residual_adapters",
                suffix=" (4x stage 2)",
                slug="residual_adapters_long",
                stage2_factor=4,
                control=CONTINUED_LONG,
            )
        ],
    },
    "ldr_transformer": {
        "default": {
            "params": {"domain_training": "procedure1"},
            "pred": True,
            "control": EQUAL_PASSES,
        },
        # The LDR paper's ablation: one pass with the true labels instead of Procedure 1, and
        # the loss of the authors' released configuration, summed (0.5 L_domain + 0.5
        # L_generic, every parameter), on the paper's model: the mode that reads its label
        # best (the tables of 2026-11-27), so the headline row, with every seed.
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
                pred=True,
                seeds=True,
                control=EQUAL_PASSES,
            ),
        ]
        + [
            Run(
                "ldr_transformer",
                suffix=" (summed, %s)" % what,
                slug=slug,
                params={"domain_training": "summed"},
                data=data,
                train=train,
                model_defs=ablation_defs(slug, data),
                modes=("oracle", "generic"),
                control="LDR (summed)",
            )
            for what, slug, data, train in LDR_ABLATION
        ],
    },
    # LDR as its authors' released code builds and trains it (issue 53): the family's preset
    # (every layer, target side, zero regions, summed), with one-domain batches drawn by their
    # natural share (the released utils/dataprocess.py).
    "ldr_transformer_released": {
        "default": {
            "data": {"domain_batches": True},
            "train": {"domain_sampling_alpha": 1.0},
            "control": EQUAL_PASSES,
        }
    },
    "mixing_transformer": {
        "default": {"row": "Domain mixing", "seeds": True},
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
    "factorized_sf": {"default": {"curriculum": True, "control": TIED_CONTINUED}},
    "factorized_df": {"default": {"curriculum": True, "control": TIED_CONTINUED}},
}

#: The label modes of a family that reads labels (its capabilities add ``ens-uniform`` when
#: it translates ensembles of its domain views, ``pred`` with the classifier's labels).
LABEL_MODES = ("oracle", "generic", "wrong")

BUDGETS = {
    # The demo's recipe and budget per system (ldr_experiments/demo/runs.py, BUDGETS["default"]),
    # for every row: the whole table's time is estimated in docs/tables.md.
    # Issue 59: every test sentence of every domain (500 each on the default corpus), and three
    # seeds for the controls and the rows of the papers' main claims (--seeds).
    # curve_points: the dev evaluations of each stage 2 and FT (their curves; --set
    # curve_points=2 thins them when time is short).
    "default": dict(
        demo.BUDGETS["default"],
        contrastive_items=500,
        eval_sentences=None,
        seeds=3,
        curve_points=8,
    ),
    # Two points per curve: evaluating the dev sets costs more than a quick training step. Two
    # seeds: every path of the twins, at the least cost.
    "quick": dict(demo.BUDGETS["quick"], curve_points=2, seeds=2),
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
        "seeds": 3,
    },
}

#: The report's layout, part of its stamp (3: rows judged against their matched Mixed; 4: the
#: share of FT's gain; 5: a seed spread per control, the papers' claims and the goals; 6: the
#: stated test's verdicts, equal-compute controls, seeds, shares with intervals: issue 59).
REPORT_LAYOUT = 6

#: Where the domain knowledge sits (:func:`label_use_figures`): the file, and its layout
#: (part of its stamp).
LABEL_USE_FILE = "label_use.json"
LABEL_USE_LAYOUT = 2
COMMAND = ["bash", "run/tables.sh"]


def table_runs(families=None, architecture=DEFAULT_ARCHITECTURE, seeds=1, rows=None):
    """The rows of the table: a :class:`ldr_experiments.demo.Run` per family (its options from
    :data:`VARIANTS`), then the family's extra rows.

    Args:
      families: Registry names, in the order wanted (default: every registered family of
        :obj:`architecture`, in registration order). Mixed, the baseline, is always there,
        and so is the registry stage 1 of a family (Factorized PA's is Mixed).
      architecture: The architecture of the default families.
      seeds: The seeds of the rows trained with every seed (:attr:`Run.seeds`: the controls
        and the rows of the papers' main claims): their twins, seeds 2 to :obj:`seeds`, follow
        the rows.
      rows: Row names (``--rows``): only these rows of :obj:`families`' and what they need
        (:func:`needed_rows`); ``None``: every row.

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
    # A continued control no row of this table is judged against is not trained (Mixed
    # (equal passes) is: it says what the compute alone adds).
    used = {run.control for run in runs}
    runs = [
        run for run in runs if run.continues is None or run.name in used or run.name == EQUAL_PASSES
    ]
    if rows is not None:
        runs = needed_rows(runs, rows)
    names = {run.name for run in runs}
    # A control this table does not train (its family not chosen) is no control.
    runs = [run if run.control in names else dataclasses.replace(run, control=None) for run in runs]
    runs = [_with_modes(run) for run in runs]
    return runs + [twin for run in runs if run.seeds for twin in demo.seed_twins(run, seeds)]


def needed_rows(runs, rows):
    """The runs of :obj:`rows` and of what they need: the baseline (Mixed: the base of every
    continued training, FT_<domain> and the matched control), each row's control of the same
    compute and the row it continues, in turn theirs (a verdict is only ever made against a
    control that was trained).

    Raises:
      UserError: One line naming a row this table does not have, and the rows it has.
    """
    by_name = {run.name: run for run in runs}
    unknown = [row for row in rows if row not in by_name]
    if unknown:
        raise errors.UserError(
            "--rows: no row %s in this table (its rows: %s)"
            % (", ".join(repr(row) for row in unknown), ", ".join(by_name))
        )
    keep = set()
    todo = [runs[0].name] + list(rows)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        run = by_name[name]
        todo.extend(dep for dep in (run.control, run.continues) if dep in by_name)
    return [run for run in runs if run.name in keep]


def _with_modes(run):
    """:obj:`run` with the label modes its family supports (:data:`LABEL_MODES`, ``pred``
    where asked, ``ens-uniform`` where it translates ensembles of its domain views)."""
    caps = probe.capabilities(run.family)
    if run.modes is not None or caps.labels != probe.LABEL_NEEDED:
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
        caps = probe.capabilities(run.family)
        if run.seed_of is not None:
            continue  # A seed twin: its row's items are scored once.
        if run is runs[0] or caps.labels != probe.LABEL_IGNORED:
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
        if run.family == plan.baseline.family and run.seed_of is None and run.name in tied:
            mixed.setdefault(tied[run.name], run.name)
    return {name: mixed.get(value, plan.baseline.name) for name, value in tied.items()}


def control_rows(plan):
    """The rows that are controls, not methods: the baseline's family trained as the baseline
    is, with more compute (continued) or its output layer tied; not Mixed with other data or
    sampling (the balanced Mixed, the distilled student: methods of issue 54)."""
    return {
        run.name
        for run in plan.runs
        if run.family == plan.baseline.family and not (run.train or run.data or run.distilled)
    }


def system_rows(plan, steps, num_domains, tied):
    """The systems table's cells: row, family, output layer (:obj:`tied`:
    :func:`output_layers`'), parameters, training minutes, steps/s."""
    import tensorflow as tf

    rows = []
    by_title = {}
    for title, seconds in steps.timings:
        by_title.setdefault(title.replace(" (earlier run)", ""), seconds)
    for trained in plan.trained:
        if table_verdicts.parse_twin(trained.name)[1] > 1:
            continue  # A seed twin: its row's figures stand for it.
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
    domain :obj:`classification` scores; :obj:`advl_choice`: :func:`ldr_experiments.advl_choice.
    read_choice`'s, ``None`` when the table has no AdvL row).

    The rows that are defects (:mod:`ldr_experiments.defects`: collapsed, or more than 3 BLEU
    below their control) are listed in the findings and left out of every table and
    comparison."""
    domains = results["domains"]
    tied = output_layers(plan)
    controls = matched_controls(plan, tied)
    names = [run.name for run in plan.runs if run.seed_of is None]
    # Seed 1 of every row is checked (a twin goes with its row: seeds of one recipe may differ
    # by more than the bar, so a twin is not judged against seed 1 of its control).
    systems = names + [
        row
        for row, _ in results["rows"]
        if row.startswith("FT_") and table_verdicts.parse_twin(row)[1] == 1
    ]
    flagged = defects.find(
        row_averages(results),
        systems,
        plan.baseline.name,
        controls,
        defects.translation_counts(results, systems),
    )
    results = defects.without(results, flagged, lambda row: table_verdicts.parse_twin(row)[0])
    names = [name for name in names if name not in flagged]
    judge = table_verdicts.Judge(table_verdicts.outputs_of(plan.data, results))
    # The main tables: each row's first seed (the seeds' mean and deviation: their own table).
    first_seeds = dict(
        results,
        rows=[
            (row, scores)
            for row, scores in results["rows"]
            if table_verdicts.parse_twin(table_verdicts.system_and_mode(row)[0])[1] == 1
        ],
    )
    modes = {run.name: run.label_modes() for run in plan.runs}
    advl_choice_lines = grid_choice.choice_lines(advl_choice) if advl_choice else []
    lines = [
        "# The papers' tables on one corpus (%s)" % mode,
        "",
        "Every family of the registry on the corpus of `%s`, %d domains (%s), at the %s"
        " scale: %s steps per system trained from scratch, batches of %s tokens; FT_<domain>"
        " %s steps of its domain; %s; evaluation on %s test sentences per domain, beam 4;"
        " %d seeds for the controls and the rows of the papers' main claims."
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
            budget.get("seeds", 1),
        ),
        "",
    ]
    if plan.corpus_budget_notes:
        lines += [
            "Budgets fitted to the corpus: %s." % "; ".join(plan.corpus_budget_notes),
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
        " domain view). Rows without one ignore labels or use them for training only. Seed 1"
        " of each row; the rows of several seeds have their mean and deviation below.",
        "",
        evaluate.format_tables(first_seeds),
        "",
        "(`*`: sacrebleu's paired bootstrap of seed 1 against %s, as `ldr-eval` prints it for"
        " every row, tied or not: a mark, not this report's verdicts, which follow.)"
        % plan.baseline.name,
        "",
        "![BLEU per domain](bleu.png)",
        "",
    ]
    lines += table_verdicts.seed_table(results, names)
    lines += table_verdicts.verdict_section(judge, plan, controls, names, modes)
    lines += table_verdicts.share_section(judge, plan.baseline.name, names, control_rows(plan))
    lines += table_serving.serving_section(plan, names)
    lines += [
        "Every continued training (FT_<domain>, the stage 2 of the two-stage families) starts"
        " from %s (seed k from its seed k)." % plan.baseline.name,
        "",
        "## Systems",
        "",
        "Parameters counted in the trained checkpoint (every weight, biases included);"
        " domain-specific ones (the per-domain copies, regions, adapters, proportion layers)"
        " per domain. Output layer: tied with the target embeddings, or its own (each row is"
        " judged against the Mixed of the same kind). Training: the minutes of its"
        " training stages on one lane (a curriculum's"
        " or a stage 2's own, not its stage-1 family's), and the last stage's steps/s; seed 1.",
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
    lines += table_compute.curve_section(table_compute.read_figures(steps.out), steps.out)
    lines += [
        "## The papers' figures beside ours",
        "",
        "Quoted from the papers (`ldr_experiments/quoted.py`), on their data and model sizes:"
        " only the ordering of the rows is comparable with ours.",
        "",
    ]
    averages = row_averages(first_seeds)  # Without the defects' rows.
    lines += quoted_lines(averages)
    lines += ["## What this shows", "", "Generated from the figures above.", ""]
    lines += findings(first_seeds, judge, plan.baseline.name, names, controls, tied)
    lines += defects.lines(flagged)
    equal_controls = {run.name: run.control for run in plan.runs if run.control}
    lines += [""] + claims.claim_lines(
        judge, controls, tied, plan.baseline.name, flagged, equal_controls
    )
    lines += claims.goal_lines(judge, plan, controls, plan.baseline.name, flagged)
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
    """The demo's :class:`ldr_experiments.demo.Plan` for the rows of :func:`table_runs`."""

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
        #: The seed twins' row names (:func:`ldr_experiments.demo.seed_twins`): folded into
        #: their rows' mean and deviation, not rows of their own in the report.
        self.twins = {run.name for run in runs if run.seed_of is not None}
        self.stage_titles = {}
        # The per-domain dev loss of every stage 2 and fine-tuning, at curve_points points
        # of each (set per training by _train).
        self.curve_points = budget.get("curve_points", 8)
        self.curve_every = max(1, budget["finetune_steps"] // self.curve_points)
        #: The stage 2's steps and sampling (:class:`ldr_experiments.equal_budgets.Stage2Budget`),
        #: known once the corpus is (:meth:`equal_stage2`).
        self.stage2 = None

    def write_data_config(self, info):
        super().write_data_config(info)
        self.equal_stage2(equal_budgets.corpus_sizes(info))

    def equal_stage2(self, sizes):
        """Sets the stage 2's steps from the corpus's sizes (:obj:`sizes`: ``{domain:
        |C_d|}``) so that every domain's blocks see at least FT_<domain>'s batches of that
        domain (:mod:`ldr_experiments.equal_budgets`); the budget's ``stage2_steps`` is the
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
        return super().report_inputs() + [
            self.label_use_path,
            os.path.join(self.steps.out, table_compute.CURVE_FILE),
        ]

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
        self.distillation = None
        if any(run.distilled for run in runs):
            # The student's corpora: the teachers' translations (the data configuration is
            # written: the distillation reads its training corpora).
            self.distillation = distill = distillation.Distillation(self)
            runs = [
                (
                    dataclasses.replace(
                        run,
                        data=dict(run.data, train_corpora=distill.train_corpora()),
                        after=tuple(run.after) + tuple(distill.stage_names()),
                    )
                    if run.distilled
                    else run
                )
                for run in runs
            ]
        stages = super().training_stages(runs)
        if self.distillation is not None:
            stages += self.distillation.stages()  # After the FT teachers' trainings.
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
        "--rows",
        nargs="+",
        metavar="ROW",
        help="only these rows (the report's names, e.g. 'LDR (summed)') and what they need: Mixed,"
        " their controls, the rows they continue (the rows of one question, when the whole table"
        " does not fit the time)",
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
        "--seeds",
        type=int,
        help="seeds of the controls and the rows of the papers' main claims (default 3; 2"
        " with --quick; 1: no twin, every verdict on one seed)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=N",
        help="a budget entry (repeatable; e.g. --set eval_sentences=5 --set finetune_steps=2:"
        " the paper-scale path on tiny budgets)",
    )
    parser.add_argument(
        "--config",
        help="data configuration (default: %s, with the data paths of --corpus)" % demo.DATA_CONFIG,
    )
    parser.add_argument(
        "--corpus",
        "--data",
        dest="data",
        help="a corpus ldr-data built (files, opus or default): its domains, languages and"
        " sizes are read from it (default: the default corpus, %s, built first)"
        % common.DEFAULT_CORPUS,
    )
    parser.add_argument("--out", help="results directory (default results/tables[-quick])")
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    parser.add_argument(
        "--advl_choice",
        help="AdvL's reversal weight chosen by run/advl_grid.sh (default: %s, or its -quick"
        " twin with --quick; the model's default weight when absent)"
        % grid_choice.default_choice_path(False),
    )
    parser.add_argument("--num_gpus", type=int, default=None, help="onmt-main --num_gpus")
    parser.add_argument(
        "--onmt-options",
        default="",
        help="comma-separated options of every training command before `train` "
        "(e.g. --mixed_precision,--jit_compile on GPUs)",
    )
    args = parser.parse_args(argv)
    # The user's paths are the user's (from where the command runs).
    args.data = common.corpus_argument(args.data)
    args.config = common.user_path(args.config) or demo.DATA_CONFIG
    args.out = common.user_path(args.out)
    args.advl_choice = common.user_path(args.advl_choice)
    key = "quick" if args.quick else ("paper" if args.scale == "paper" else "default")
    budget = dict(BUDGETS[key])
    for name, value in (
        ("steps", args.steps),
        ("stage2_steps", args.stage2_steps),
        ("seeds", args.seeds),
    ):
        if value is not None:
            if value < 1:
                raise errors.UserError("--%s must be >= 1, got %d" % (name, value))
            budget[name] = value
    for entry in args.set:
        name, _, value = entry.partition("=")
        countable = name in budget and _countable(budget[name])
        if not countable or not value.isdigit() or int(value) < 1:
            raise errors.UserError(
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


@engine.driver("tables")
def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args, budget = _arguments(argv)
    for spec in args.user_module:
        registry.load_user_module(spec)
    runs = table_runs(args.families, seeds=budget["seeds"], rows=args.rows)
    advl_choice = None
    if any(run.family == grid_choice.FAMILY for run in runs):
        advl_choice = grid_choice.read_choice(
            args.advl_choice or grid_choice.default_choice_path(args.quick),
            grid_choice.recipe(args, budget),
        )
        runs = grid_choice.apply_choice(runs, advl_choice)
        common.log("[tables] %s" % grid_choice.choice_lines(advl_choice)[0])
    steps = common.Steps(args.out, name="tables", options=args.options)
    plan = TablesPlan(args, budget, steps, runs)
    start = engine.started()  # The command's start (the report's total time).

    if args.data == common.DEFAULT_CORPUS:
        steps.run_stages([plan.corpus_stage()], ahead=True)
    info = common.corpus_info(args.data)  # Fails in one line on a corpus not built.
    plan.write_data_config(info)
    lanes = 2
    in_lanes = budget["evaluate_in_lanes"]
    parallel = [plan.items_stage()] + plan.training_stages(plan.runs)
    evaluation = plan.evaluation_stages(in_lanes)
    if in_lanes:
        parallel, evaluation = parallel + evaluation, []
    common.log("[tables] %d rows, %d stages" % (len(runs), len(parallel)))
    common.log("[tables] %s" % plan.stage2.rule())
    steps.run_stages(demo._by_priority(parallel), lanes, ahead=True)
    # The scores, the label-use figures and the compute curve read what the stages above
    # wrote, not each other: side by side (with the evaluations, when those were not in lanes,
    # one at a time).
    steps.run_stages(
        evaluation + [plan.score_stage(), plan.label_use_stage(), table_compute.curve_stage(plan)],
        None if evaluation else lanes,
        ahead=True,
    )
    if engine.planning_ahead():
        common.log("[tables] dry run: then the report (%s)" % os.path.join(steps.out, "report.md"))
        return 0

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
