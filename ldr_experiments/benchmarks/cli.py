"""The benchmark's command line (``bash run/bench.sh``, ``ldr-experiments bench``): its
options, and the driver that runs every measurement in a process of its own, one after the
other, and prints the report."""

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from ldr_experiments import machine
from ldr_experiments.benchmarks.measure import (
    agreement,
    result_path,
    run_task,
    write_atomically,
    write_data,
)
from ldr_experiments.benchmarks.report import format_report
from ldr_experiments.benchmarks.rows import (
    CT2,
    DEFAULTS,
    ENSEMBLES,
    INFER,
    PARTS,
    QUICK,
    TF,
    TRAIN,
    build_rows,
    config_rows,
    infer_tasks,
    log,
    make_size,
    select_rows,
)


def resolve_sizes(args):
    """Fills the size options left unset with the ``--quick`` or default values."""
    base = QUICK if args.quick else DEFAULTS
    for key, value in base.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def _run_process(task, workdir, number, total):
    """Runs :func:`run_task` in a new process and returns its result (or an error)."""
    log_path = os.path.join(workdir, "logs", task.replace(":", "-") + ".log")
    command = [sys.executable, "-m", "ldr_experiments.benchmarks"]
    command += ["--one", task, "--workdir", workdir]
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("PYTHONWARNINGS", "ignore")
    log("%d/%d %s ..." % (number, total, task))
    start = time.perf_counter()
    with open(log_path, "w") as log_file:
        status = subprocess.run(
            command, stdout=log_file, stderr=subprocess.STDOUT, env=env
        ).returncode
    elapsed = time.perf_counter() - start
    if status != 0:
        lines = [line for line in machine.read_text(log_path).splitlines() if line.strip()]
        error = lines[-1] if lines else "exit status %d" % status
        log(
            "%s failed after %.1f s (exit status %d), last lines of %s:"
            % (task, elapsed, status, log_path)
        )
        for line in lines[-15:]:
            sys.stderr.write("    %s\n" % line)
        return {"error": error.replace("|", "/")}
    with open(result_path(workdir, task)) as f:
        result = json.load(f)
    log("%s done in %.1f s (peak RSS %.0f MiB)" % (task, elapsed, result["peak_rss_mib"]))
    if result.get("warning"):
        log("warning: %s" % result["warning"])
    return result


def base_config(args, workdir):
    """The JSON-serializable configuration shared with the measurement processes, but for
    its rows: the sizes and settings of :obj:`args` (:mod:`ldr_experiments.gpu_check` adds
    rows of its own)."""
    keys = list(DEFAULTS) + ["threads", "quantization", "seed", "quick"]
    config = {key: getattr(args, key) for key in keys}
    config["parts"] = list(args.parts)
    config["families"] = list(getattr(args, "families", None) or [])
    config["user_modules"] = list(getattr(args, "user_module", None) or [])
    config["workdir"] = workdir
    config["size"] = make_size(args.layers, args.units, args.heads)
    return config


def make_config(args, workdir):
    """The JSON-serializable configuration shared with the measurement processes.

    Its ``rows`` are the rows that ``args.families`` selects (every row by default, a
    name that selects nothing skipped: :func:`parse_args` has refused it), as plain dicts.
    """
    config = base_config(args, workdir)
    rows = build_rows(config["size"], config["user_modules"])
    selected = select_rows(rows, config["families"], strict=False)
    config["rows"] = [dataclasses.asdict(row) for row in selected]
    return config


def tasks_of(parts, rows):
    """The tasks of a run, in order: training, the exports, SavedModels, CTranslate2."""
    tasks = []
    if TRAIN in parts:
        tasks += ["%s:%s" % (TRAIN, row.name) for row in rows if row.train]
    if INFER in parts:
        tasks.append("prepare")
        tasks += ["%s:%s" % (runtime, row.name) for runtime, row in infer_tasks(rows)]
    return tasks


