"""AdvL's reversal weight chosen on the dev sets (issue 42, item 5), for the papers' tables.

    bash run/advl_grid.sh [--quick] [--weights 0.01 0.03 0.1 0.3] [--steps N] [--set KEY=N]
    ldr-experiments advl-grid      # the same, from the root

The papers give no reversal weight ``lambda`` for AdvL, and at the table's size the model's
default (1) collapses it (docs/tables.md, finding 4). Each weight of the grid is a training
of the table's AdvL row (:mod:`ldr_experiments.tables`: the same recipe, budget, seed, data and
ramp) with ``params: gradient_reversal_scale`` set to it, then translated on the first
``eval_sentences`` dev sentences of each domain (beam 4) and scored with BLEU; the number of
distinct translations tells a point that collapsed (:mod:`ldr_experiments.defects`). The choice
is the weight with the best average dev BLEU among the points that did not collapse (the
smaller weight on a tie); ``choice.json`` records it, the recipe the grid ran with and every
point's dev BLEU, and ``report.md`` shows them. ``bash run/tables.sh`` trains its AdvL row
with that weight when the file is there and its recipe is the table's (:func:`read_choice`),
and says in its report which weight it used and why.

Stamped stages like the other drivers of ``ldr_experiments/``: a rerun skips what is done,
an interrupted training continues from its last checkpoint, and a new weight adds one
training. The trainings run on two lanes (one core each), the dev translations after them.
"""

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time

from ldr_experiments import engine
from ldr_opennmt import config_loader, errors, stamps
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.evaluation import scoring
from ldr_opennmt.evaluation.systems import System
from ldr_opennmt.reports import markdown_table
from ldr_opennmt.utils import read_lines, write_lines, write_text_atomic

from . import common, defects, demo, tables
from .advl_choice import (  # noqa: F401 (the grid's names, as before the split)
    CHOICE_FILE,
    CHOICE_LAYOUT,
    DEFAULT_WEIGHT,
    FAMILY,
    GRID,
    RECIPE_KEYS,
    SCALE_PARAM,
    apply_choice,
    choice_lines,
    default_choice_path,
    default_out,
    read_choice,
    recipe,
)


def slug(weight):
    """The directory and stage name of a grid point (``advl_lambda_0.03``)."""
    return "advl_lambda_%g" % weight


def grid_runs(weights, budget):
    """The table's AdvL row (:func:`ldr_experiments.table_rows.table_runs`, its parameters set by
    the budget) once per weight, with ``params: gradient_reversal_scale``."""
    [advl] = [r for r in tables.table_runs([FAMILY]) if r.family == FAMILY and not r.suffix]
    advl = tables._with_budget(advl, budget)
    return [
        dataclasses.replace(
            advl,
            suffix=" (lambda %g)" % weight,
            slug=slug(weight),
            params=dict(advl.params, **{SCALE_PARAM: weight}),
        )
        for weight in weights
    ]


def point_config(run, budget, runs_dir):
    """A grid point's run configuration: the table's for a system trained from scratch
    (:meth:`ldr_experiments.demo.Plan.training_stages`)."""
    return common.train_config(
        run.directory,
        dict(run.params),
        dict(run.train),
        budget,
        runs_dir,
        data=dict(common.MIXED_BATCHES),
    )


