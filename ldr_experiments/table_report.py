"""The report of the papers' tables (``report.md`` of ``ldr-experiments tables``): the rows'
parameters, their matched controls, and the report built from the evaluation's results
(:func:`write_report`).
"""

import re

from ldr_opennmt import registry
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.evaluation import contrastive, evaluate
from ldr_opennmt.reports import markdown_table

from . import advl_choice as grid_choice
from . import claims, common, defects, table_compute, table_serving, table_verdicts
from .common import output_layers
from .table_curves import curve_section
from .table_findings import findings, quoted_lines, row_averages
from .table_label_use import label_use_section

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
