"""The README's main command (``docs/demo.md``): the whole multi-domain experiment on the
default corpus.

    bash run/demo.sh [--quick] [--full]
    ldr-experiments demo [--quick] [--full]    # the same, from the root

The experiment is a list of declared stages (:class:`ldr_experiments.common.Stage`), each with
its inputs, its outputs and a stamp of what it depends on (:mod:`ldr_opennmt.stamps`):

1. ``corpus``: builds the default corpus (``ldr-data build default``, cleaning filters
   reported; its stamp is the corpus's own ``DONE``) and ``items``, the contrastive items
   from it;
2. one training stage per system of :data:`SYSTEMS` (named by its directory: ``mixed``,
   ``ldr``, ...), a short list of registry families
   (:mod:`ldr_opennmt.registry`: model definition, row title, stage-1 family and label
   modes are the registry's) with this run's options: Mixed (twice: seeds 1 and 2, the
   run-to-run spread every difference is judged by) and LDR, small Transformers from
   ``model_defs/small/``, trained with ``ldr-main`` on per-domain corpora
   (``data_configs/default_corpora.yml``), and Factorized PA with the paper's curriculum,
   Mixed being its stage 1 (unfold, then stage 2 on the domain blocks alone); ``--full``
   adds DC, LDR^1 (alpha = 1) and word-level domain mixing;
3. fine-tunes Mixed on each domain (the FT_* baselines), trains a domain classifier and
   labels the test sets with it (LDR_pred);
4. ``eval_<system>``, one stage per system: its test translations (``ldr-eval``) with oracle,
   generic and wrong labels for the families that read them, predicted labels for LDR;
5. ``contrastive_<system>``, one stage per system of the contrastive lexical-choice test
   (``ldr-eval contrastive``): Mixed, DC, LDR and Factorized PA in every label mode;
6. ``score`` (BLEU, chrF, significance, the contrastive summary) and ``report``:
   ``report.md`` with the corpus and cleaning tables, classifier precision/recall, BLEU and
   chrF tables with the seed spread, the contrastive tables, "what this shows and what it
   cannot" (generated from the figures), example translations, time and speed per stage,
   configurations and the commands to rerun any step. Its first line says when (UTC), on
   which machine (CPU model and cores, from ``/proc/cpuinfo``) and by which command it was
   written (:func:`provenance`): facts the report stage's stamp file records, never compares,
   so that a rerun with the same inputs keeps the report and the line that dates it.

A stage is skipped while its stamp matches (the same checkpoint files, configuration,
input files and options; ``OUT/stages/NAME.json``), saying so; one whose inputs changed
runs again, saying what changed, after removing what it made from the former inputs. So
``--quick``, ``--full`` after the default run and a rerun after a crash all reuse what is
done: an interrupted training continues from its last checkpoint, and a rerun with
nothing changed takes seconds.
"""

import argparse
import dataclasses
import functools
import json
import os
import sys
import time
from typing import Any, Mapping, Optional, Tuple

from ldr_experiments import baselines, common, engine, host_speed, table_verdicts
from ldr_experiments.demo.findings import (  # noqa: F401 (the demo's names, for the tables)
    contrastive_rates,
    control_line,
    demo_comparisons,
    findings,
    row_averages,
    seed_spread,
    verdict_findings,
)
from ldr_experiments.demo.plan import Plan, _by_priority, _max_sentences, _system_args  # noqa: F401
from ldr_experiments.demo.report import _example_rows, _report
from ldr_experiments.demo.runs import (  # noqa: F401
    BASELINE,
    BUDGETS,
    CLASSIFIER_DEF,
    CONTRASTIVE_SYSTEMS,
    DATA_CONFIG,
    DEMO_COMMAND,
    FULL_EXTRA_MINUTES,
    LABEL_MODES,
    LABEL_SYSTEMS,
    LDR_DEFS,
    REPORT_LAYOUT,
    SEED,
    SEED_ROW,
    SYSTEMS,
    TRANSLATES,
    Run,
    Trained,
    classifier_config,
    seed_twins,
    twin_name,
)
from ldr_experiments.machine import PROVENANCE, cpu_model, machine, provenance, provenance_line
from ldr_opennmt import config_loader, errors, registry, stamps
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.data import filters
from ldr_opennmt.evaluation import classification, contrastive, evaluate
from ldr_opennmt.evaluation import systems as systems_lib
from ldr_opennmt.utils import DEFAULT_CACHE, copy_file_atomic, write_lines_atomic


def _arguments(argv):
    """``(args, budget)`` of the command line (``args.out`` set, ``args.mode`` the run's)."""
    parser = argparse.ArgumentParser(description="Run the multi-domain demo experiment.")
    parser.add_argument("--quick", action="store_true", help="smaller budgets (about 5 minutes)")
    parser.add_argument(
        "--full",
        action="store_true",
        help="also train DC, LDR^1 (alpha = 1) and word-level domain mixing (about %d more "
        "minutes)" % FULL_EXTRA_MINUTES,
    )
    parser.add_argument(
        "--steps",
        type=int,
        help="training steps of the systems trained from scratch (default %d; %d with --quick);"
        " a run with other steps in the same --out trains every system again"
        % (BUDGETS["default"]["steps"], BUDGETS["quick"]["steps"]),
    )
    parser.add_argument("--out", help="results directory (default results/demo[-quick])")
    parser.add_argument(
        "--corpus",
        "--data",
        dest="data",
        help="a corpus ldr-data built (files, opus or default): its domains and languages are"
        " read from it (default: the default corpus, %s, built first)" % common.DEFAULT_CORPUS,
    )
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    args = parser.parse_args(argv)
    budget = dict(BUDGETS["quick" if args.quick else "default"])
    if args.steps is not None:
        if args.steps < 1:
            raise errors.UserError("--steps must be >= 1, got %d" % args.steps)
        budget["steps"] = args.steps
    # The user's paths are the user's (from where the command runs).
    args.data = common.corpus_argument(args.data)
    args.out = common.user_path(args.out)
    args.out = args.out or ("results/demo-quick" if args.quick else "results/demo")
    args.mode = ("quick" if args.quick else "default") + (", --full" if args.full else "")
    return args, budget


