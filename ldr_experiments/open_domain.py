"""Open-domain translation with ensembles of domain views (Deng et al., 2020, Table 4's shape).

    bash run/open_domain.sh [--quick] [--unseen software] [--design pa]
    ldr-experiments open-domain --size paper \\
        --config data_configs/opus_en_fr.yml --data data/opus_en_fr --steps 200000 \\
        --stage2-steps 50000 --unseen it

Every domain but one (``--unseen``, default the last of the configuration) is known:
a Transformer (Mixed, labels ignored) and a Factorized design (PA by default, trained
with its curriculum) learn from the known domains only, and so does the domain
classifier. Then every domain's test set, the unseen one included, is translated by
the Transformer and by the Factorized model with ``generic`` labels, with ``oracle``
labels (the known domains; the unseen one has none: ``generic``), and with the three
ensembles of its views (:mod:`ldr_opennmt.ensembles`): ``ens-uniform``, ``ens-soft`` (the
classifier's posterior over the known domains) and ``ens-learned`` (weights fitted on
balanced dev data of the known domains, ``ldr-eval fit-ensemble``). ``report.md`` has the
BLEU and chrF tables (significance against the Transformer), the learned weights and
``bleu.png``. Every step resumes like the demo's.
"""

import argparse
import json
import os
import sys
import time

from ldr_experiments import engine
from ldr_opennmt import ensembles, errors
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.evaluation import evaluate, open_domain
from ldr_opennmt.training import corpora as corpora_lib
from ldr_opennmt.utils import write_text_atomic

from . import common, demo, factorized

MODES = ("generic", "oracle", "ens-uniform", "ens-soft", "ens-learned")
BUDGETS = {
    # Why 2500 + 500 steps, and how long: BENCHMARKS.md, "Measurements behind the budgets".
    "full": dict(
        factorized.BUDGETS["full"],
        steps=2500,
        stage2_steps=500,
        warmup=800,
        classifier_steps=400,
        fit_sentences=200,
    ),
    "quick": dict(factorized.BUDGETS["quick"], classifier_steps=30, fit_sentences=10),
}


def known_data_config(config_path, unseen, out_path):
    """Writes the data configuration without :obj:`unseen` (training, dev and domain list).

    Args:
      config_path: A data configuration with ``train_corpora`` (and ``eval_corpora``).
      unseen: The domain to hold out.
      out_path: Where to write the reduced configuration.

    Returns:
      ``(out_path, the known domains)``.

    Raises:
      ValueError: if :obj:`unseen` is not a training domain of the configuration, or is
        the only one.
    """
    config = common.load_yaml(config_path)
    data = config["data"]
    domains = corpora_lib.domain_names(data)
    if unseen not in domains or len(domains) < 2:
        raise ValueError(
            "--unseen must be one of the training domains %s (and not the only one), got %r"
            % (domains, unseen)
        )
    for key in ("train_corpora", "eval_corpora"):
        if isinstance(data.get(key), dict):
            data[key] = {name: files for name, files in data[key].items() if name != unseen}
    if data.get("domains"):
        data["domains"] = [name for name in data["domains"] if name != unseen]
    common.write_config(config, out_path)
    return out_path, [name for name in domains if name != unseen]