def make_workdir(path):
    """Creates the ``--workdir`` given by the user, or checks it is an empty directory.

    Checked again here, right before use (``parse_args`` checks it too): the run writes
    its data, models and logs there and must not overwrite anything it did not create.
    A symbolic link given as the directory is resolved once, with a message. The
    directory is never removed (only the temporary one made without ``--workdir`` is).

    Returns:
      The absolute path of the directory (of its target, for a link).

    Raises:
      SystemExit: with a one-line message, if the path is not a directory or not empty.
    """
    path = os.path.abspath(path)
    if os.path.islink(path):
        target = os.path.realpath(path)
        log("--workdir %s is a symbolic link: writing into %s" % (path, target))
        path = target
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mkdir(path)
        return path
    except FileExistsError:
        pass
    except OSError as e:
        raise SystemExit("run/bench.sh: error: --workdir %s: %s" % (path, e.strerror or e))
    if not os.path.isdir(path):
        raise SystemExit("run/bench.sh: error: --workdir %s is not a directory" % path)
    if os.listdir(path):
        raise SystemExit("run/bench.sh: error: --workdir %s is not empty" % path)
    return path


def run_benchmarks(args, workdir):
    """Runs every measurement in turn; returns (config, results, any failure)."""
    for name in ("data", "results", "logs"):
        os.makedirs(os.path.join(workdir, name), exist_ok=True)
    config = make_config(args, workdir)
    sentences = max(3000, config["sentences"], 16 * config["batch"])
    config["data_sentences"] = sentences
    config["paths"] = write_data(
        os.path.join(workdir, "data"),
        args.vocab,
        sentences,
        args.length,
        args.seed,
        block=config["batch"],
    )
    with open(os.path.join(workdir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    results = {TRAIN: {}, INFER: {}}
    rows = config_rows(config)
    tasks = tasks_of(args.parts, rows)
    failed = False
    prepared = True
    for number, task in enumerate(tasks, start=1):
        kind, _, system = task.partition(":")
        if kind in (TF, CT2) and not prepared:
            results[INFER][task] = {"error": "the export failed"}
            continue
        result = _run_process(task, workdir, number, len(tasks))
        failed = failed or "error" in result
        if kind == "prepare":
            prepared = "error" not in result
        elif kind == TRAIN:
            results[TRAIN][system] = result
        else:
            results[INFER][task] = result
    for row in rows:
        entry = results[INFER].get("%s:%s" % (CT2, row.name))
        reference = results[INFER].get("%s:%s" % (TF, row.name))
        if row.ct2 and entry and "error" not in entry:
            entry["agreement"] = agreement(entry.get("outputs"), (reference or {}).get("outputs"))
    return config, results, failed


def _user_module_spec(spec):
    """A user module as the measurement processes load it: a file by its absolute path."""
    return os.path.abspath(spec) if spec.endswith(".py") or os.sep in spec else spec


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="run/bench.sh",
        description="Training and CPU inference speed and peak memory of vanilla OpenNMT-tf "
        "and the registered model families, side by side (markdown on standard output).",
    )
    parser.add_argument(
        "--quick", action="store_true", help="Tiny sizes (a 1-2 minute check, not figures)."
    )
    parser.add_argument("--out", help="Also write the markdown report to this file.")
    parser.add_argument(
        "--parts", nargs="+", choices=PARTS, default=list(PARTS), help="What to measure."
    )
    parser.add_argument(
        "--families",
        nargs="+",
        help="What to measure besides vanilla (always measured, the reference); default: "
        "every registered family with a benchmark (`ldr-main --list-families`). Registered "
        "family names (e.g. ldr_transformer), groups of families (their name's first word: "
        "ldr, factorized, mixing...), %s (every ensemble row and the row it ensembles) or "
        "row names (e.g. ldr_joint)." % ENSEMBLES,
    )
    parser.add_argument(
        "--user_module",
        action="extend",
        nargs="+",
        metavar="FILE",
        help="A Python file (or an importable module name) that registers families of its "
        "own (ldr_opennmt.registry); their benchmark rows are measured like the package's. "
        "Repeatable.",
    )
    sizes = parser.add_argument_group(
        "sizes", "Unset options take the default (or --quick) values shown."
    )
    for key, help_text in (
        ("layers", "Encoder and decoder layers."),
        ("units", "Model units (FFN: 4x)."),
        ("heads", "Attention heads."),
        ("vocab", "Words in the synthetic (shared) vocabulary."),
        ("length", "Tokens in every synthetic source and target sentence."),
        ("batch", "Training batch size in sentences."),
        ("steps", "Timed training steps per system."),
        ("warmup", "Training steps before timing."),
        ("sentences", "Inference sentences."),
        ("infer_batch", "Inference batch size in sentences."),
        ("decode_length", "L: the length of every translation (min = max decoding length)."),
        ("beam", "Beam size."),
        ("passes", "Timed inference passes over all sentences (the median is reported)."),
    ):
        sizes.add_argument(
            "--" + key,
            type=int,
            help="%s Default: %d (--quick: %d)." % (help_text, DEFAULTS[key], QUICK[key]),
        )
    parser.add_argument(
        "--threads",
        type=int,
        default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        help="CPU threads for inference (TF intra-op, CTranslate2 intra_threads). "
        "Default: the usable CPUs.",
    )
    parser.add_argument(
        "--quantization",
        help="CTranslate2 weight type of the converted models (e.g. int8); default: "
        "float32 like the TF models.",
    )
    parser.add_argument("--seed", type=int, default=1, help="Data and weights seed.")
    parser.add_argument(
        "--workdir",
        help="Keep the data, exported models, logs and raw results in this new or empty "
        "directory (default: a temporary directory, removed at the end).",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        if not args.workdir:
            parser.error("--one needs --workdir")
        return args
    resolve_sizes(args)
    if args.threads is None:
        args.threads = os.cpu_count() or 1
    for key in list(DEFAULTS) + ["threads"]:
        minimum = 0 if key == "warmup" else 1
        if getattr(args, key) < minimum:
            parser.error("--%s must be >= %d" % (key, minimum))
    if args.quantization:
        from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES

        if args.quantization not in ACCEPTED_MODEL_TYPES:
            parser.error(
                "--quantization: %r is not a CTranslate2 weight type (%s)"
                % (args.quantization, ", ".join(ACCEPTED_MODEL_TYPES))
            )
    if args.workdir and os.path.lexists(args.workdir):
        if not os.path.isdir(args.workdir):
            parser.error("--workdir %s is not a directory" % args.workdir)
        if os.listdir(args.workdir):
            parser.error("--workdir %s is not empty" % args.workdir)
    # The row table (the registry, the user modules) is read here, to refuse a wrong
    # name or module before anything runs.
    args.user_module = [_user_module_spec(spec) for spec in args.user_module or []]
    from ldr_opennmt.errors import UserError

    try:
        rows = build_rows(make_size(args.layers, args.units, args.heads), args.user_module)
        select_rows(rows, args.families)
    except (UserError, ValueError) as e:
        parser.error(str(e))
    return args


def main(argv=None):
    """The ``ldr-experiments bench`` entry point (``bash run/bench.sh``), and that of a
    measurement process (``--one``); returns the exit status (1 if a measurement failed)."""
    args = parse_args(argv)
    if args.one:
        run_task(args.one, os.path.abspath(args.workdir))
        return 0
    start = time.perf_counter()
    described = machine.describe()
    if args.workdir:
        workdir = make_workdir(args.workdir)
        config, results, failed = run_benchmarks(args, workdir)
    else:
        # Made here, exclusively: the only directory this script ever removes.
        workdir = tempfile.mkdtemp(prefix="ldr-bench-")
        try:
            config, results, failed = run_benchmarks(args, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    report = format_report(config, results, described, elapsed=time.perf_counter() - start)
    sys.stdout.write(report)
    sys.stdout.flush()
    if args.out:
        write_atomically(args.out, report)
        log("report written to %s" % args.out)
    return 1 if failed else 0