def announce_time(args, budget, measure=host_speed.measure_lanes):
    """Before anything trains, says how long the demo takes on this host (from its speed,
    :mod:`ldr_experiments.host_speed`, about 25 s to measure) and how to run the quick one.

    Nothing is measured for ``--quick``, a dry run, or a results directory whose report
    exists (a rerun mostly reuses what it finished).

    Returns:
      The minutes announced, or ``None``.
    """
    if args.quick or engine.dry_run() or os.path.exists(os.path.join(args.out, "report.md")):
        return None
    common.log("[demo] measuring this host's speed (about 25 s)")
    speed = measure()
    if speed is None:
        common.log("[demo] this host's speed could not be measured: no estimate of the time")
        return None
    # The trainings are the demo's time: it scales with the steps trained from scratch, and
    # by the record host's speed over this one's (--full's extra minutes were timed there too).
    slower = host_speed.demo_minutes(speed) / host_speed.DEMO_MINUTES
    minutes = host_speed.demo_minutes(speed) * budget["steps"] / BUDGETS["default"]["steps"]
    if args.full:
        minutes += FULL_EXTRA_MINUTES * slower
    common.log("[demo] %s" % host_speed.describe(speed))
    common.log(
        "[demo] this run takes about %.0f minutes on this host%s (%.1f on the host of %s);"
        " `bash run/demo.sh --quick` is a smoke run of the same stages with tiny budgets"
        % (
            minutes,
            " with --full" if args.full else "",
            host_speed.DEMO_MINUTES,
            host_speed.DEMO_RECORD,
        )
    )
    return minutes


@engine.driver("demo")
def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args, budget = _arguments(argv)
    if args.data != common.DEFAULT_CORPUS:
        common.corpus_info(args.data)  # A corpus of one's own is checked first (one domain).
    announce_time(args, budget)
    steps = common.Steps(args.out)  # A link given as --out is resolved once.
    plan = Plan(args, budget, steps)
    start = engine.started()  # The command's start (the report's total time).

    if args.data == common.DEFAULT_CORPUS:
        # A corpus of the user's is theirs: read only.
        steps.run_stages([plan.corpus_stage()], ahead=True)
    info = common.corpus_info(args.data)
    plan.write_data_config(info)
    # Two lanes (one core each on the README's 2-core machine) run the stages side by side,
    # the longest first (_by_priority). With budget["evaluate_in_lanes"], each system is
    # translated and scored in its lane (an ldr-eval process) as soon as it is trained;
    # otherwise in this process after the trainings.
    lanes = 2
    in_lanes = budget["evaluate_in_lanes"]
    runs = [run for run in SYSTEMS if args.full or not run.full]
    parallel = [plan.items_stage()] + plan.training_stages(runs)
    evaluation = plan.evaluation_stages(in_lanes)
    if in_lanes:
        parallel, evaluation = parallel + evaluation, []
    common.log(
        "[demo] 2-5/6 %d stages (trainings, translations of %d test sentences per domain,"
        " contrastive scores)" % (len(parallel) + len(evaluation), budget["eval_sentences"])
    )
    steps.run_stages(_by_priority(parallel), lanes, ahead=True)
    steps.run_stages(evaluation + [plan.score_stage()], ahead=True)
    if engine.planning_ahead():
        common.log("[demo] dry run: then the report (%s)" % os.path.join(steps.out, "report.md"))
        return 0

    results, contrastive_results, classifier_scores = plan.results()
    spread = seed_spread(results)
    rows = {t.name for t in plan.trained}
    judge = table_verdicts.Judge(table_verdicts.outputs_of(args.data, results))
    label_rows = [(t.name, t.modes or ()) for t in plan.trained if t.reads_labels]
    extras = {
        "verdicts": table_verdicts.verdict_lines(judge, demo_comparisons(rows), label_rows)
        + verdict_findings(judge),
        "spread": spread,
        "contrastive": contrastive.format_tables(contrastive_results),
        "findings": findings(
            results,
            spread,
            contrastive_rates(contrastive_results),
            output_layers=common.output_layers(plan),
            steps=budget["steps"],
        ),
        "examples": evaluate.examples(
            args.data, results, per_domain=budget["examples"], rows=_example_rows(results)
        ),
    }
    write = functools.partial(
        _report,
        args.mode,
        info,
        results,
        classifier_scores,
        steps,
        configs_dir=steps.configs_dir,
        budget=budget,
        extras=extras,
    )
    steps.run_stages([plan.report_stage(write, args.mode, start, DEMO_COMMAND + argv)])
    print(classification.format_table(classifier_scores))
    print(evaluate.format_tables(results))
    print("\n".join(extras["findings"]))
    common.log(
        "[demo] 6/6 report: %s (total %.1f min)"
        % (os.path.join(steps.out, "report.md"), (time.time() - start) / 60)
    )
    return 0


if __name__ == "__main__":
    sys.exit(errors.run_main("run/demo.sh", main))
