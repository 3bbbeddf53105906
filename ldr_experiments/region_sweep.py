"""LDR with domain regions of several sizes on the same data and budget (the LDR
paper's Table 5, section 4.2).

    bash run/region_sweep.sh [--cells 4 8 16] [--quick]
    bash run/region_sweep.sh --budget table --domain_training joint    # issue 42, item 6
    ldr-experiments region-sweep --size paper --cells 4 8 16 32 64 \\
        --config data_configs/opus_en_fr.yml --data data/opus_en_fr --steps 200000

Each size is an LDR Transformer whose domain regions have that many cells; the
generic region takes the rest of the embedding. ``--size small`` is the CPU model
of ``model_defs/small/`` (64 units: with three domains, regions up to 16 cells
fit); ``--size paper`` is the paper's 512-unit model (up to 64 cells for six
domains). Every system is trained by ``ldr-main`` (seed 1) with Procedure 1, or the
``--domain_training`` given (``joint``, ``summed``: the modes whose shared network reads the
regions), and evaluated per domain with oracle, generic and wrong labels (``--modes``): the
gap between the true label and the generic one says, per size, whether the model reads its
label. ``--budget full`` (1000 steps, the LDR paper's sweep at this size) is the default;
``--budget table`` is the papers' table's recipe (``bash run/tables.sh``: 4500 steps of 1024
tokens, domains sampled with alpha 0.5, pairs capped at 80 tokens), whose LDR rows a point
of the same size and mode repeats. ``report.md`` has the BLEU table (one row per size and
mode) and ``bleu_by_cells.png``.

``run/region_sweep.sh`` runs this module from the repository root with ``run/`` on
``sys.path``, as the second command does.
"""

import argparse
import os
import sys
import time

from ldr_experiments import engine
from ldr_opennmt import errors, family_table
from ldr_opennmt.evaluation import evaluate
from ldr_opennmt.reports import pyplot
from ldr_opennmt.training import corpora as corpora_lib
from ldr_opennmt.utils import DEFAULT_CACHE, make_directories, save_figure, write_text_atomic

from . import common, demo

#: The training modes of the sweep (``params: domain_training``).
DOMAIN_TRAINING = ("procedure1", "joint", "summed")

#: The model sizes of the sweep: the registry's size table (its LDR presets' domain regions
#: are what the sweep varies).
SIZES = family_table.SIZES["transformer"]
BUDGETS = {
    # Why 1000 steps, and how long: BENCHMARKS.md, "Measurements behind the budgets".
    "full": {
        "steps": 1000,
        "warmup": 300,
        "eval_sentences": 200,
        "log_steps": 100,
        "max_decoding_length": 100,
    },
    # The papers' table's recipe and budget (ldr_experiments.tables, BUDGETS["default"]).
    "table": {
        key: demo.BUDGETS["default"][key]
        for key in (
            "steps",
            "warmup",
            "batch_size",
            "alpha",
            "max_length",
            "eval_sentences",
            "log_steps",
            "max_decoding_length",
        )
    },
    "quick": {
        "steps": 30,
        "warmup": 15,
        "eval_sentences": 10,
        "log_steps": 10,
        "max_decoding_length": 20,
    },
}


def check_sizes(cells, num_units, num_domains):
    """Raises SystemExit unless every region size leaves a generic region."""
    too_big = [c for c in cells if c <= 0 or num_units - num_domains * c <= 0]
    if too_big:
        raise SystemExit(
            "regions of %s cells do not fit: %d domains x cells must stay below the embedding "
            "size %d (use --size paper for larger regions)"
            % (", ".join(map(str, too_big)), num_domains, num_units)
        )


def model_definition(size, cells):
    """The text of a model definition file for one sweep point."""
    return (
        '"""LDR Transformer (%s size) with %d-cell domain regions (region-size sweep)."""\n\n'
        "from ldr_opennmt import registry, upstream\n\n"
        "upstream.install()\n"
        'model = registry.preset("ldr_transformer", "%s", domain_region_size=%d)\n'
        % (size, cells, size, cells)
    )


def line_chart(results, cells, path):
    """BLEU per domain with the true label (and its average, and the average with the generic
    label where it was evaluated) against the region size: a line each on a log-2 axis
    (:func:`ldr_opennmt.reports.bar_chart` draws bars), with the package's matplotlib
    (:func:`ldr_opennmt.reports.pyplot`)."""
    plt = pyplot()
    domains = results["domains"]
    rows = dict(results["rows"])

    def scores(c, mode="oracle"):
        return rows.get("%s (%s)" % (_row(c), mode)) or (
            rows.get(_row(c)) if mode == "oracle" else None
        )

    fig, ax = plt.subplots(figsize=(6, 4))
    try:
        for domain in domains + ["average"]:
            if domain == "average":
                ys = [sum(scores(c)[d]["bleu"] for d in domains) / len(domains) for c in cells]
            else:
                ys = [scores(c)[domain]["bleu"] for c in cells]
            style = "--" if domain == "average" else "-"
            ax.plot(cells, ys, marker="o", label=domain, linestyle=style)
        if all(scores(c, "generic") for c in cells):
            ys = [
                sum(scores(c, "generic")[d]["bleu"] for d in domains) / len(domains) for c in cells
            ]
            ax.plot(cells, ys, marker="x", label="average, generic label", linestyle=":")
        ax.set_xscale("log", base=2)
        ax.set_xticks(cells)
        ax.set_xticklabels([str(c) for c in cells])
        ax.set_xlabel("cells per domain region")
        ax.set_ylabel("BLEU")
        ax.set_title("LDR: BLEU by region size")
        ax.legend(fontsize=8)
        fig.tight_layout()
        save_figure(fig, path, dpi=120)
    finally:
        plt.close(fig)


