"""The README's main command: the whole multi-domain experiment on the default corpus.

    python -m ldr_opennmt.experiments.demo [--quick]

1. builds the default corpus (``ldr-data build default``);
2. trains Mixed, DC and LDR (small Transformers from ``model_defs/small/``) with
   stock ``onmt-main``;
3. evaluates them per domain with oracle, generic and wrong labels (``ldr-eval``);
4. writes ``report.md`` (corpus table, results, chart, configs, commands).

Every step resumes: a built corpus is reused, a finished training is skipped and
an interrupted one continues from its last checkpoint, finished translations are
reused.
"""

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time

import yaml

from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.evaluation import evaluate
from ldr_opennmt.utils import DEFAULT_CACHE

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SYSTEMS = [
    # (row name, model definition, extra params)
    ("Mixed", "model_defs/small/mixed_transformer.py", {}),
    ("DC", "model_defs/small/dc_transformer.py", {}),
    ("LDR", "model_defs/small/ldr_transformer.py", {"domain_training": "procedure1"}),
]

BUDGETS = {
    # Chosen so that the full demo takes at most 30 minutes and --quick at most 5
    # on a 2-core CPU (measured: small LDR Procedure 1 ~3.3 steps/s, Mixed ~4.5).
    # Short-trained models repeat themselves: the decoding length is capped so that
    # beam search does not run to OpenNMT-tf's default of 250 tokens.
    "full": {
        "steps": 1500,
        "warmup": 400,
        "eval_sentences": 300,
        "log_steps": 100,
        "max_decoding_length": 120,
    },
    "quick": {
        "steps": 120,
        "warmup": 60,
        "eval_sentences": 30,
        "log_steps": 20,
        "max_decoding_length": 40,
    },
}


def _log(message):
    print(message, file=sys.stderr, flush=True)


def _command_line(args):
    return " ".join(shlex.quote(a) for a in args)