def dev_scores(data, config_paths, name, work_dir, sentences):
    """Translates the first :obj:`sentences` dev sentences of every domain with a trained
    system (its own decoding options: beam 4) and scores them.

    Returns:
      ``{"bleu": {domain: BLEU}, "chrf": {domain: chrF}, "average": mean BLEU,
      "distinct": distinct translations, "sentences": sentences translated}``.
    """
    info = corpus_lib.load_info(data)
    src, tgt = info["source_lang"], info["target_lang"]
    detok = corpus_lib.load_tokenizer(data, tgt)
    sources, labels, references = [], [], {}
    for domain in info["domains"]:
        lines = read_lines(os.path.join(data, "dev.%s.%s" % (domain, src)))[:sentences]
        refs = read_lines(os.path.join(data, "raw", "dev.%s.%s" % (domain, tgt)))[:sentences]
        scoring.check_aligned(lines, refs, "dev set of %s" % domain)
        sources += lines
        labels += [domain] * len(lines)
        references[domain] = refs
    system = System(name, config_paths, modes=("oracle",))
    with tempfile.TemporaryDirectory(prefix=".dev.", dir=work_dir) as tmp:
        source_file = os.path.join(tmp, "dev.%s" % src)
        label_file = os.path.join(tmp, "dev.domain")
        output = os.path.join(tmp, "dev.out.%s" % tgt)
        write_lines(source_file, sources)
        write_lines(label_file, labels)
        system.translate(source_file, label_file, output)
        translations = read_lines(output)
    scoring.check_aligned(translations, sources, output)
    result = {"bleu": {}, "chrf": {}}
    start = 0
    for domain, refs in references.items():
        hyps = [detok.detokenize(line.split()) for line in translations[start : start + len(refs)]]
        start += len(refs)
        scores = scoring.score(hyps, refs)
        result["bleu"][domain], result["chrf"][domain] = scores["bleu"], scores["chrf"]
    result["average"] = sum(result["bleu"].values()) / len(result["bleu"])
    result["distinct"] = len(set(translations))
    result["sentences"] = len(translations)
    return result


def choose(points):
    """The chosen point of :obj:`points` (each ``{"weight", "average", "distinct",
    "sentences"}``): the best average dev BLEU among those that did not collapse (fewer
    distinct translations than :data:`ldr_experiments.defects.COLLAPSE_SHARE` of the sentences),
    the smaller weight on a tie; ``None`` when every point collapsed."""
    kept = [p for p in points if not collapsed(p)]
    if not kept:
        return None
    return max(kept, key=lambda p: (round(p["average"], 6), -p["weight"]))


def collapsed(point):
    """Whether a grid point collapsed (:data:`ldr_experiments.defects.COLLAPSE_SHARE`)."""
    return point["distinct"] < defects.COLLAPSE_SHARE * point["sentences"]


def choice_record(points, grid_recipe):
    """The content of ``choice.json``: the chosen weight (``None``: every point collapsed),
    why, the recipe and every point."""
    chosen = choose(points)
    return {
        "layout": CHOICE_LAYOUT,
        "weight": chosen["weight"] if chosen else None,
        "criterion": "the best average dev BLEU among the points that did not collapse"
        " (fewer distinct translations than %d%% of the dev sentences)"
        % (100 * defects.COLLAPSE_SHARE),
        "recipe": grid_recipe,
        "points": [dict(p, collapsed=collapsed(p)) for p in points],
    }


def report_text(record):
    """``report.md`` of the grid: its points and the choice."""
    domains = list(record["points"][0]["bleu"]) if record["points"] else []
    rows = [
        ["%g" % p["weight"]]
        + ["%.1f" % p["bleu"][d] for d in domains]
        + ["%.1f" % p["average"], "%d / %d" % (p["distinct"], p["sentences"])]
        + ["collapsed" if p["collapsed"] else ""]
        for p in record["points"]
    ]
    chosen = record["weight"]
    lines = [
        "# AdvL's reversal weight on the dev sets",
        "",
        "Recipe: %s." % json.dumps(record["recipe"], sort_keys=True),
        "",
        markdown_table(
            ["lambda"] + domains + ["average", "distinct / sentences", ""],
            rows,
            "l" + "r" * (len(domains) + 2) + "l",
        ),
        "",
        (
            "Chosen: lambda = %g (%s)." % (chosen, record["criterion"])
            if chosen is not None
            else "No choice: every point collapsed; the tables keep the default."
        ),
    ]
    return "\n".join(lines) + "\n"


def _arguments(argv):
    parser = argparse.ArgumentParser(
        description="Choose AdvL's reversal weight on the dev sets (the tables' recipe)",
        add_help=False,
    )
    parser.add_argument("--weights", type=float, nargs="+", default=list(GRID))
    parser.add_argument("--out", help="results directory (default %s[-quick])" % default_out(0))
    parser.add_argument("-h", "--help", action="store_true")
    own, rest = parser.parse_known_args(argv)
    if own.help:
        parser.print_help()
        print("\nand the budget and corpus options of run/tables.sh:")
        tables._arguments(["--help"])
    if not own.weights or any(w < 0 for w in own.weights):
        raise errors.UserError("--weights: expected numbers >= 0, got %s" % own.weights)
    args, budget = tables._arguments(rest)
    args.out = own.out or default_out(args.quick)
    args.weights = sorted(set(own.weights))
    return args, budget


