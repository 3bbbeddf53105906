"""Dev BLEU against training compute (issue 59 item 4): how far Mixed's curve is from flat at
the tables' budget, with the two-pass headline rows beside it.

A training saves a checkpoint every ``save_checkpoints_steps`` (a quarter of the tables'
budget) and keeps the last ``keep_checkpoint_max`` (two in the default corpus's configuration,
``data_configs/default.yml``: 3375 and 4500 steps); a training that continues another saves
at its end only. ``Mixed (equal passes)`` continues ``Mixed``, so one curve of Mixed runs
through both (3375, 4500 and 9000 passes). Each
kept checkpoint of seed 1 translates the dev sets of every domain (every sentence, with its true
label) and is scored with sacrebleu's BLEU. Compute is counted in forward-backward passes:
steps times the passes of a step (:data:`CURVES`: 2 for the rows trained ``summed``, whose
every step trains a generic and a domain batch).

The criterion of issue 59: a curve is flat where 25% more compute gains less than
:data:`FLAT_BLEU` BLEU. Read from the last two points of a curve, the gain scaled to 25% more
compute on a logarithmic axis (``gain * log(1.25) / log(p_last / p_before)``: the curves of
these trainings are near straight lines against log compute, not against compute).
"""

import json
import math
import os
import re
import tempfile

from ldr_opennmt import stamps
from ldr_opennmt.reports import markdown_table, pyplot
from ldr_opennmt.utils import read_lines, save_figure, write_text_atomic

from . import common, engine

CURVE_FILE = "compute_curve.json"
CURVE_PLOT = "compute_curve.png"
LAYOUT = 1

#: (curve, the rows whose checkpoints it reads in order, passes per step). A row missing from
#: the table (``--families``) leaves its curve out.
CURVES = (
    ("Mixed", ("Mixed", "Mixed (equal passes)"), 1),
    ("LDR (summed)", ("LDR (summed)",), 2),
    ("DC (summed)", ("DC (summed)",), 2),
)

#: Issue 59's flat criterion: less than this many BLEU for 25% more compute.
FLAT_BLEU = 0.3

_CHECKPOINT = re.compile(r'^all_model_checkpoint_paths: "(?P<path>(?:.*/)?ckpt-(?P<step>\d+))"\s*$')