def _row(cells):
    return "LDR %d cells" % cells


def _arguments(argv):
    parser = argparse.ArgumentParser(description="Train LDR with several region sizes.")
    parser.add_argument("--cells", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--quick", action="store_true", help="tiny budgets (a smoke run)")
    parser.add_argument(
        "--budget",
        choices=("full", "table"),
        default="full",
        help="full: 1000 steps; table: the papers' table's recipe (4500 steps of 1024 tokens)",
    )
    parser.add_argument(
        "--domain_training",
        choices=DOMAIN_TRAINING,
        default="procedure1",
        help="LDR's training mode (params: domain_training)",
    )
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=("oracle", "generic", "wrong"),
        default=["oracle", "generic", "wrong"],
        help="label modes of the evaluation",
    )
    parser.add_argument("--steps", type=int, help="training steps (overrides the budget)")
    parser.add_argument(
        "--config", default="data_configs/default_corpora.yml", type=common.resource
    )
    parser.add_argument("--data", default="data/default", help="corpus directory (ldr-data)")
    parser.add_argument("--out", help="results directory (default results/region_sweep[-quick])")
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    args = parser.parse_args(argv)
    args.mode = "quick" if args.quick else args.budget
    budget = dict(BUDGETS[args.mode])
    if args.steps:
        budget["steps"] = args.steps
    if not args.out:
        # Each recipe and mode in a directory of its own: a sweep never replaces another's.
        suffix = "" if args.mode == "full" else "-" + args.mode
        if args.domain_training != "procedure1":
            suffix += "-" + args.domain_training
        args.out = "results/region_sweep" + suffix
    return args, budget


def point_config(args, budget, cells, runs_dir):
    """The run configuration of the sweep's point of :obj:`cells` cells (its slug is
    ``ldr_cells<cells>``)."""
    config = common.train_config(
        "ldr_cells%d" % cells,
        {"domain_training": args.domain_training},
        {},
        budget,
        runs_dir,
        data=common.MIXED_BATCHES,
    )
    config["params"]["decay_params"]["model_dim"] = SIZES[args.size]["num_units"]
    return config


@engine.driver("region-sweep")
def main(argv=None):
    args, budget = _arguments(argv)
    mode = args.mode
    cells = sorted(set(args.cells))
    out = args.out
    data = common.load_yaml(args.config)["data"]
    check_sizes(cells, SIZES[args.size]["num_units"], len(corpora_lib.domain_names(data)))
    steps = common.Steps(out, name="region-sweep")
    out = steps.out  # A link given as --out is resolved once.
    runs_dir, configs_dir = steps.runs_dir, steps.configs_dir
    defs_dir = make_directories(os.path.join(out, "model_defs"), os.path.abspath(out))
    start = engine.started()  # The command's start (the report's total time).
    common.prepare_corpus(args.data, args.cache)

    systems = []
    for index, size in enumerate(cells):
        slug = "ldr_cells%d" % size
        model_def = os.path.join(defs_dir, slug + ".py")
        write_text_atomic(model_def, model_definition(args.size, size))
        config = point_config(args, budget, size, runs_dir)
        path = common.write_config(config, os.path.join(configs_dir, slug + ".yml"))
        steps.train(
            "LDR with %d-cell regions" % size,
            slug,
            model_def,
            [args.config, path],
            config["model_dir"],
            budget["steps"],
            "train (%d/%d)" % (index + 1, len(cells)),
            options=("--seed", "1"),
        )
        systems.append(evaluate.System(_row(size), [args.config, path], tuple(args.modes)))

    common.log("[region-sweep] evaluate (%d test sentences per domain)" % budget["eval_sentences"])
    t0 = time.time()
    results = evaluate.evaluate(
        args.data, systems, os.path.join(out, "eval"), max_sentences=budget["eval_sentences"]
    )
    steps.timings.append(("evaluate", time.time() - t0))
    line_chart(results, cells, os.path.join(out, "bleu_by_cells.png"))
    total = time.time() - start
    tables = evaluate.format_tables(results)
    lines = [
        "# LDR region-size sweep (%s, %s size)" % (mode, args.size),
        "",
        "LDR Transformers (%s) trained with `domain_training: %s` for %d steps each on %s,"
        " regions of %s cells per domain (the generic region takes the rest); labels %s, first"
        " %d test sentences per domain, beam 4."
        % (
            ", ".join("%s=%d" % item for item in sorted(SIZES[args.size].items())),
            args.domain_training,
            budget["steps"],
            args.config,
            ", ".join(map(str, cells)),
            ", ".join(args.modes),
            budget["eval_sentences"],
        ),
        "",
        tables,
        "",
        "![BLEU by region size](bleu_by_cells.png)",
    ]
    steps.write_report(lines, tables, total)
    return 0


if __name__ == "__main__":
    # A user error (a results directory that is not the drivers', a corpus not built)
    # is one line and exit status 2, as in the package's commands.
    sys.exit(errors.run_main("run/region_sweep.sh", main))