@engine.driver("open-domain")
def main(argv=None):
    parser = argparse.ArgumentParser(description="Open-domain translation with ensembles.")
    parser.add_argument("--design", choices=factorized.DESIGNS, default="pa")
    parser.add_argument("--unseen", help="the held-out domain (default: the last one)")
    common.add_experiment_arguments(parser, "open_domain", factorized.MODEL_DIRS)
    parser.add_argument("--steps", type=int, help="stage-1 (and Transformer) training steps")
    parser.add_argument("--stage2-steps", type=int, help="stage-2 training steps")
    args = parser.parse_args(argv)
    mode, budget = common.experiment_budget(
        args, BUDGETS, steps=args.steps, stage2_steps=args.stage2_steps
    )
    out, options = common.experiment_output(args, "open_domain")
    steps = common.Steps(out, name="open_domain", options=options)
    out = steps.out  # A link given as --out is resolved once.
    start = engine.started()  # The command's start (the report's total time).
    common.prepare_corpus(args.data, args.cache)
    all_domains = corpora_lib.domain_names(common.load_yaml(args.config)["data"])
    unseen = args.unseen or all_domains[-1]
    data_config, known = known_data_config(
        args.config, unseen, os.path.join(steps.configs_dir, "data_known.yml")
    )
    units = factorized.model_width(args.size)

    config = common.train_config(
        "transformer", {}, {}, budget, steps.runs_dir, data=common.MIXED_BATCHES
    )
    config["params"]["decay_params"]["model_dim"] = units
    path = common.write_config(config, os.path.join(steps.configs_dir, "transformer.yml"))
    transformer = "Transformer (no %s)" % unseen
    steps.train(
        transformer,
        "transformer",
        factorized.model_def(args.size, "mixed"),
        [data_config, path],
        config["model_dir"],
        budget["steps"],
        "train (1/3)",
    )
    name = factorized.row_name(args.design)
    paths = common.train_curriculum(
        steps,
        name,
        "factorized_%s" % args.design,
        factorized.model_def(args.size, args.design),
        data_config,
        budget,
        "train (2/3)",
        model_dim=units,
    )
    classifier = demo.classifier_config(budget, steps.runs_dir)
    classifier_path = common.write_config(
        classifier, os.path.join(steps.configs_dir, "classifier.yml")
    )
    steps.train(
        "the domain classifier",
        "classifier",
        demo.CLASSIFIER_DEF,
        [data_config, classifier_path],
        classifier["model_dir"],
        budget["classifier_steps"],
        "train (3/3)",
    )

    systems = [
        evaluate.System(transformer, [data_config, path], None),
        evaluate.System(name, paths, MODES),
    ]
    info = corpus_lib.load_info(args.data)
    common.log(
        "[open_domain] fit the ens-learned weights (%d dev sentences per known domain)"
        % budget["fit_sentences"]
    )
    t0 = time.time()
    record = open_domain.fit_learned_weights(
        systems[1], args.data, info["source_lang"], info["target_lang"], budget["fit_sentences"]
    )
    systems[1].reload()
    steps.timings.append(("fit ens-learned", time.time() - t0))
    common.log("[open_domain] evaluate (%d test sentences per domain)" % budget["eval_sentences"])
    t0 = time.time()
    results = evaluate.evaluate(
        args.data,
        systems,
        os.path.join(out, "eval"),
        baseline=transformer,
        max_sentences=budget["eval_sentences"],
        classifier=evaluate.System("classifier", [data_config, classifier_path]),
    )
    steps.timings.append(("evaluate", time.time() - t0))
    tables = evaluate.format_tables(results)
    weights = " · ".join(
        "%s %.3f" % (view, weight) for view, weight in zip(record["views"], record["weights"])
    )
    lines = [
        "# Open-domain translation with ensembles of domain views (%s, %s size)"
        % (mode, args.size),
        "",
        "Known domains: %s; unseen: **%s** (no training, dev or classifier data). %s and %s"
        " (%s) trained on the known domains only: %d steps; the Factorized design %d steps"
        " of stage 1, then %d of stage 2. Labels: generic; oracle (the known domains;"
        " the unseen domain has none and gets generic); ens-uniform (equal weights over %s);"
        " ens-soft (the domain classifier's posterior over the known domains, %d steps);"
        " ens-learned (weights fitted on %d dev sentences per known domain). First %d test"
        " sentences per domain, beam 4."
        % (
            ", ".join(known),
            unseen,
            transformer,
            name,
            factorized.MODEL_DIRS[args.size],
            budget["steps"],
            budget["steps"],
            budget["stage2_steps"],
            ", ".join(ensembles.view_names(known)),
            budget["classifier_steps"],
            min(record["sentences_per_domain"].values()),
            budget["eval_sentences"],
        ),
        "",
        tables,
        "",
        "ens-learned weights: %s (dev log-likelihood per token %.4f, uniform weights %.4f)."
        % (weights, record["log_likelihood_per_token"], record["uniform_log_likelihood_per_token"]),
        "",
        "![BLEU per domain](eval/bleu.png)",
    ]
    write_text_atomic(os.path.join(out, "ensemble.json"), json.dumps(record, indent=2))
    steps.write_report(lines, tables, time.time() - start)
    return 0


if __name__ == "__main__":
    # A user error (a results directory that is not the drivers', a corpus not built)
    # is one line and exit status 2, as in the package's commands.
    sys.exit(errors.run_main("run/open_domain.sh", main))
