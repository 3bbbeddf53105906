"""The baselines of the papers' tables side by side: Mixed, residual adapters, TTM, ML, AdvL.

    bash run/baselines.sh [--quick] [--systems adapters ttm ml advl]
    ldr-experiments baselines --size paper \\
        --config data_configs/opus_en_fr.yml --data data/opus_en_fr --steps 200000 \\
        --adapter-steps 20000 --onmt-options=--mixed_precision,--jit_compile

Trains, on the same corpus and with the same recipe (Noam schedule, batches mixing the
domains):

* Mixed: a plain Transformer, the domain labels ignored;
* Residual adapters (Bapna and Firat, 2019): on top of that Mixed model, frozen, each
  domain's adapters on that domain's batches (``finetune: base``);
* TTM (target token mixing, Britz et al., 2017): a Transformer whose targets start with
  a domain token (a copy of the target vocabulary with the tokens appended is written
  under ``configs/``);
* ML and AdvL (Britz et al., 2017): a Transformer with a domain classifier on its
  mean-pooled encoder output, trained jointly (ML) or behind a gradient reversal (AdvL).

Each is evaluated per domain (``ldr-eval``'s tables, BLEU/chrF, significance against
Mixed): residual adapters with oracle, generic (no adapter: the Mixed model) and wrong
labels; TTM with oracle (the true token forced first), generic (the model predicts its
token) and wrong (another domain's token forced); Mixed, ML and AdvL need no label.
``report.md`` has the tables, the parameter counts against vanilla and ``bleu.png``.

``--size small`` (default): ``model_defs/small/`` (2 layers, 64 units, CPU); ``--size
paper``: ``model_defs/`` (6+6 layers, 512 units), for a machine with a GPU. Every step
resumes like the demo's: a finished training is skipped, an interrupted one continues
from its last checkpoint.
"""

import argparse
import os
import sys
import time

from ldr_experiments import engine
from ldr_opennmt import errors, probe, registry
from ldr_opennmt.analysis import parameters
from ldr_opennmt.evaluation import evaluate
from ldr_opennmt.models import ttm
from ldr_opennmt.training import corpora as corpora_lib
from ldr_opennmt.utils import read_lines, write_lines_atomic

from . import common, factorized, systems

#: The systems this experiment compares, by the registry's short names of their families
#: (:attr:`ldr_opennmt.registry.Family.short_name`; :func:`family` resolves them), which are
#: also the directories they train in. Mixed, the baseline, is trained in any case.
BASELINE = "mixed"
SYSTEMS = ("adapters", "ttm", "ml", "advl")
MODEL_DIRS = {"small": "model_defs/small", "paper": "model_defs"}
#: The label modes of a family whose translation reads the label (the others take none).
LABEL_MODES = ("oracle", "generic", "wrong")


def family(system):
    """The registered family of a system (its short name)."""
    return registry.find(system)


def title(system):
    """The table row of a system: its family's title."""
    return family(system).title


def label_modes(system):
    """The label modes a system is evaluated with (``None``: it reads no label)."""
    needed = probe.capabilities(family(system).name).labels == probe.LABEL_NEEDED
    return LABEL_MODES if needed else None


def adapter_dim(size):
    """The residual adapters' inner size at a named size: the family's preset."""
    return registry.get("residual_adapters").preset_arguments(size)["adapter_dim"]


BUDGETS = {
    # What these budgets cost on a host: the report's time table (each stage timed where it
    # ran), beside the host's speed.
    "full": {
        "steps": 1000,
        "adapter_steps": 300,
        "warmup": 400,
        "eval_sentences": 200,
        "log_steps": 100,
        "max_decoding_length": 100,
    },
    "quick": {
        "steps": 30,
        "adapter_steps": 10,
        "warmup": 15,
        "eval_sentences": 10,
        "log_steps": 10,
        "max_decoding_length": 20,
    },
}


def model_def(size, system):
    """The model definition file of one system at one size (the registry's; Mixed untied,
    as the residual adapters' base: the registry's small Mixed ties its target embeddings,
    being Factorized PA's stage 1)."""
    if system == BASELINE:
        return os.path.join(MODEL_DIRS[size], "mixed_transformer.py")
    return systems.model_def(family(system).name, "small" if size == "small" else "paper")


def domain_token_vocabulary(data_config, path):
    """Writes the data configuration's target vocabulary with the domain tokens appended
    (those it lacks), for a family whose targets start with one (its capabilities'
    ``domain_tokens``: TTM); returns :obj:`path`."""
    data = common.load_yaml(data_config)["data"]
    source = data["target_vocabulary"]
    if engine.planning_ahead() and not os.path.exists(source):
        return path  # A dry run before the corpus is built: written when the plan runs.
    lines = read_lines(source)
    missing = [t for t in ttm.domain_tokens(corpora_lib.domain_names(data)) if t not in lines]
    write_lines_atomic(path, lines + missing)
    return path


