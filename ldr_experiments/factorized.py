"""The Factorized Transformer's designs side by side (Deng et al., 2020, Table 2's shape).

    bash run/factorized.sh [--quick] [--designs pa sf df]
    ldr-experiments factorized --size paper \\
        --config data_configs/opus_en_fr.yml --data data/opus_en_fr --steps 200000 \\
        --stage2-steps 50000

Trains Mixed (the same Transformer, domain labels ignored) and every chosen design with
the paper's curriculum (section 3.1): stage 1 trains the shared parameters and the
general copies on all data as one domain, then every domain block is set from its
general copy and stage 2 trains the domain blocks alone, the rest frozen. Each
Factorized system is evaluated per domain with oracle, generic and wrong labels
(generic: the general copies, i.e. the stage-1 model), Mixed without labels;
``report.md`` has the BLEU table, each system's parameter count against the vanilla
Transformer, and ``bleu.png``.

``--size small`` (default) uses ``model_defs/small/factorized_*.py`` (2 layers, 64
units, CPU); ``--size paper`` uses ``model_defs/factorized_*.py`` (6+6 layers, 512
units, 8 heads, FFN 2048, DF's d_inner 280), for a machine with a GPU
(``--onmt-options=--mixed_precision,--jit_compile`` passes these ``onmt-main`` options
to every training).
Every step resumes like the demo's: a finished stage is skipped, an interrupted one
continues from its last checkpoint.
"""

import argparse
import os
import sys
import time

from ldr_experiments import engine
from ldr_opennmt import errors, family_table, registry
from ldr_opennmt.evaluation import evaluate
from ldr_opennmt.layers import factorized as factorized_layers
from ldr_opennmt.reports import markdown_table
from ldr_opennmt.training import corpora as corpora_lib

from . import common

DESIGNS = ("pa", "sf", "df")
MODEL_DIRS = {"small": "model_defs/small", "paper": "model_defs"}
MODES = ("oracle", "generic", "wrong")

BUDGETS = {
    # How long "full" takes: BENCHMARKS.md, "Measurements behind the budgets".
    "full": {
        "steps": 1000,
        "stage2_steps": 300,
        "warmup": 400,
        "eval_sentences": 200,
        "log_steps": 100,
        "max_decoding_length": 100,
    },
    "quick": {
        "steps": 30,
        "stage2_steps": 10,
        "warmup": 15,
        "eval_sentences": 10,
        "log_steps": 10,
        "max_decoding_length": 20,
    },
}


def model_def(size, design):
    """The model definition file of one design at one size."""
    if design == "mixed":
        return os.path.join(MODEL_DIRS[size], "mixed_transformer.py")
    return os.path.join(MODEL_DIRS[size], "factorized_%s.py" % design)


def model_width(size):
    """The model width of a named size (``small``, ``paper``: the registry's size table)."""
    return family_table.size_arguments("transformer", size)["num_units"]


def parameter_sizes(size):
    """The sizes of the parameter tables at a named size, in the Factorized paper's names
    (``layers.factorized.PAPER_SIZES``'s keys): Factorized DF's preset of that size (its
    ``d_inner``, the model's width at the small size), so the tables count the models the
    definitions build. The paper's size is the paper's own (its table's 50,000 words)."""
    if size == family_table.PAPER:
        return {}
    arguments = registry.get("factorized_df").preset_arguments(size)
    return dict(
        encoder_layers=arguments["num_layers"],
        decoder_layers=arguments["num_layers"],
        d_model=arguments["num_units"],
        ffn_dim=arguments["ffn_inner_dim"],
        num_heads=arguments["num_heads"],
        d_inner=arguments["d_inner"],
    )


def row_name(design):
    """The table row of a design."""
    return "Factorized %s" % design.upper()


def parameter_lines(designs, num_domains, size):
    """The designs' parameter counts against the vanilla Transformer (the paper's #P),
    at the size of the run, with the paper's 50,000-word vocabulary."""
    sizes = dict(factorized_layers.PAPER_SIZES, num_domains=num_domains)
    sizes.update(parameter_sizes(size))
    rows = [
        [row_name(design), "%.2fx" % factorized_layers.parameter_ratio(design, **sizes)]
        for design in designs
    ]
    return markdown_table(["system", "parameters × vanilla"], rows).splitlines()


