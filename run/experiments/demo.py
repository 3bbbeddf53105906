"""The README's main command: the whole multi-domain experiment on the default corpus.

    bash run/demo.sh [--quick]
    PYTHONPATH=run python -m experiments.demo [--quick]    # the same, from the repository root

1. builds the default corpus (``ldr-data build default``);
2. trains Mixed, DC, LDR and LDR^0.5 (small Transformers from ``model_defs/small/``)
   with ``ldr-main`` on per-domain corpora (``data_configs/default_corpora.yml``), and
   word-level domain mixing (labels for training only), and the Factorized
   Transformer SF with the paper's curriculum (stage 1 domain-agnostic,
   then unfold and stage 2 on the domain blocks alone);
3. fine-tunes Mixed on each domain (the FT_* baselines) and trains a domain
   classifier that labels the test sets (LDR_pred);
4. evaluates every system per domain (``ldr-eval``): oracle, generic and wrong
   labels for DC, LDR and Factorized SF, predicted labels for LDR;
5. writes ``report.md`` (corpus table, classifier precision/recall, results,
   chart, configs, commands).

Every step resumes: a built corpus is reused, a finished training is skipped and
an interrupted one continues from its last checkpoint, finished translations are
reused.
"""

import argparse
import json
import os
import shutil
import sys
import time

from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.evaluation import classification, evaluate
from ldr_opennmt.utils import DEFAULT_CACHE

from . import common
from .common import ROOT

DATA_CONFIG = "data_configs/default_corpora.yml"
CLASSIFIER_DEF = "model_defs/small/domain_classifier.py"

SYSTEMS = [
    # (row name, directory name, model definition, params, train options, eval label modes).
    # Every system also gets data: common.MIXED_BATCHES (batches mixing domains).
    ("Mixed", "mixed", "model_defs/small/mixed_transformer.py", {}, {}, None),
    (
        "DC",
        "dc",
        "model_defs/small/dc_transformer.py",
        {},
        {},
        ("oracle", "generic", "wrong"),
    ),
    (
        "LDR",
        "ldr",
        "model_defs/small/ldr_transformer.py",
        {"domain_training": "procedure1"},
        {},
        ("oracle", "generic", "wrong", "pred"),
    ),
    (
        "LDR^0.5",
        "ldr_alpha0.5",
        "model_defs/small/ldr_transformer.py",
        {"domain_training": "procedure1"},
        {"domain_sampling_alpha": 0.5},
        ("oracle",),
    ),
    # Domain mixing needs the labels for training only; it translates without them.
    ("Mixing", "mixing", "model_defs/small/mixing_transformer.py", {}, {}, None),
]
#: The fine-tuning baselines continue this system on one domain each.
FINETUNE_BASE = "Mixed"

#: The Factorized design the demo trains, with the curriculum (SF: the cheapest design
#: that has per-domain blocks in both attention and FFN, 1.13x the parameters at paper
#: size; PA computes four per-domain projections in every attention, DF factorizes the
#: embeddings through a d_inner that leaves little at 64 units).
FACTORIZED = ("Factorized SF", "factorized_sf", "model_defs/small/factorized_sf.py")
FACTORIZED_MODES = ("oracle", "generic", "wrong")

BUDGETS = {
    # Measured on a 2-core CPU: small LDR Procedure 1 ~3.3 steps/s, Mixed ~5, plus
    # ~20 s of start-up and tracing per command. The full budget is what fits in
    # about 30 minutes with four systems, three fine-tunings and the classifier.
    # Short-trained models repeat themselves: the decoding length is capped so that
    # beam search does not run to OpenNMT-tf's default of 250 tokens.
    "full": {
        "steps": 1000,
        "warmup": 400,
        "finetune_steps": 200,
        "stage2_steps": 300,
        "classifier_steps": 400,
        "eval_sentences": 200,
        "log_steps": 100,
        "max_decoding_length": 100,
    },
    "quick": {
        "steps": 60,
        "warmup": 30,
        "finetune_steps": 10,
        "stage2_steps": 10,
        "classifier_steps": 30,
        "eval_sentences": 20,
        "log_steps": 20,
        "max_decoding_length": 30,
    },
}