def system_configs(systems, budget, runs_dir, configs_dir, data_config, model_dim):
    """The run configuration of Mixed and of each chosen system: ``{system: config}``."""
    configs = {}

    def _from_scratch(system, data=None):
        config = common.train_config(
            system, {}, {}, budget, runs_dir, data=dict(common.MIXED_BATCHES, **(data or {}))
        )
        config["params"]["decay_params"]["model_dim"] = model_dim
        return config

    configs[BASELINE] = _from_scratch(BASELINE)
    for system in systems:
        declared = family(system)
        if declared.finetune == "base":  # On the frozen Mixed model (residual adapters).
            steps = budget["adapter_steps"]
            mixed = configs[BASELINE]
            # Per-domain batches (the data configuration's): each domain's adapters on
            # that domain's sentences. Mixed's schedule continues.
            configs[system] = {
                "model_dir": os.path.join(runs_dir, system),
                "finetune": {"base": mixed["model_dir"], "steps": steps},
                "params": dict(mixed["params"]),
                "train": {
                    "save_summary_steps": max(steps // 4, 1),
                    "save_checkpoints_steps": steps,
                },
            }
        elif probe.capabilities(declared.name).domain_tokens:  # TTM's targets.
            vocabulary = domain_token_vocabulary(
                data_config, os.path.join(configs_dir, "%s_target_vocabulary.txt" % system)
            )
            configs[system] = _from_scratch(system, {"target_vocabulary": vocabulary})
        else:
            configs[system] = _from_scratch(system)
    return configs


@engine.driver("baselines")
def main(argv=None):
    parser = argparse.ArgumentParser(description="Train and compare the papers' baselines.")
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    common.add_experiment_arguments(parser, "baselines", MODEL_DIRS)
    parser.add_argument("--steps", type=int, help="training steps of the systems from scratch")
    parser.add_argument("--adapter-steps", type=int, help="adapter training steps")
    args = parser.parse_args(argv)
    mode, budget = common.experiment_budget(
        args, BUDGETS, steps=args.steps, adapter_steps=args.adapter_steps
    )
    systems = [s for s in SYSTEMS if s in args.systems]
    out, options = common.experiment_output(args, "baselines")
    num_domains = len(corpora_lib.domain_names(common.load_yaml(args.config)["data"]))
    steps = common.Steps(out, name="baselines", options=options)
    out = steps.out  # A link given as --out is resolved once.
    start = engine.started()  # The command's start (the report's total time).
    common.prepare_corpus(args.data, args.cache)
    configs = system_configs(
        systems,
        budget,
        steps.runs_dir,
        steps.configs_dir,
        args.config,
        factorized.model_width(args.size),
    )
    evaluated = []
    order = [BASELINE] + systems
    for index, system in enumerate(order):
        config = configs[system]
        path = common.write_config(config, os.path.join(steps.configs_dir, "%s.yml" % system))
        based = family(system).finetune == "base"
        final = budget["steps"] + (budget["adapter_steps"] if based else 0)
        steps.train(
            title(system),
            system,
            model_def(args.size, system),
            [args.config, path],
            config["model_dir"],
            final,
            "train (%d/%d)" % (index + 1, len(order)),
        )
        evaluated.append(evaluate.System(title(system), [args.config, path], label_modes(system)))

    common.log("[baselines] evaluate (%d test sentences per domain)" % budget["eval_sentences"])
    t0 = time.time()
    results = evaluate.evaluate(
        args.data,
        evaluated,
        os.path.join(out, "eval"),
        baseline=title(BASELINE),
        max_sentences=budget["eval_sentences"],
    )
    steps.timings.append(("evaluate", time.time() - t0))
    tables = evaluate.format_tables(results)
    sizes = dict(factorized.parameter_sizes(args.size), num_domains=num_domains)
    lines = [
        "# The papers' baselines (%s, %s size)" % (mode, args.size),
        "",
        "Trained on %s (%s): Mixed, TTM, ML and AdvL %d steps each from scratch (batches mixing"
        " the domains); residual adapters %d steps on top of the Mixed model, frozen (each"
        " batch from one domain). Labels: residual adapters oracle, generic (no adapter: the"
        " Mixed model), wrong (the next domain in the list); TTM oracle (the true domain token"
        " forced first), generic (the model predicts its token), wrong (another domain's token"
        " forced); Mixed, ML and AdvL translate without labels. First %d test sentences per"
        " domain, beam 4."
        % (
            args.config,
            MODEL_DIRS[args.size],
            budget["steps"],
            budget["adapter_steps"],
            budget["eval_sentences"],
        ),
        "",
        tables,
        "",
        "![BLEU per domain](eval/bleu.png)",
        "",
        "Parameters against the vanilla Transformer of the same size (%d domains, a"
        " 50,000-word vocabulary, one tied target embedding, kernels and embeddings;"
        " residual adapters of inner size %d):" % (num_domains, adapter_dim(args.size)),
        "",
    ]
    lines += parameters.parameter_table(adapter_dim=adapter_dim(args.size), **sizes)
    steps.write_report(lines, tables, time.time() - start)
    return 0


if __name__ == "__main__":
    # A user error (a results directory that is not the drivers', a corpus not built)
    # is one line and exit status 2, as in the package's commands.
    sys.exit(errors.run_main("run/baselines.sh", main))