@engine.driver("factorized")
def main(argv=None):
    parser = argparse.ArgumentParser(description="Train and compare the Factorized designs.")
    parser.add_argument("--designs", nargs="+", choices=DESIGNS, default=list(DESIGNS))
    common.add_experiment_arguments(parser, "factorized", MODEL_DIRS)
    parser.add_argument("--steps", type=int, help="stage-1 (and Mixed) training steps")
    parser.add_argument("--stage2-steps", type=int, help="stage-2 training steps")
    args = parser.parse_args(argv)
    mode, budget = common.experiment_budget(
        args, BUDGETS, steps=args.steps, stage2_steps=args.stage2_steps
    )
    designs = [d for d in DESIGNS if d in args.designs]
    out, options = common.experiment_output(args, "factorized")
    num_domains = len(corpora_lib.domain_names(common.load_yaml(args.config)["data"]))
    steps = common.Steps(out, name="factorized", options=options)
    out = steps.out  # A link given as --out is resolved once.
    start = engine.started()  # The command's start (the report's total time).
    common.prepare_corpus(args.data, args.cache)
    units = model_width(args.size)

    config = common.train_config("mixed", {}, {}, budget, steps.runs_dir, data=common.MIXED_BATCHES)
    config["params"]["decay_params"]["model_dim"] = units
    path = common.write_config(config, os.path.join(steps.configs_dir, "mixed.yml"))
    steps.train(
        "Mixed",
        "mixed",
        model_def(args.size, "mixed"),
        [args.config, path],
        config["model_dir"],
        budget["steps"],
        "train (1/%d)" % (len(designs) + 1),
    )
    systems = [evaluate.System("Mixed", [args.config, path], None)]
    for index, design in enumerate(designs):
        paths = common.train_curriculum(
            steps,
            row_name(design),
            "factorized_%s" % design,
            model_def(args.size, design),
            args.config,
            budget,
            "train (%d/%d)" % (index + 2, len(designs) + 1),
            model_dim=units,
        )
        systems.append(evaluate.System(row_name(design), paths, MODES))

    common.log("[factorized] evaluate (%d test sentences per domain)" % budget["eval_sentences"])
    t0 = time.time()
    eval_dir = os.path.join(out, "eval")
    results = evaluate.evaluate(
        args.data, systems, eval_dir, baseline="Mixed", max_sentences=budget["eval_sentences"]
    )
    steps.timings.append(("evaluate", time.time() - t0))
    total = time.time() - start
    tables = evaluate.format_tables(results)
    lines = [
        "# Factorized Transformer designs (%s, %s size)" % (mode, args.size),
        "",
        "Mixed and the Factorized designs %s (%s), trained on %s: Mixed %d steps; each"
        " design %d steps of stage 1 (domain-agnostic: shared parameters and general"
        " copies), then unfolded and %d steps of stage 2 (domain blocks alone, the rest"
        " frozen). Labels: oracle, generic (the general copies), wrong (the next domain in"
        " the list); first %d test sentences per domain, beam 4."
        % (
            ", ".join(d.upper() for d in designs),
            MODEL_DIRS[args.size],
            args.config,
            budget["steps"],
            budget["steps"],
            budget["stage2_steps"],
            budget["eval_sentences"],
        ),
        "",
        tables,
        "",
        "![BLEU per domain](eval/bleu.png)",
        "",
        "Parameters against the vanilla Transformer of the same size (%d domains, a"
        " 50,000-word vocabulary, one tied target embedding, kernels and embeddings):"
        % num_domains,
        "",
    ] + parameter_lines(designs, num_domains, args.size)
    steps.write_report(lines, tables, total)
    return 0


if __name__ == "__main__":
    # A user error (a results directory that is not the drivers', a corpus not built)
    # is one line and exit status 2, as in the package's commands.
    sys.exit(errors.run_main("run/factorized.sh", main))
