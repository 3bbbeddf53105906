"""The GPU check's command line (``bash run/gpu_check.sh``, ``ldr-experiments gpu-check``) and
its driver: the probes, then every measurement in a child process, the checks and the
report."""

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time

from ldr_experiments import machine
from ldr_experiments.benchmarks import measure as bench_measure
from ldr_experiments.gpu_check import measure, probe
from ldr_experiments.gpu_check.child import load_config, result_path, run_child
from ldr_experiments.gpu_check.plan import (
    DEFAULTS,
    GPU_POLICY,
    MODES,
    PROG,
    QUICK,
    check_tasks,
    log,
)
from ldr_experiments.gpu_check.report import evaluate_checks, format_report
from ldr_experiments.gpu_check.rows import config_task


def run_task(task, workdir):
    """Runs one task of a child process and writes its result file."""
    kind, _, rest = task.partition(":")
    if kind == "config":
        result = config_task(workdir)
    elif kind == "probe":
        result = probe.probe_tensorflow()
    elif kind == "versions":
        result = probe.probe_versions()
    elif kind == "train":
        mode, system, frozen = (rest.split(":") + [""])[:3]
        result = measure.measure(load_config(workdir), mode, system, frozen_check=bool(frozen))
    elif kind == "frozen":
        result = measure.frozen(load_config(workdir), rest)
    elif kind == "translate":
        result = measure.translate(load_config(workdir))
    else:
        raise ValueError("unknown task %r" % task)
    with open(result_path(workdir, task), "w") as f:
        json.dump(result, f)


