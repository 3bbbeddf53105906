"""Adding a domain to a trained model (the LDR paper's Table 6, section 4.1).

    bash run/new_domain.sh [--quick] [--new-domain software]
    ldr-experiments new-domain [--quick]    # results under the working directory

1. trains LDR (with reserved regions, ``model_defs/small/ldr_transformer_reserved.py``)
   and Mixed on every domain of the data configuration except the new one;
2. evaluates both on all domains' test sets: the new domain's label selects a
   reserved region, which equals the generic representation (LDR falls back to
   generic, as the paper's LDR row on IT);
3. continues both from their checkpoints with the new domain declared and its
   corpus added, for the same number of steps on the same data (LDR*, Mixed*);
4. evaluates again and writes ``report.md`` (BLEU before/after per domain, chart).

Every step resumes like the demo: trained models and finished translations are reused.
"""

import argparse
import copy
import os
import sys
import time

from ldr_experiments import engine
from ldr_opennmt import errors
from ldr_opennmt.evaluation import evaluate
from ldr_opennmt.training import corpora as corpora_lib
from ldr_opennmt.utils import DEFAULT_CACHE

from . import common

LDR_DEF = "model_defs/small/ldr_transformer_reserved.py"
MIXED_DEF = "model_defs/small/mixed_transformer.py"

BUDGETS = {
    # How long "full" takes: BENCHMARKS.md, "Measurements behind the budgets".
    "full": {
        "steps": 800,
        "more_steps": 400,
        "warmup": 400,
        "eval_sentences": 200,
        "log_steps": 100,
        "max_decoding_length": 100,
    },
    "quick": {
        "steps": 40,
        "more_steps": 20,
        "warmup": 20,
        "eval_sentences": 10,
        "log_steps": 20,
        "max_decoding_length": 20,
    },
}


def split_data_config(data, new_domain):
    """The data configurations before and after adding :obj:`new_domain`.

    Returns:
      (base, extended): ``base`` without the new domain's corpora, ``extended``
      with the base domains in the same order and the new one appended (the
      order that keeps the trained ids).
    """
    domains = corpora_lib.domain_names(data)
    if new_domain not in domains:
        raise errors.UserError(
            "new domain %r is not one of the configured domains (%s)"
            % (new_domain, ", ".join(domains))
        )
    if len(domains) < 2:
        raise errors.UserError("adding a domain needs at least one other domain to start from")
    old = [d for d in domains if d != new_domain]
    base, extended = copy.deepcopy(data), copy.deepcopy(data)
    base["domains"] = old
    extended["domains"] = old + [new_domain]
    for key in ("train_corpora", "eval_corpora"):
        if data.get(key):
            base[key] = {d: data[key][d] for d in old if d in data[key]}
            extended[key] = {d: data[key][d] for d in old + [new_domain] if d in data[key]}
    return base, extended


@engine.driver("new-domain")
def main(argv=None):
    parser = argparse.ArgumentParser(description="Train on some domains, then add one more.")
    parser.add_argument("--quick", action="store_true", help="tiny budgets (a smoke run)")
    parser.add_argument(
        "--config", default="data_configs/default_corpora.yml", type=common.resource
    )
    parser.add_argument("--data", default="data/default", help="corpus directory (ldr-data)")
    parser.add_argument("--new-domain", help="the domain added later (default: the last one)")
    parser.add_argument("--out", help="results directory (default results/new_domain[-quick])")
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    budget = BUDGETS[mode]
    out = args.out or ("results/new_domain-quick" if args.quick else "results/new_domain")
    steps = common.Steps(out, name="new-domain")
    out = steps.out  # A link given as --out is resolved once.
    runs_dir, configs_dir = steps.runs_dir, steps.configs_dir
    start = engine.started()  # The command's start (the report's total time).
    common.prepare_corpus(args.data, args.cache)
    data_config = common.load_yaml(args.config)
    new_domain = args.new_domain or corpora_lib.domain_names(data_config["data"])[-1]
    base_data, extended_data = split_data_config(data_config["data"], new_domain)
    old = base_data["domains"]
    base_path = common.write_config(
        dict(data_config, data=base_data), os.path.join(configs_dir, "data_base.yml")
    )
    ext_path = common.write_config(
        dict(data_config, data=extended_data), os.path.join(configs_dir, "data_extended.yml")
    )
    common.log("[new-domain] base domains: %s; added later: %s" % (", ".join(old), new_domain))

    params = {"domain_training": "procedure1"}
    systems = []
    for name, slug, model_def, system_params in (
        ("LDR", "ldr", LDR_DEF, params),
        ("Mixed", "mixed", MIXED_DEF, {}),
    ):
        config = common.train_config(
            slug, system_params, {}, budget, runs_dir, data=common.MIXED_BATCHES
        )
        path = common.write_config(config, os.path.join(configs_dir, "%s.yml" % slug))
        steps.train(
            "%s on %s" % (name, ", ".join(old)),
            slug,
            model_def,
            [base_path, path],
            config["model_dir"],
            budget["steps"],
            "1/3 train",
        )
        # Evaluated with the new domain declared: its label selects a reserved region.
        systems.append(evaluate.System(name, [ext_path, path], ("oracle",)))
        more = {
            "model_dir": os.path.join(runs_dir, slug + "_added"),
            "finetune": {"base": config["model_dir"], "steps": budget["more_steps"]},
            "data": dict(common.MIXED_BATCHES),
            "params": config["params"],
            "train": {
                "save_summary_steps": budget["log_steps"],
                "save_checkpoints_steps": budget["more_steps"],
            },
        }
        more_path = common.write_config(more, os.path.join(configs_dir, "%s_added.yml" % slug))
        steps.train(
            "%s* (+%s, %d more steps)" % (name, new_domain, budget["more_steps"]),
            slug + "_added",
            model_def,
            [ext_path, more_path],
            more["model_dir"],
            budget["steps"] + budget["more_steps"],
            "2/3 continue",
        )
        systems.append(evaluate.System(name + "*", [ext_path, more_path], ("oracle",)))

    common.log(
        "[new-domain] 3/3 evaluate (%d test sentences per domain)" % budget["eval_sentences"]
    )
    t0 = time.time()
    eval_dir = os.path.join(out, "eval")
    results = evaluate.evaluate(
        args.data,
        systems,
        eval_dir,
        baseline="Mixed*",
        max_sentences=budget["eval_sentences"],
    )
    steps.timings.append(("evaluate", time.time() - t0))
    total = time.time() - start
    tables = evaluate.format_tables(results)
    lines = [
        "# Adding a domain to a trained model (%s)" % mode,
        "",
        "LDR (small Transformer, 4-cell regions, 2 reserved) and Mixed trained %d steps on %s;"
        " then continued %d steps from their checkpoints with %s declared and its corpus added"
        " (LDR*, Mixed*; same data, same steps). Before continuing, the %s label selects an"
        " untrained reserved region, which equals the generic representation. Corpus: %s,"
        " first %d test sentences per domain, beam 4."
        % (
            budget["steps"],
            ", ".join(old),
            budget["more_steps"],
            new_domain,
            new_domain,
            args.data,
            budget["eval_sentences"],
        ),
        "",
        tables,
        "",
        "![BLEU per domain](eval/bleu.png)",
    ]
    steps.write_report(lines, tables, total)
    return 0


if __name__ == "__main__":
    # A user error (a results directory that is not the drivers', a corpus not built)
    # is one line and exit status 2, as in the package's commands.
    sys.exit(errors.run_main("run/new_domain.sh", main))