def kept_checkpoints(model_dir):
    """``[(step, checkpoint prefix)]`` of the checkpoints ``model_dir/checkpoint`` lists (what
    TensorFlow keeps), by step; ``[]`` without one."""
    try:
        with open(os.path.join(model_dir, "checkpoint"), encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    found = {}
    for line in lines:
        match = _CHECKPOINT.match(line)
        if match:
            path = match.group("path")
            if not os.path.isabs(path):
                path = os.path.join(model_dir, path)
            found[int(match.group("step"))] = path
    return sorted(found.items())


def curve_points(trained_runs, passes_per_step):
    """``[(step, passes, checkpoint prefix, trained run)]`` of a curve: the kept checkpoints of
    :obj:`trained_runs` (a training and the ones continuing it), one per step (a continuation's
    copy of its base's last step is the base's)."""
    points = {}
    for trained in trained_runs:
        for step, prefix in kept_checkpoints(trained.model_dir):
            points.setdefault(step, (step, step * passes_per_step, prefix, trained))
    return [points[step] for step in sorted(points)]


def plan_curves(plan):
    """``[(curve, passes per step, points)]`` of the rows :data:`CURVES` names that the plan
    trains (seed 1)."""
    by_name = {trained.name: trained for trained in plan.trained}
    found = []
    for name, rows, passes in CURVES:
        runs = [by_name[row] for row in rows if row in by_name]
        if runs and runs[0].name == rows[0]:
            found.append((name, passes, runs))
    return found


def dev_scores(system, prefix, corpus_dir, src, tgt, domains, detokenize):
    """BLEU and chrF of one checkpoint on every domain's dev set: ``{domain: {"bleu", "chrf"}}``.

    Args:
      system: The :class:`ldr_opennmt.evaluation.systems.System` of the run.
      prefix: The checkpoint.
      corpus_dir: The corpus (``dev.DOMAIN.SRC``, ``dev.DOMAIN.domain``, ``raw/dev.DOMAIN.TGT``).
      detokenize: ``tokens -> text`` (the corpus's target tokenizer's).
    """
    from ldr_opennmt.evaluation import scoring

    scores = {}
    for domain in domains:
        source = os.path.join(corpus_dir, "dev.%s.%s" % (domain, src))
        labels = os.path.join(corpus_dir, "dev.%s.domain" % domain)
        references = read_lines(os.path.join(corpus_dir, "raw", "dev.%s.%s" % (domain, tgt)))
        features = [source, labels] if system.reads_labels else source
        with tempfile.TemporaryDirectory() as directory:
            output = os.path.join(directory, "dev.%s.%s" % (domain, tgt))
            system.runner.infer(features, predictions_file=output, checkpoint_path=prefix)
            hypotheses = [detokenize(line.split()) for line in read_lines(output)]
        scores[domain] = scoring.score(hypotheses, references)
    return scores


def measure(plan, corpus_dir, src, tgt, domains, detokenize, log=common.log):
    """The curves of :func:`plan_curves`, measured: ``{"layout", "curves": [{"name", "passes
    per step", "points": [{"step", "passes", "bleu": {domain: x}, "chrf": {...}, "avg"}]}]}``.
    """
    from ldr_opennmt.evaluation.systems import System

    curves = []
    for name, passes, runs in plan_curves(plan):
        systems = {}
        points = []
        for step, compute, prefix, trained in curve_points(runs, passes):
            system = systems.get(trained.name)
            if system is None:
                system = systems[trained.name] = System(trained.name, trained.config_paths)
            scores = dev_scores(system, prefix, corpus_dir, src, tgt, domains, detokenize)
            bleu = {domain: scores[domain]["bleu"] for domain in domains}
            chrf = {domain: scores[domain]["chrf"] for domain in domains}
            average = sum(bleu.values()) / len(bleu)
            log(
                "[tables] compute curve %s: step %d (%d passes): dev BLEU %.1f"
                % (name, step, compute, average)
            )
            points.append(dict(step=step, passes=compute, bleu=bleu, chrf=chrf, avg=average))
        curves.append({"name": name, "passes_per_step": passes, "points": points})
    return {"layout": LAYOUT, "curves": curves}


def gain_per_quarter(points):
    """The BLEU that 25% more compute gains at the end of a curve (:obj:`points`: ``[(passes,
    BLEU)]`` by compute), from its last two points on a log axis; ``None`` below two points."""
    if len(points) < 2:
        return None
    (before, start), (last, end) = points[-2], points[-1]
    if last <= before:
        return None
    return (end - start) * math.log(1.25) / math.log(last / before)


def flat_verdict(name, points):
    """One line: whether the curve :obj:`name` (``[(passes, BLEU)]``) is flat at its end by
    issue 59's criterion."""
    rate = gain_per_quarter(points)
    if rate is None:
        return "- %s: fewer than two checkpoints, no verdict." % name
    (before, _), (last, end) = points[-2], points[-1]
    flat = rate < FLAT_BLEU
    return (
        "- %s: **%s** at %d passes (dev BLEU %.1f): %+.2f BLEU per 25%% more compute from %d to"
        " %d passes, against the %.1f of the criterion%s."
        % (
            name,
            "flat" if flat else "not flat",
            last,
            end,
            rate,
            before,
            last,
            FLAT_BLEU,
            "" if flat else " (%.0fx the criterion)" % (rate / FLAT_BLEU),
        )
    )


def curve_section(figures, out):
    """The report's section on :obj:`figures` (:func:`measure`'s), with ``compute_curve.png``
    in :obj:`out`; ``[]`` without curves."""
    curves = [curve for curve in (figures or {}).get("curves", []) if curve["points"]]
    if not curves:
        return []
    rows = []
    for curve in curves:
        for point in curve["points"]:
            rows.append(
                [curve["name"], str(point["step"]), str(point["passes"]), "%.1f" % point["avg"]]
                + ["%.1f" % value for value in point["bleu"].values()]
            )
    domains = list(curves[0]["points"][0]["bleu"])
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(6, 3.5))
    try:
        for curve in curves:
            points = curve["points"]
            axis.plot(
                [p["passes"] for p in points],
                [p["avg"] for p in points],
                marker="o",
                label=curve["name"],
            )
        axis.set_xscale("log")
        axis.set_xlabel("forward-backward passes (log scale)")
        axis.set_ylabel("dev BLEU (average of the domains)")
        axis.legend(fontsize=8)
        figure.tight_layout()
        save_figure(figure, os.path.join(out, CURVE_PLOT))
    finally:
        plt.close(figure)
    lines = [
        "## Dev BLEU against training compute",
        "",
        "Seed 1's kept checkpoints, each translating every dev sentence of every domain with its"
        " true label (`ldr_experiments/table_compute.py`). Compute is forward-backward passes:"
        " steps times the passes of a step (2 for a row trained `summed`). Mixed's curve runs on"
        " through Mixed (equal passes), which continues it. Issue 59's criterion: a curve is"
        " flat where 25%% more compute gains less than %.1f BLEU (read from its last two"
        " points, on a log axis)." % FLAT_BLEU,
        "",
        markdown_table(
            ["curve", "step", "passes", "avg BLEU"] + domains, rows, "lrrr" + "r" * len(domains)
        ),
        "",
        "![Dev BLEU against training compute](%s)" % CURVE_PLOT,
        "",
    ]
    lines += [
        flat_verdict(curve["name"], [(p["passes"], p["avg"]) for p in curve["points"]])
        for curve in curves
    ]
    return lines + [""]


def curve_stage(plan):
    """The stage that measures the curves (:func:`measure`) after their trainings: its stamp
    is every kept checkpoint it reads and the dev files."""
    path = os.path.join(plan.steps.out, CURVE_FILE)
    curves = plan_curves(plan)
    domains = plan.domains

    def stamp():
        return stamps.make_stamp(
            layout=LAYOUT,
            checkpoints=[
                [name, step, stamps.checkpoint_digest(prefix)]
                for name, passes, runs in curves
                for step, _, prefix, _ in curve_points(runs, passes)
            ],
            dev=stamps.files_digest(
                [
                    os.path.join(plan.data, "dev.%s.%s" % (domain, side))
                    for domain in domains
                    for side in (plan.source, "domain")
                ]
                + [os.path.join(plan.data, "raw", "dev.%s.%s" % (d, plan.target)) for d in domains]
            ),
        )

    def run(cores):
        from ldr_opennmt.data import corpus as corpus_lib

        detok = corpus_lib.load_tokenizer(plan.data, plan.target)
        figures = measure(plan, plan.data, plan.source, plan.target, domains, detok.detokenize)
        write_text_atomic(path, json.dumps(figures, indent=2) + "\n")

    return common.Stage(
        "compute_curve",
        "dev BLEU against compute",
        "5/6",
        stamp,
        [path],
        run,
        after=[trained.slug for _, _, runs in curves for trained in runs],
        owns=[path],
        kind=engine.EVALUATE,
    )


def read_figures(out):
    """:func:`measure`'s figures kept in :obj:`out`, or ``None``."""
    path = os.path.join(out, CURVE_FILE)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)