def _run_streaming(args, log_path, keep=("Step =", "Restored", "Saved checkpoint", "error")):
    """Runs a command, writing its whole output to a log and echoing progress lines."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONWARNINGS="ignore")
    with open(log_path, "a", buffering=1) as log:  # Line-buffered: tail -f works.
        log.write("$ %s\n" % _command_line(args))
        process = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        last = []
        for line in process.stdout:
            log.write(line)
            last = (last + [line.rstrip()])[-5:]
            if any(k in line for k in keep):
                _log("    " + line.rstrip().split("] ", 1)[-1])
        process.wait()
    if process.returncode != 0:
        raise RuntimeError(
            "command failed (%d): %s\n%s\nfull log: %s"
            % (process.returncode, _command_line(args), "\n".join(last), log_path)
        )


def _train_config(name, params, budget, runs_dir):
    return {
        "model_dir": os.path.join(runs_dir, name.lower()),
        "params": dict(
            {
                "learning_rate": 1.0,
                "decay_params": {"model_dim": 64, "warmup_steps": budget["warmup"]},
                "maximum_decoding_length": budget["max_decoding_length"],
            },
            **params,
        ),
        "train": {
            "max_step": budget["steps"],
            "save_summary_steps": budget["log_steps"],
            "save_checkpoints_steps": max(budget["steps"] // 4, 1),
        },
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description="Run the multi-domain demo experiment.")
    parser.add_argument("--quick", action="store_true", help="smaller budgets (about 5 minutes)")
    parser.add_argument("--out", help="results directory (default results/demo[-quick])")
    parser.add_argument("--data", default="data/default", help="corpus directory")
    parser.add_argument(
        "--cache",
        default=DEFAULT_CACHE,
    )
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    budget = BUDGETS[mode]
    out = args.out or ("results/demo-quick" if args.quick else "results/demo")
    runs_dir = os.path.join(out, "runs")
    configs_dir = os.path.join(out, "configs")
    logs_dir = os.path.join(out, "logs")
    for directory in (out, configs_dir, logs_dir):
        os.makedirs(os.path.join(ROOT, directory), exist_ok=True)
    os.chdir(ROOT)
    commands = []
    timings = []
    start = time.time()

    _log("[demo] 1/4 corpus: %s" % args.data)
    t0 = time.time()
    data_command = [
        "ldr-data",
        "build",
        "default",
        "--out",
        args.data,
        "--cache",
        args.cache,
    ]
    commands.append(("Build the corpus", data_command))
    info = corpus_lib.build_default(args.data, args.cache, log=_log)
    timings.append(("corpus", time.time() - t0))

    data_config = "data_configs/default.yml"
    system_configs = []
    onmt_main = os.path.join(os.path.dirname(sys.executable), "onmt-main")
    for index, (name, model_def, params) in enumerate(SYSTEMS):
        config = _train_config(name, params, budget, runs_dir)
        config_path = os.path.join(configs_dir, "%s.yml" % name.lower())
        with open(config_path, "w") as f:
            yaml.safe_dump(config, f, sort_keys=False)
        shutil.copy(data_config, os.path.join(configs_dir, "data.yml"))
        train_command = [
            "onmt-main",
            "--model",
            model_def,
            "--config",
            data_config,
            config_path,
            "--auto_config",
            "train",
        ]
        commands.append(("Train %s" % name, train_command))
        system_configs.append((name, [data_config, config_path]))
        final = os.path.join(config["model_dir"], "ckpt-%d.index" % budget["steps"])
        t0 = time.time()
        if os.path.exists(final):
            _log("[demo] 2/4 train %s: already trained (%s)" % (name, final))
        else:
            _log(
                "[demo] 2/4 train %s (%d/%d): %d steps"
                % (name, index + 1, len(SYSTEMS), budget["steps"])
            )
            _run_streaming(
                [onmt_main] + train_command[1:],
                os.path.join(logs_dir, "%s.train.log" % name.lower()),
            )
        timings.append(("train %s" % name, time.time() - t0))

    _log("[demo] 3/4 evaluate (%d test sentences per domain)" % budget["eval_sentences"])
    t0 = time.time()
    eval_dir = os.path.join(out, "eval")
    eval_command = ["ldr-eval", "--corpus", args.data, "--out", eval_dir, "--baseline", "Mixed"]
    for name, paths in system_configs:
        eval_command += ["--system", "%s=%s" % (name, ",".join(paths))]
    eval_command += ["--max-sentences", str(budget["eval_sentences"])]
    commands.append(("Evaluate", eval_command))
    systems = [evaluate.System(name, paths) for name, paths in system_configs]
    results = evaluate.evaluate(
        args.data,
        systems,
        eval_dir,
        modes=("oracle", "generic", "wrong"),
        baseline="Mixed",
        max_sentences=budget["eval_sentences"],
    )
    timings.append(("evaluate", time.time() - t0))
    shutil.copy(os.path.join(eval_dir, "bleu.png"), os.path.join(out, "bleu.png"))

    total = time.time() - start
    report = _report(mode, info, results, commands, timings, total, configs_dir, budget)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(report)
    print(evaluate.format_tables(results))
    _log("[demo] 4/4 report: %s (total %.1f min)" % (os.path.join(out, "report.md"), total / 60))
    return 0


def _report(mode, info, results, commands, timings, total, configs_dir, budget):
    lines = [
        "# Multi-domain demo (%s)" % mode,
        "",
        "English->French, three domains built from PyPI packages by `ldr-data build default`.",
        "Small Transformers (2 layers, 64 units) from `model_defs/small/`, %d training steps each"
        " (batches of 2048 tokens); evaluation on the first %d test sentences of each domain,"
        " beam 4." % (budget["steps"], budget["eval_sentences"]),
        "",
        "## Corpus",
        "",
        corpus_lib.corpus_table(info),
        "",
        "## Results",
        "",
        "Rows: Mixed (labels ignored), DC and LDR with oracle, generic and wrong labels"
        " (wrong = the next domain in the list).",
        "",
        evaluate.format_tables(results),
        "",
        "![BLEU per domain](bleu.png)",
        "",
        "## Time",
        "",
        "| step | minutes |",
        "|---|---:|",
    ]
    lines += ["| %s | %.1f |" % (name, seconds / 60) for name, seconds in timings]
    lines += ["| total | %.1f |" % (total / 60), "", "## Configurations", ""]
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
    for title, command in commands:
        lines += ["- %s:" % title, "", "  ```", "  " + _command_line(command), "  ```"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