def run_checks(args, info, workdir):
    """Trains, checks and translates on the GPU; returns (config, results).

    Raises:
      SystemExit: (status 2) for a ``--families`` name that selects no row.
    """
    os.makedirs(os.path.join(workdir, "data"), exist_ok=True)
    with open(os.path.join(workdir, "args.json"), "w") as f:
        json.dump(vars(args), f)
    config = run_child("config", workdir)
    config.pop("seconds_total", None)
    if "usage_error" in config:
        sys.stderr.write("%s: error: %s\n" % (PROG, config["usage_error"]))
        raise SystemExit(2)
    if "error" in config:
        raise SystemExit("%s: error: reading the rows failed: %s" % (PROG, config["error"]))
    log("%d systems: %s" % (len(config["systems"]), ", ".join(config["systems"])))
    sentences = max(3000, config["sentences"], 16 * config["batch"])
    config["data_sentences"] = sentences
    config["paths"] = bench_measure.write_data(
        os.path.join(workdir, "data"),
        config["vocab"],
        sentences,
        config["length"],
        config["seed"],
        block=config["batch"],
    )
    with open(os.path.join(workdir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    tasks = check_tasks(config, frozen=not args.skip_frozen, translate=not args.skip_translate)
    results = {}
    for number, task in enumerate(tasks, start=1):
        log("%d/%d %s ..." % (number, len(tasks), task))
        result = run_child(task, workdir, timeout=args.task_timeout)
        kind, _, rest = task.partition(":")
        if kind == "train":
            mode, system, frozen = (rest.split(":") + [""])[:3]
            if frozen:  # The bit-identity check shared this training's process.
                checked = result.pop("frozen", None) or {"error": result.get("error", "no result")}
                results.setdefault("frozen", {})[system] = checked
            results.setdefault(mode, {})[system] = result
        elif kind == "frozen":
            results.setdefault("frozen", {})[rest] = result
        else:
            results[kind] = result
        if "error" in result:
            log("%s failed: %s" % (task, result["error"]))
        else:
            log("%s done in %.0f s" % (task, result.get("seconds_total", 0)))
    return config, results


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Checks that TensorFlow uses the GPU, trains every family at paper size "
        "in float32, mixed precision and mixed precision + XLA, checks float16 Procedure 1 "
        "and GPU translation, and writes a report. Without a GPU: checks the CUDA libraries "
        "and exits 0.",
    )
    parser.add_argument("--out", help="The report file (default: results/gpu_check-DATE.md).")
    parser.add_argument(
        "--families",
        nargs="+",
        help="What to train besides vanilla (always trained, the reference); default: every "
        "row. As run/bench.sh's --families: registered family names (e.g. ldr_transformer, "
        "`ldr-main --list-families`), groups of families (their name's first word: ldr, "
        "factorized, mixing...) or row names (e.g. ldr_joint, ldr_target). Checked once the "
        "GPU is found (the registry imports TensorFlow).",
    )
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--quick", action="store_true", help="Tiny sizes (checks that it runs).")
    for key, help_text in (
        ("layers", "Encoder and decoder layers."),
        ("units", "Model units (FFN: 4x)."),
        ("heads", "Attention heads."),
        ("vocab", "Words in the synthetic vocabulary."),
        ("length", "Tokens in every sentence."),
        ("batch", "Training batch in sentences."),
        ("steps", "Steps of the mixed precision + XLA run (timed after the warm-up)."),
        ("timing_steps", "Timed steps of the float32 and mixed precision runs."),
        ("warmup", "Untimed steps first (XLA's compilations happen there)."),
        ("frozen_steps", "Steps of each phase of the float16 bit-identity check."),
    ):
        parser.add_argument(
            "--" + key,
            type=int,
            help="%s Default: %d (--quick: %d)." % (help_text, DEFAULTS[key], QUICK[key]),
        )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip_frozen", action="store_true", help="No bit-identity check.")
    parser.add_argument("--skip_translate", action="store_true", help="No translation check.")
    parser.add_argument(
        "--task_timeout", type=int, default=3600, help="Seconds allowed to each measurement."
    )
    parser.add_argument(
        "--workdir", help="Keep data, models and logs in this new or empty directory."
    )
    # Development: the GPU path on a CPU (with the half-precision policy the CPU has).
    parser.add_argument("--allow_cpu", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mixed_policy", default=GPU_POLICY, help=argparse.SUPPRESS)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        if not args.workdir:
            parser.error("--one needs --workdir")
        return args
    base = QUICK if args.quick else DEFAULTS
    for key in DEFAULTS:
        if getattr(args, key) is None:
            setattr(args, key, base[key])
        if getattr(args, key) < (0 if key == "warmup" else 1):
            parser.error("--%s must be >= %d" % (key, 0 if key == "warmup" else 1))
    if args.workdir and os.path.lexists(args.workdir):
        if not os.path.isdir(args.workdir) or os.listdir(args.workdir):
            parser.error("--workdir %s must be a new or empty directory" % args.workdir)
    return args


def default_out(info):
    """The report's default path, under the working directory's ``results/`` (the clone's
    root for ``run/gpu_check.sh``), as every experiment's."""
    name = (info["gpus"][0]["name"] if info["gpus"] else "cpu").lower()
    slug = re.sub(r"[^a-z0-9]+", "-", name).strip("-")
    return os.path.join("results", "gpu_check-%s-%s.md" % (slug, time.strftime("%Y%m%d-%H%M")))


def main(argv=None):
    """The ``run/gpu_check.sh`` entry point; returns the exit status."""
    args = parse_args(argv)
    if args.one:
        run_task(args.one, os.path.abspath(args.workdir))
        return 0
    start = time.perf_counter()
    if args.workdir:
        workdir = os.path.abspath(args.workdir)
        os.makedirs(workdir, exist_ok=True)
        cleanup = False
    else:
        workdir = tempfile.mkdtemp(prefix="ldr-gpu-check-")
        cleanup = True
    try:
        return _main(args, workdir, start)
    finally:
        if cleanup:
            shutil.rmtree(workdir, ignore_errors=True)


def _main(args, workdir, start):
    gpu = probe.gpu_module()
    info = probe.probe_machine(workdir)
    for line in probe.environment_lines(info):
        log(line)
    if not info["gpus"]:
        if info["smi_gpus"]:
            # The silent CPU fallback: a GPU is there, TensorFlow does not use it.
            failures = [(name, "") for name in info["failing"]]
            reason = "nvidia-smi lists %s" % info["smi_gpus"][0]
            problem = "; ".join(info["driver_problems"])
            print("%s: error: %s" % (PROG, problem or gpu.fallback_message(reason, failures)))
            if not args.allow_cpu:
                return 1
        elif not args.allow_cpu:
            print(probe.no_gpu_line(info))
            return probe.no_gpu_status(info)
    described = machine.describe()
    config, results = run_checks(args, info, workdir)
    checks = evaluate_checks(info, config, results)
    report = format_report(
        info, config, results, checks, described, elapsed=time.perf_counter() - start
    )
    out = args.out or default_out(info)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    bench_measure.write_atomically(out, report)
    bench_measure.write_atomically(
        os.path.splitext(out)[0] + ".json",
        json.dumps({"machine": info, "config": config, "results": results}, indent=2, default=str),
    )
    sys.stdout.write(report)
    failed = [c for c, r, _ in checks if r == "FAIL"]
    log("report written to %s" % out)
    if failed:
        log("FAILED: %s" % "; ".join(failed))
        return 1
    log("every check passed")
    return 0