def _finetune_config(domain, base_config, budget, runs_dir):
    config = {
        "model_dir": os.path.join(runs_dir, "ft_%s" % domain),
        "finetune": {
            "base": base_config["model_dir"],
            "domain": domain,
            "steps": budget["finetune_steps"],
        },
        "params": base_config["params"],
        "train": {
            "save_summary_steps": max(budget["finetune_steps"] // 4, 1),
            "save_checkpoints_steps": budget["finetune_steps"],
        },
    }
    return config


def _classifier_config(budget, runs_dir):
    return {
        "model_dir": os.path.join(runs_dir, "classifier"),
        "params": {"optimizer": "Adam", "learning_rate": 0.002},
        "train": {
            "batch_type": "examples",
            "batch_size": 64,
            "max_step": budget["classifier_steps"],
            "sample_buffer_size": 50000,
            "save_summary_steps": budget["log_steps"],
            "save_checkpoints_steps": budget["classifier_steps"],
        },
        "infer": {"batch_size": 64},
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description="Run the multi-domain demo experiment.")
    parser.add_argument("--quick", action="store_true", help="smaller budgets (about 5 minutes)")
    parser.add_argument("--out", help="results directory (default results/demo[-quick])")
    parser.add_argument("--data", default="data/default", help="corpus directory")
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    budget = BUDGETS[mode]
    out = args.out or ("results/demo-quick" if args.quick else "results/demo")
    os.chdir(ROOT)
    demo = common.Steps(out)
    runs_dir, configs_dir, logs_dir = demo.runs_dir, demo.configs_dir, demo.logs_dir
    start = time.time()

    if args.data != "data/default":
        raise SystemExit(
            "the demo's data configuration reads data/default; use --data data/default"
        )
    common.log("[demo] 1/5 corpus: %s" % args.data)
    t0 = time.time()
    demo.commands.append(
        (
            "Build the corpus",
            ["ldr-data", "build", "default", "--out", args.data, "--cache", args.cache],
        )
    )
    info = common.prepare_corpus(args.data, args.cache)
    demo.timings.append(("corpus", time.time() - t0))
    data_config = common.write_config(
        common.load_yaml(DATA_CONFIG), os.path.join(configs_dir, "data.yml")
    )

    systems = []
    configs = {}
    for index, (name, slug, model_def, params, train, modes) in enumerate(SYSTEMS):
        config = common.train_config(
            slug, params, train, budget, runs_dir, data=common.MIXED_BATCHES
        )
        path = common.write_config(config, os.path.join(configs_dir, "%s.yml" % slug))
        configs[name] = config
        demo.train(
            name,
            slug,
            model_def,
            [data_config, path],
            config["model_dir"],
            budget["steps"],
            "2/5 train (%d/%d)" % (index + 1, len(SYSTEMS)),
        )
        systems.append(evaluate.System(name, [data_config, path], modes))

    name, slug, model_def = FACTORIZED
    paths = common.train_curriculum(demo, name, slug, model_def, data_config, budget, "2/5 train")
    systems.append(evaluate.System(name, paths, FACTORIZED_MODES))

    base_def = [s[2] for s in SYSTEMS if s[0] == FINETUNE_BASE][0]
    for domain in info["domains"]:
        config = _finetune_config(domain, configs[FINETUNE_BASE], budget, runs_dir)
        path = common.write_config(config, os.path.join(configs_dir, "ft_%s.yml" % domain))
        demo.train(
            "FT_%s" % domain,
            "ft_%s" % domain,
            base_def,
            [data_config, path],
            config["model_dir"],
            budget["steps"] + budget["finetune_steps"],
            "3/5 fine-tune %s on %s (%d steps)" % (FINETUNE_BASE, domain, budget["finetune_steps"]),
        )
        systems.append(evaluate.System("FT_%s" % domain, [data_config, path], ("oracle",)))

    classifier = _classifier_config(budget, runs_dir)
    classifier_config = common.write_config(classifier, os.path.join(configs_dir, "classifier.yml"))
    demo.train(
        "the domain classifier",
        "classifier",
        CLASSIFIER_DEF,
        [data_config, classifier_config],
        classifier["model_dir"],
        budget["classifier_steps"],
        "3/5 train",
    )
    pred_dir = os.path.join(out, "pred")
    src, domains = info["source_lang"], info["domains"]
    predict_command = ["ldr-main", "--config", data_config, classifier_config, "predict_domains"]
    predict_command += ["--features_file"]
    predict_command += [os.path.join(args.data, "test.%s.%s" % (d, src)) for d in domains]
    predict_command += ["--labels_file"]
    predict_command += [os.path.join(args.data, "test.%s.domain" % d) for d in domains]
    predict_command += ["--output_dir", pred_dir, "--model_config", data_config]
    demo.commands.append(("Predict the test sets' domains", predict_command))
    t0 = time.time()
    scores_path = os.path.join(pred_dir, "classification.json")
    if os.path.exists(scores_path) and os.path.getmtime(scores_path) > os.path.getmtime(
        os.path.join(classifier["model_dir"], "checkpoint")
    ):
        common.log("[demo] 3/5 predicted labels: already made (%s)" % pred_dir)
    else:
        common.log("[demo] 3/5 predict the domains of the test sets")
        common.run_streaming(
            [demo.ldr_main] + predict_command[1:], os.path.join(logs_dir, "predict_domains.log")
        )
    with open(scores_path) as f:
        classifier_scores = json.load(f)
    demo.timings.append(("predict domains", time.time() - t0))

    common.log("[demo] 4/5 evaluate (%d test sentences per domain)" % budget["eval_sentences"])
    t0 = time.time()
    eval_dir = os.path.join(out, "eval")
    eval_command = ["ldr-eval", "--corpus", args.data, "--out", eval_dir, "--baseline", "Mixed"]
    for system in systems:
        eval_command += ["--system", "%s=%s" % (system.name, ",".join(system.config_paths))]
        if system.modes:
            eval_command += ["--system-modes", "%s=%s" % (system.name, ",".join(system.modes))]
    eval_command += ["--pred-dir", pred_dir, "--max-sentences", str(budget["eval_sentences"])]
    demo.commands.append(("Evaluate", eval_command))
    results = evaluate.evaluate(
        args.data,
        systems,
        eval_dir,
        baseline="Mixed",
        max_sentences=budget["eval_sentences"],
        pred_dir=pred_dir,
    )
    demo.timings.append(("evaluate", time.time() - t0))
    shutil.copy(os.path.join(eval_dir, "bleu.png"), os.path.join(out, "bleu.png"))

    total = time.time() - start
    report = _report(mode, info, results, classifier_scores, demo, total, configs_dir, budget)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(report)
    print(classification.markdown_table(classifier_scores))
    print(evaluate.format_tables(results))
    common.log(
        "[demo] 5/5 report: %s (total %.1f min)" % (os.path.join(out, "report.md"), total / 60)
    )
    return 0


def _report(mode, info, results, classifier_scores, demo, total, configs_dir, budget):
    lines = [
        "# Multi-domain demo (%s)" % mode,
        "",
        "English->French, three domains built from PyPI packages by `ldr-data build default`.",
        "Small Transformers (2 layers, 64 units) from `model_defs/small/`, trained by `ldr-main`"
        " on per-domain corpora for %d steps each (batches of 2048 tokens mixing domains, sentences"
        " drawn with P(domain i) ~ |C_i|^alpha; alpha = 1, and 0.5 for LDR^0.5; single-domain"
        " batches trained markedly worse at this size, see demo.py). FT_<domain>: Mixed"
        " fine-tuned %d more steps on that domain only. Factorized SF: the paper's curriculum,"
        " %d steps of domain-agnostic training (shared parameters and general copies), then"
        " every domain block set from its general copy and %d steps training the domain"
        " blocks alone, the rest frozen. LDR (pred): LDR with the labels of a"
        " domain classifier (bidirectional LSTM, %d steps). Evaluation on the first %d test"
        " sentences of each domain, beam 4."
        % (
            budget["steps"],
            budget["finetune_steps"],
            budget["steps"],
            budget["stage2_steps"],
            budget["classifier_steps"],
            budget["eval_sentences"],
        ),
        "",
        "## Corpus",
        "",
        corpus_lib.corpus_table(info),
        "",
        "## Domain classifier (full test sets)",
        "",
        classification.markdown_table(classifier_scores),
        "",
        "## Results",
        "",
        "Rows: Mixed and Mixing (domain mixing: no label at translation; labels ignored); DC, LDR and Factorized SF with oracle, generic, wrong (the"
        " next domain in the list) labels, LDR also with predicted labels; LDR^0.5 and the FT_*"
        " baselines with oracle labels.",
        "",
        evaluate.format_tables(results),
        "",
        "![BLEU per domain](bleu.png)",
        "",
        "## Time",
        "",
    ]
    lines += demo.timing_lines(total) + ["", "## Configurations", ""]
    for name in sorted(os.listdir(configs_dir)):
        with open(os.path.join(configs_dir, name)) as f:
            lines += [
                "`%s`:" % os.path.join(configs_dir, name),
                "",
                "```yaml",
                f.read().rstrip(),
                "```",
                "",
            ]
    lines += [
        "## Commands to rerun any step",
        "",
        "From the repository root, after `source run/setup_env.sh`:",
        "",
    ]
    for title, command in demo.commands:
        lines += ["- %s:" % title, "", "  ```", "  " + common.command_line(command), "  ```"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