@engine.driver("advl-grid")
def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args, budget = _arguments(argv)
    start = engine.started()  # The command's start (the report's total time).
    steps = common.Steps(args.out, name="advl_grid", options=args.options)
    plan = demo.Plan(args, budget, steps, data_config=args.config)
    if args.data == "data/default":
        steps.run_stages([plan.corpus_stage()])
    info = corpus_lib.load_info(args.data)  # Fails in one line on a corpus not built.
    plan.write_data_config(info)
    grid_recipe = recipe(args, budget)
    runs = grid_runs(args.weights, budget)
    trainings, scorings, paths = [], [], []
    for index, run in enumerate(runs):
        config = point_config(run, budget, steps.runs_dir)
        config_paths = [plan.data_config, plan._config(config, run.directory)]
        trainings.append(
            steps.train_stage(
                "AdvL, lambda %g" % run.params[SCALE_PARAM],
                run.directory,
                run.model_def(args.scale),
                config_paths,
                config["model_dir"],
                budget["steps"],
                "1/3 (%d/%d)" % (index + 1, len(runs)),
                options=("--seed", str(run.seed)),
            )
        )
        path = os.path.join(steps.out, "dev", "%s.json" % run.directory)
        paths.append(path)
        scorings.append(_dev_stage(run, config, config_paths, path, plan, budget))
    common.log(
        "[advl_grid] %d weights: %s" % (len(runs), ", ".join("%g" % w for w in args.weights))
    )
    steps.run_stages(trainings, 2)
    steps.run_stages(scorings)
    steps.run_stages([_choice_stage(steps, paths, grid_recipe)])
    with open(os.path.join(steps.out, CHOICE_FILE), encoding="utf-8") as f:
        chosen = json.load(f)["weight"]
    common.log(
        "[advl_grid] lambda = %s: %s (%.1f min)"
        % (chosen, os.path.join(steps.out, CHOICE_FILE), (time.time() - start) / 60)
    )
    return 0


def _dev_stage(run, config, config_paths, path, plan, budget):
    """A grid point's dev translation and scores (``dev/<slug>.json``)."""
    sentences = budget["eval_sentences"]
    dev_files = [
        plan._corpus_file(name % (domain, side))
        for domain in plan.domains
        for name, side in (("dev.%s.%s", plan.source), ("raw/dev.%s.%s", plan.target))
    ]

    def stamp():
        return stamps.make_stamp(
            checkpoint=common.checkpoint_digest(config["model_dir"]),
            config=config_loader.load_run_config(config_paths),
            dev=stamps.files_digest(dev_files),
            sentences=sentences,
        )

    def run_stage(cores):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        scores = dev_scores(plan.data, config_paths, run.name, os.path.dirname(path), sentences)
        scores["weight"] = run.params[SCALE_PARAM]
        write_text_atomic(path, json.dumps(scores, indent=2) + "\n")

    return common.Stage(
        "dev_" + run.directory,
        "dev BLEU of %s" % run.name,
        "2/3",
        stamp,
        [path],
        run_stage,
        after=[run.directory],
    )


def _choice_stage(steps, paths, grid_recipe):
    """The choice (``choice.json``) and ``report.md``, from every point's dev scores."""
    choice_path = os.path.join(steps.out, CHOICE_FILE)
    report_path = os.path.join(steps.out, "report.md")

    def stamp():
        return stamps.make_stamp(
            layout=CHOICE_LAYOUT, points=stamps.files_digest(paths), recipe=grid_recipe
        )

    def run(cores):
        points = []
        for path in paths:
            with open(path, encoding="utf-8") as f:
                points.append(json.load(f))
        record = choice_record(points, grid_recipe)
        write_text_atomic(choice_path, json.dumps(record, indent=2) + "\n")
        write_text_atomic(report_path, report_text(record))

    return common.Stage(
        "choice", "the choice", "3/3", stamp, [choice_path, report_path], run, timed=False
    )


if __name__ == "__main__":
    sys.exit(errors.run_main("run/advl_grid.sh", main))
