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
import sys
import time

from ldr_experiments import engine
from ldr_opennmt import config_loader, errors, registry, stamps
from ldr_opennmt.utils import DEFAULT_CACHE, write_text_atomic

from . import advl_choice as grid_choice
from . import common, demo, distillation, equal_budgets, table_compute
from .table_label_use import label_use_figures
from .table_report import write_report
from .table_rows import BUDGETS, MAX_STEP, baseline_run, contrastive_rows, table_runs

#: The report's layout, part of its stamp (3: rows judged against their matched Mixed; 4: the
#: share of FT's gain; 5: a seed spread per control, the papers' claims and the goals; 6: the
#: stated test's verdicts, equal-compute controls, seeds, shares with intervals: issue 59).
REPORT_LAYOUT = 6

#: Where the domain knowledge sits (:func:`label_use_figures`): the file, and its layout
#: (part of its stamp).
LABEL_USE_FILE = "label_use.json"
LABEL_USE_LAYOUT = 2
COMMAND = ["bash", "run/tables.sh"]


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
