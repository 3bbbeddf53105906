"""Checks that this project runs on the GPU, and measures it: ``bash run/gpu_check.sh``.

::

    bash run/gpu_check.sh                           # everything (not yet timed on a GPU)
    bash run/gpu_check.sh --families ldr factorized --modes mixed_xla
    bash run/gpu_check.sh --quick                   # tiny sizes: checks that it runs
    bash run/gpu_check.sh --out results/h100.md     # the report's file (default: results/)

On a machine without a GPU it checks what it can (the CUDA libraries TensorFlow 2.13.1
loads, their versions against ``tf.sysconfig.get_build_info()``, XLA's ptxas and
libdevice), says in one line that there is no GPU, and exits 0. On a GPU machine:

1. TensorFlow must list the GPU (a GPU that ``nvidia-smi -L`` lists and TensorFlow does
   not is the silent CPU fallback of :mod:`ldr_opennmt.gpu`: exit 1, naming the libraries
   that fail to load);
2. each family trains at paper size (6+6 layers, 512 units, 8 heads, FFN 2048; the RNNs
   at their catalog size) in float32, mixed precision (``mixed_float16``, the policy of
   ``onmt-main --mixed_precision``, with its loss-scale optimizer) and mixed precision +
   XLA (``--jit_compile``), with OpenNMT-tf's own training step, and the loss must stay
   finite; the mixed precision + XLA run is the "few hundred steps" (``--steps``);
3. under float16 + XLA, the parameters of domains absent from every batch stay
   bit-identical (LDR in Procedure 1, joint training and on both sides, DC and the
   Factorized designs: :func:`row_checks`);
4. an LDR SavedModel translates with domain labels on the GPU (``ldr-translate``'s
   :class:`ldr_opennmt.serving.client.Translator`), and so does its folded CTranslate2
   model (``device="cuda"``, float32 and float16);
5. a markdown report in the format of BENCHMARKS.md (the GPU's name, tokens/s and step
   time per family and mode, ratios to the stock Transformer) goes to ``--out``.

The measurements are those of ``ldr_experiments/benchmarks.py`` (``bash run/bench.sh``), called, not
copied: the same synthetic data (every sentence of ``--length`` tokens, so every batch has
one shape and XLA compiles each step function once, during the warm-up steps, before any
step is timed), the same model builders and the same timed loop
(:func:`benchmarks._measure_training`, median step after ``--warmup`` steps). Each
measurement runs in its own process, one after the other; this process never imports
TensorFlow, so it holds no GPU memory (and the CUDA libraries are checked before
TensorFlow loads them).

The systems are rows of ``ldr_experiments/benchmarks.py``'s table (``benchmarks.Row``), read from
the family registry (:func:`check_rows`), never listed here: the benchmark's training
rows, vanilla first; after a family's rows, its model with LDR on the target side too,
for a family whose builder takes ``target_ldr``; and one row for each registered family
the benchmark does not measure (the RNNs). What a row gets is read from its family's
capabilities: no XLA run for a family whose model refuses ``set_jit_compile`` (the RNNs),
a bit-identity check for a family whose sentences select their domain's parameters
(labels needed) and that trains without a frozen base. ``--families`` selects rows as
``run/bench.sh`` does (family names, groups, row names). The registry imports
TensorFlow, so a child process reads it and returns the run's configuration, rows
included, which this process writes into ``config.json`` for the measurement processes.

A script of the repository, not of the installed package: ``run/gpu_check.sh`` sets up
the environment (with the GPU libraries if ``source run/setup_env.sh --gpu`` installed
them) and runs it with ``run/`` on ``sys.path``.
"""

import argparse
import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from ldr_experiments import benchmarks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROG = "run/gpu_check.sh"

FP32 = "fp32"
MIXED = "mixed"
MIXED_XLA = "mixed_xla"
MODES = (FP32, MIXED, MIXED_XLA)
MODE_NAMES = {FP32: "float32", MIXED: "mixed precision", MIXED_XLA: "mixed precision + XLA"}
#: ``onmt-main --mixed_precision``'s policy on a GPU (opennmt.utils.misc).
GPU_POLICY = "mixed_float16"

VANILLA = benchmarks.VANILLA
#: The architecture the benchmark builds at its size; the others' rows carry theirs.
TRANSFORMER = "transformer"
#: The builder argument that puts LDR embeddings on the target side too: a family of the
#: benchmark whose builder takes it gets a row with it (:func:`check_rows`).
TARGET_SIDE = "target_ldr"
#: The family of the translation check (its SavedModel with labels, its fold into
#: CTranslate2): LDR, the method of the issues' CTranslate2 targets.
TRANSLATE_FAMILY = "ldr_transformer"
#: The domain trained alone in the second phase of the bit-identity check.
PRESENT_DOMAIN = "d0"

PAPER = dict(layers=6, units=512, heads=8, vocab=32000, length=24, batch=128)
DEFAULTS = dict(PAPER, steps=300, timing_steps=100, warmup=20, frozen_steps=20)
QUICK = dict(benchmarks.QUICK, steps=6, timing_steps=3, warmup=2, frozen_steps=2, batch=16)
RNN_SIZE = dict(embedding_size=512, hidden_size=1024)
QUICK_RNN_SIZE = dict(embedding_size=64, hidden_size=64)

_log_prefix = "[gpu_check]"


def _log(message):
    sys.stderr.write("%s %s\n" % (_log_prefix, message))
    sys.stderr.flush()


def gpu_module():
    """:mod:`ldr_opennmt.gpu` loaded from its file, without the package (whose
    ``__init__`` imports TensorFlow)."""
    return benchmarks.standalone_module("gpu")


# What this machine has (each probe in a child process).


def _probe_tensorflow():
    """TensorFlow's build, GPUs and the CUDA libraries as TensorFlow's process sees them."""
    gpu = gpu_module()
    libraries = gpu.library_report()  # Loaded as TensorFlow will load them.
    import tensorflow as tf

    gpus = []
    for device in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(device)
        capability = details.get("compute_capability")
        gpus.append(
            {
                "name": details.get("device_name", device.name),
                "compute_capability": list(capability) if capability else None,
            }
        )
    build = {k: v for k, v in tf.sysconfig.get_build_info().items() if k != "cpu_compiler"}
    return {
        "tensorflow": tf.__version__,
        "build": build,
        "gpus": gpus,
        "libraries": libraries,
    }


def _probe_versions():
    return gpu_module().library_versions()


def probe_machine(workdir):
    """Everything known without training: nvidia-smi, TensorFlow, the libraries.

    Returns:
      A dict (see :func:`environment_lines`).
    """
    gpu = gpu_module()
    info = {
        "smi_gpus": gpu.listed_gpus(),
        "smi_properties": gpu.gpu_properties() if shutil.which("nvidia-smi") else [],
        "nvidia_smi": shutil.which("nvidia-smi"),
        "xla_data_dir": gpu.xla_data_dir(),
        "ld_library_path": os.environ.get("LD_LIBRARY_PATH", ""),
    }
    info["xla_problem"] = gpu.xla_data_dir_problem(info["xla_data_dir"])
    info["driver_problems"] = sorted(
        {
            problem
            for props in info["smi_properties"]
            for problem in [
                gpu.driver_problem(props.get("driver_version"), props.get("compute_cap"))
            ]
            if problem
        }
    )
    tf_info = run_child("probe", workdir)
    tf_info.pop("seconds_total", None)
    if "error" in tf_info:
        raise SystemExit("%s: error: probing TensorFlow failed: %s" % (PROG, tf_info["error"]))
    info.update(tf_info)
    # cuDNN can abort the process that asks its version (see gpu.library_versions).
    versions = run_child("versions", workdir)
    versions.pop("seconds_total", None)
    info["versions"] = {} if "error" in versions else versions
    info["versions_error"] = versions.get("error")
    info["mismatches"] = gpu.version_mismatches(info["versions"], info["build"])
    info["failing"] = [name for name, path in info["libraries"].items() if path is None]
    return info


def _library_dirs(libraries):
    """Where the loaded libraries are: ``SITE/nvidia/*/lib`` for NVIDIA's wheels."""
    dirs = []
    for path in libraries.values():
        if not path:
            continue
        folder = os.path.dirname(path)
        match = re.match(r"(.*/nvidia)/[^/]+/lib$", folder)
        folder = match.group(1) + "/*/lib" if match else folder
        if folder not in dirs:
            dirs.append(folder)
    return dirs


def library_summary(info):
    """One phrase on the CUDA libraries: how many load, from where, their versions."""
    libraries = info["libraries"]
    total, failing = len(libraries), info["failing"]
    if len(failing) == total:
        return "none of the %d CUDA libraries TensorFlow loads is found (%s installs them)" % (
            total,
            "`source run/setup_env.sh --gpu`",
        )
    versions = ", ".join("%s %s" % item for item in sorted(info["versions"].items()))
    where = " and ".join(_library_dirs(libraries)) or "the system"
    text = "%d of %d CUDA libraries load (from %s)" % (total - len(failing), total, where)
    if failing:
        text += "; %s do not" % ", ".join(failing)
    if versions:
        text += "; versions %s" % versions
    build = info["build"]
    if info["mismatches"]:
        text += "; MISMATCH: %s" % "; ".join(info["mismatches"])
    elif info["versions"]:
        text += ", matching TensorFlow's build (CUDA %s, cuDNN %s)" % (
            build.get("cuda_version"),
            build.get("cudnn_version"),
        )
    elif info.get("versions_error"):
        text += "; reading their versions failed: %s" % info["versions_error"]
    return text


def environment_lines(info):
    """The machine as the report and the log describe it (one line each)."""
    build = info["build"]
    lines = []
    if info["smi_properties"]:
        lines.append(
            "nvidia-smi: "
            + "; ".join(
                "%s, driver %s, compute capability %s"
                % (p.get("name"), p.get("driver_version"), p.get("compute_cap") or "n/a")
                for p in info["smi_properties"]
            )
        )
    elif info["nvidia_smi"]:
        lines.append("nvidia-smi: %s, lists no GPU" % info["nvidia_smi"])
    else:
        lines.append("nvidia-smi: not found (no NVIDIA driver)")
    lines.append(
        "TensorFlow %s, built with CUDA %s, cuDNN %s, compute capabilities %s"
        % (
            info["tensorflow"],
            build.get("cuda_version"),
            build.get("cudnn_version"),
            " ".join(build.get("cuda_compute_capabilities") or []),
        )
    )
    lines.append("CUDA libraries: %s" % library_summary(info))
    lines.append(
        "XLA: %s"
        % (
            info["xla_problem"]
            or "--xla_gpu_cuda_data_dir=%s has bin/ptxas and nvvm/libdevice" % info["xla_data_dir"]
        )
    )
    lines.append(
        "TensorFlow's GPUs: %s"
        % (
            "; ".join(
                "%s (compute capability %s)"
                % (g["name"], ".".join(str(n) for n in g["compute_capability"] or []) or "n/a")
                for g in info["gpus"]
            )
            or "none"
        )
    )
    lines.extend(info["driver_problems"])
    return lines


def no_gpu_line(info):
    """The one line of a machine without a GPU."""
    return (
        "gpu_check: no GPU on this machine (%s; TensorFlow lists none): %s; nothing else to "
        "check without a GPU"
        % (
            "nvidia-smi lists none" if info["nvidia_smi"] else "no nvidia-smi",
            library_summary(info),
        )
    )


def no_gpu_status(info):
    """Exit status of the no-GPU path: 1 if what was checked is broken (versions that do
    not match the build, or a partial set of libraries), else 0."""
    partial = 0 < len(info["failing"]) < len(info["libraries"])
    return 1 if info["mismatches"] or partial else 0


# The measurements (each in its own process).


def _load_config(workdir):
    with open(os.path.join(workdir, "config.json")) as f:
        return json.load(f)


def _set_policy(config, mode):
    import tensorflow as tf

    if mode in (MIXED, MIXED_XLA):
        tf.keras.mixed_precision.set_global_policy(config["mixed_policy"])


def _install_builder(config, mode):
    """Makes :func:`benchmarks._build_model` build every row of this check, and every
    model with XLA under ``mixed_xla`` (as ``onmt-main --jit_compile``:
    ``model.set_jit_compile(True)``).

    A row of a family of another architecture than the Transformer (the RNNs) carries
    its sizes in its builder arguments (:func:`check_rows`); the benchmark builds the
    others at its Transformer size.
    """
    build = benchmarks._build_model

    def _build(system, bench_config):
        from ldr_opennmt import registry

        row = benchmarks._as_row(system, bench_config)
        family = registry.get(row.family) if row.family else None
        if family is not None and family.architecture != TRANSFORMER:
            model = family.build(**row.kwargs)
        else:
            model = build(row, bench_config)
        if mode == MIXED_XLA:
            model.set_jit_compile(True)
        return model

    benchmarks._build_model = _build


def _gpu_memory_mib():
    import tensorflow as tf

    if not tf.config.list_logical_devices("GPU"):
        return None
    return tf.config.experimental.get_memory_info("GPU:0")["peak"] / (1024 * 1024)


def _measure(config, mode, system):
    """One family in one mode: :func:`benchmarks._measure_training`, plus the loss check."""
    _set_policy(config, mode)
    _install_builder(config, mode)
    bench_config = dict(config)
    bench_config["steps"] = steps_of(config, mode, system)
    result = benchmarks._measure_training(bench_config, system)
    result["finite_loss"] = math.isfinite(result["last_loss"])
    result["gpu_peak_mib"] = _gpu_memory_mib()
    result["policy"] = config["mixed_policy"] if mode != FP32 else "float32"
    return result


def _snapshot(variables):
    return [v.numpy().copy() for v in variables]


def _frozen(config, system):
    """Float16 + XLA: the parameters of absent domains stay bit-identical.

    Trains ``frozen_steps`` steps on batches of every domain (so Adam has moments for
    every region), then ``frozen_steps`` steps on batches of :data:`PRESENT_DOMAIN` only,
    and compares the other domains' regions before and after the second phase.
    """
    import numpy as np
    import opennmt
    import tensorflow as tf

    from ldr_opennmt import compat

    _set_policy(config, MIXED_XLA)
    _install_builder(config, MIXED_XLA)
    tf.random.set_seed(config["seed"])
    model = benchmarks._build_model(system, config)
    params = {"optimizer": "Adam", "learning_rate": 1e-3}
    params["domain_training"] = benchmarks._as_row(system, config).domain_training
    model.initialize(benchmarks._data_config(system, config), params=params)
    optimizer = model.get_optimizer()
    trainer = opennmt.training.Trainer(model, optimizer)
    paths = config["paths"]
    present = os.path.join(config["workdir"], "data", "dom_present")
    if not os.path.exists(present):
        benchmarks.write_labels(present, config["data_sentences"], [PRESENT_DOMAIN], 1)

    def _dataset(labels):
        dataset = model.examples_inputter.make_training_dataset(
            [paths["src"], labels],
            paths["tgt"],
            batch_size=config["batch"],
            batch_type="examples",
            shuffle_buffer_size=1,
            length_bucket_width=None,
        )
        return dataset.take(16).cache().repeat()

    def _train(dataset):
        losses = []
        for loss in compat.training_steps(trainer, dataset, accum_steps=1):
            losses.append(loss)
            if len(losses) == config["frozen_steps"]:
                return losses
        return losses

    losses = _train(_dataset(benchmarks._label_file(system, config)))
    regions = model.domain_weights()
    present_id = benchmarks.DOMAINS.index(PRESENT_DOMAIN)
    absent = [k for k in regions if k != present_id]
    before = {k: _snapshot(regions[k]) for k in regions}
    losses += _train(_dataset(present))
    changed = {
        k: sum(not np.array_equal(v.numpy(), b) for v, b in zip(regions[k], before[k]))
        for k in regions
    }
    return {
        "regions": len(regions),
        "absent_regions": len(absent),
        "absent_variables": sum(len(regions[k]) for k in absent),
        "absent_changed": sum(changed[k] for k in absent),
        "present_variables": len(regions.get(present_id, [])),
        "present_changed": changed.get(present_id, 0),
        "compute_dtype": model.compute_dtype,
        "finite_loss": all(math.isfinite(loss) for loss in losses),
        "loss_scale": float(getattr(trainer._optimizer, "loss_scale", float("nan"))),
    }


def _translate(config):
    """An LDR SavedModel and its folded CTranslate2 models translate with labels on the GPU
    (the benchmark's inference row of :data:`TRANSLATE_FAMILY`)."""
    import ctranslate2
    import tensorflow as tf

    from ldr_opennmt.serving import client, ct2_export

    tf.random.set_seed(config["seed"])
    row = benchmarks.Row(**config["translate"])
    system = row.name
    model = benchmarks._build_model(row, config)
    model.initialize(
        benchmarks._data_config(row, config),
        params={
            "beam_width": config["beam"],
            "maximum_decoding_length": config["decode_length"],
            "minimum_decoding_length": config["decode_length"],
        },
    )
    model.create_variables()
    savedmodel = os.path.join(config["workdir"], "savedmodel", system)
    ct2_dir = os.path.join(config["workdir"], "ct2", system)
    domains = benchmarks.DOMAINS[:2]
    model.export(savedmodel)
    ct2_export.export(model, ct2_dir, domains=domains)
    sentences = [batch for batch in benchmarks._inference_batches(config)][0]
    result = {"sentences": len(sentences), "domains": domains}

    translator = client.Translator(savedmodel)
    outputs = {}
    start = time.perf_counter()
    for domain in domains:
        outputs[domain] = translator(sentences, [domain] * len(sentences))
    result["savedmodel_s"] = time.perf_counter() - start
    result["savedmodel_on_gpu"] = bool(tf.config.list_logical_devices("GPU")) and (
        tf.config.experimental.get_memory_info("GPU:0")["peak"] > 0
    )
    result["savedmodel_lengths"] = sorted({len(o) for d in domains for o in outputs[d]})
    result["labels_change_output"] = outputs[domains[0]] != outputs[domains[1]]

    result["ct2_cuda_devices"] = ctranslate2.get_cuda_device_count()
    for compute_type in ("float32", "float16"):
        key = "ct2_%s" % compute_type
        try:
            ct2 = ctranslate2.Translator(
                os.path.join(ct2_dir, domains[0]), device="cuda", compute_type=compute_type
            )
            start = time.perf_counter()
            hypotheses = [
                r.hypotheses[0]
                for r in ct2.translate_batch(
                    sentences,
                    beam_size=config["beam"],
                    max_decoding_length=config["decode_length"],
                    min_decoding_length=config["decode_length"],
                )
            ]
            result[key] = {
                "seconds": time.perf_counter() - start,
                "lengths": sorted({len(h) for h in hypotheses}),
                "agreement": benchmarks.agreement(hypotheses, outputs[domains[0]]),
            }
        except Exception as e:  # Reported, not raised: the other checks still run.
            result[key] = {"error": "%s: %s" % (type(e).__name__, e)}
    return result


def run_task(task, workdir):
    """Runs one task of a child process and writes its result file."""
    kind, _, rest = task.partition(":")
    if kind == "config":
        result = _config_task(workdir)
    elif kind == "probe":
        result = _probe_tensorflow()
    elif kind == "versions":
        result = _probe_versions()
    elif kind == "train":
        mode, _, system = rest.partition(":")
        result = _measure(_load_config(workdir), mode, system)
    elif kind == "frozen":
        result = _frozen(_load_config(workdir), rest)
    elif kind == "translate":
        result = _translate(_load_config(workdir))
    else:
        raise ValueError("unknown task %r" % task)
    with open(_result_path(workdir, task), "w") as f:
        json.dump(result, f)


def _result_path(workdir, task):
    return os.path.join(workdir, "results", task.replace(":", "-") + ".json")


def run_child(task, workdir, timeout=None):
    """Runs :func:`run_task` in a new process; its result, or ``{"error": ...}``."""
    for name in ("results", "logs"):
        os.makedirs(os.path.join(workdir, name), exist_ok=True)
    log_path = os.path.join(workdir, "logs", task.replace(":", "-") + ".log")
    command = [
        sys.executable,
        "-m",
        "ldr_experiments.gpu_check",
        "--one",
        task,
        "--workdir",
        workdir,
    ]
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("PYTHONWARNINGS", "ignore")
    start = time.perf_counter()
    try:
        with open(log_path, "w") as log:
            status = subprocess.run(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=timeout
            ).returncode
    except subprocess.TimeoutExpired:
        return {"error": "timed out after %d s (log: %s)" % (timeout, log_path)}
    elapsed = time.perf_counter() - start
    if status != 0:
        lines = [line for line in benchmarks._read(log_path).splitlines() if line.strip()]
        error = lines[-1] if lines else "exit status %d" % status
        return {
            "error": "%s (exit status %d after %.0f s; log: %s)"
            % (error, status, elapsed, log_path)
        }
    with open(_result_path(workdir, task)) as f:
        result = json.load(f)
    if isinstance(result, dict):
        result["seconds_total"] = elapsed
    return result


# The report.


def _cell_error(entry):
    return "failed: %s" % entry["error"].replace("|", "/")[:200]


def training_table(config, results):
    """One row per family: ms/step, tokens/s and the ratio to vanilla in each mode."""
    modes = config["modes"]
    headers = ["system", "parameters"]
    for mode in modes:
        name = MODE_NAMES[mode]
        headers += ["%s ms/step" % name, "%s tokens/s" % name, "%s tokens/s × vanilla" % name]
    headers += ["long run", "loss per sentence after it", "peak GPU MiB in it"]
    rows = []
    titles = _titles(config)
    for system in config["systems"]:
        row = [titles[system], "n/a"]
        for mode in modes:
            entry = results.get(mode, {}).get(system)
            base = results.get(mode, {}).get(VANILLA) or {}
            if mode == MIXED_XLA and system in config["no_xla"]:
                row += ["n/a (no XLA for this family)", "n/a", "n/a"]
                continue
            if entry is None or "error" in entry:
                row += [_cell_error(entry) if entry else "n/a", "n/a", "n/a"]
                continue
            row[1] = "{:,}".format(entry["params"])
            row += [
                benchmarks.format_number(entry["ms_per_step"]),
                benchmarks.format_number(entry["tokens_per_s"], 0),
                benchmarks.format_ratio(
                    benchmarks.ratio(entry["tokens_per_s"], base.get("tokens_per_s"))
                ),
            ]
        last = long_mode(config, system)
        if last is None:
            row += ["none (no XLA for this family)", "n/a", "n/a"]
            rows.append(row)
            continue
        entry = results.get(last, {}).get(system) or {}
        row.append("%s, %d steps" % (MODE_NAMES[last], steps_of(config, last, system)))
        row.append(
            benchmarks.format_number(entry.get("last_loss"), 3) if "error" not in entry else "n/a"
        )
        row.append(benchmarks.format_number(entry.get("gpu_peak_mib"), 0))
        rows.append(row)
    return benchmarks.markdown_table(headers, rows)


def long_mode(config, system):
    """The mode of a family's long run (``--steps`` steps, loss checked): mixed precision +
    XLA, else mixed precision, else its last mode; ``None`` if it trains in none of the
    run's modes (``--modes mixed_xla`` for a family that refuses XLA)."""
    modes = [mode for mode in config["modes"] if (mode, system) in _trained(config)]
    for mode in (MIXED_XLA, MIXED):
        if mode in modes:
            return mode
    return modes[-1] if modes else None


def _trained(config):
    """``[(mode, system)]`` of a run's training tasks, XLA left out for the rows whose
    model refuses it (``config["no_xla"]``)."""
    return [
        (mode, system)
        for mode in config["modes"]
        for system in config["systems"]
        if not (mode == MIXED_XLA and system in config["no_xla"])
    ]


def steps_of(config, mode, system):
    """Timed steps of one family in one mode: ``--steps`` for its long run, else
    ``--timing_steps``."""
    return config["steps"] if mode == long_mode(config, system) else config["timing_steps"]


def tasks_of(config):
    """The training tasks (``train:MODE:SYSTEM``), XLA left out for the rows whose model
    refuses it (``config["no_xla"]``)."""
    return ["train:%s:%s" % task for task in _trained(config)]


def evaluate_checks(info, config, results):
    """``[(check, "PASS" | "FAIL", detail)]`` of a GPU run."""
    checks = []
    titles = _titles(config)
    gpus = info["gpus"]
    checks.append(
        (
            "TensorFlow sees the GPU",
            "PASS" if gpus else "FAIL",
            "; ".join(g["name"] for g in gpus) or "none",
        )
    )
    checks.append(
        (
            "CUDA libraries load, versions match TensorFlow's build",
            "PASS" if not info["failing"] and not info["mismatches"] else "FAIL",
            library_summary(info),
        )
    )
    needs_xla = MIXED_XLA in config["modes"]
    checks.append(
        (
            "XLA finds ptxas and libdevice",
            "PASS" if not info["xla_problem"] else ("FAIL" if needs_xla else "n/a"),
            info["xla_problem"] or info["xla_data_dir"],
        )
    )
    for mode in config["modes"]:
        entries = results.get(mode, {})
        bad = [
            "%s (%s)" % (titles[s], e.get("error") or "loss %s" % e.get("last_loss"))
            for s, e in entries.items()
            if "error" in e or not e.get("finite_loss")
        ]
        long_runs = sorted({steps_of(config, mode, s) for s in entries})
        detail = "%d of %d families" % (len(entries) - len(bad), len(entries))
        no_xla = [titles[s] for s in config["systems"] if s in config["no_xla"]]
        if mode == MIXED_XLA and no_xla:
            detail += " (not %s: ldr-opennmt refuses --jit_compile for them)" % ", ".join(no_xla)
        checks.append(
            (
                "training, %s, %s steps, finite loss"
                % (MODE_NAMES[mode], " or ".join(str(n) for n in long_runs) or "0"),
                "PASS" if entries and not bad else "FAIL",
                detail + ("; failed: %s" % "; ".join(bad) if bad else ""),
            )
        )
    frozen = results.get("frozen", {})
    if frozen:
        bad, details = [], []
        half = config["mixed_policy"][len("mixed_") :]
        for system, entry in frozen.items():
            if "error" in entry:
                bad.append("%s: %s" % (titles[system], entry["error"]))
                continue
            ok = (
                entry["absent_changed"] == 0
                and entry["absent_variables"] > 0
                and entry["present_changed"] == entry["present_variables"]
                and entry["compute_dtype"] == half
                and entry["finite_loss"]
            )
            details.append(
                "%s: %d absent-domain variables, %d changed; %d of %d present-domain "
                "variables changed; compute %s"
                % (
                    titles[system],
                    entry["absent_variables"],
                    entry["absent_changed"],
                    entry["present_changed"],
                    entry["present_variables"],
                    entry["compute_dtype"],
                )
            )
            if not ok:
                bad.append(titles[system])
        checks.append(
            (
                "%s + XLA: absent domains' parameters bit-identical" % half,
                "FAIL" if bad else "PASS",
                "; ".join(details + (["failed: %s" % ", ".join(bad)] if bad else [])),
            )
        )
    translate = results.get("translate")
    if translate is not None:
        if "error" in translate:
            checks.append(
                ("LDR SavedModel and folded CTranslate2 on the GPU", "FAIL", translate["error"])
            )
        else:
            length = config["decode_length"]
            ok = translate["savedmodel_on_gpu"] and translate["savedmodel_lengths"] == [length]
            checks.append(
                (
                    "LDR SavedModel translates with labels on the GPU",
                    "PASS" if ok else "FAIL",
                    "%d sentences × labels %s in %.2f s; outputs of %s tokens; the label "
                    "changes the output: %s"
                    % (
                        translate["sentences"],
                        "/".join(translate["domains"]),
                        translate["savedmodel_s"],
                        translate["savedmodel_lengths"],
                        translate["labels_change_output"],
                    ),
                )
            )
            for compute_type in ("float32", "float16"):
                entry = translate["ct2_%s" % compute_type]
                if "error" in entry:
                    checks.append(
                        (
                            "folded CTranslate2 (%s) on the GPU" % compute_type,
                            "FAIL",
                            entry["error"],
                        )
                    )
                    continue
                same = entry.get("agreement")
                checks.append(
                    (
                        "folded CTranslate2 (%s) translates label %s on the GPU"
                        % (compute_type, translate["domains"][0]),
                        "PASS" if entry["lengths"] == [length] else "FAIL",
                        "%.2f s; outputs of %s tokens; same output as the SavedModel: %s"
                        % (
                            entry["seconds"],
                            entry["lengths"],
                            "n/a" if same is None else "%.0f%%" % (100 * same),
                        ),
                    )
                )
    return checks


def format_report(info, config, results, checks, machine, elapsed=None):
    """The markdown report, in the format of BENCHMARKS.md."""
    gpu_names = ", ".join(g["name"] for g in info["gpus"]) or "no GPU"
    size = config["size"]
    lines = [
        "# GPU check: %s" % gpu_names,
        "",
        "- date: %s" % machine["date"],
        "- GPU: %s" % "; ".join(environment_lines(info)[:1] + environment_lines(info)[4:5]),
        "- machine: %s (%s), %s, %s"
        % (machine["cpu"], machine["arch"], machine["cores"], machine["memory"]),
        "- software: Python %s, TensorFlow %s, OpenNMT-tf %s, CTranslate2 %s; %s"
        % (
            machine["python"],
            machine["tensorflow"],
            machine["opennmt"],
            machine["ctranslate2"],
            environment_lines(info)[1],
        ),
        "- CUDA: %s; %s" % (library_summary(info), environment_lines(info)[3]),
        "- models: Transformer %d+%d layers, %d units, %d heads, FFN %d, dropout 0.1; RNNs: "
        "embeddings %d, hidden %d, 1 layer; vocabularies of %d words; %d domains"
        % (
            size["num_layers"],
            size["num_layers"],
            size["num_units"],
            size["num_heads"],
            size["ffn_inner_dim"],
            (QUICK_RNN_SIZE if config["quick"] else RNN_SIZE)["embedding_size"],
            (QUICK_RNN_SIZE if config["quick"] else RNN_SIZE)["hidden_size"],
            config["vocab"],
            len(benchmarks.DOMAINS),
        ),
        "- data and step: `ldr_experiments/benchmarks.py`'s (synthetic, every sentence %d tokens, "
        "one domain "
        "per batch of %d sentences, 16 batches cached; OpenNMT-tf's `Trainer` step); one batch "
        "shape, so XLA compiles each step function once, in the %d warm-up steps; median step "
        "time of %d steps after them (%d in each family's long run: mixed precision + XLA, or "
        "mixed precision for the RNNs); mixed precision is `%s` with OpenNMT-tf's loss-scale "
        "optimizer, XLA is `model.set_jit_compile(True)` (`--jit_compile`); the loss is "
        "OpenNMT-tf's step loss (summed over a sentence's tokens, averaged over sentences)"
        % (
            config["length"],
            config["batch"],
            config["warmup"],
            config["timing_steps"],
            config["steps"],
            config["mixed_policy"],
        ),
        "- every measurement runs in its own process, one after the other; peak GPU MiB is "
        "TensorFlow's allocator peak (`tf.config.experimental.get_memory_info`)",
    ]
    if config["quick"]:
        lines.append("- `--quick`: tiny sizes, to check that the check runs; not figures")
    if not info["gpus"]:
        lines.append("- **no GPU**: this run used the CPU (`--allow_cpu`); not GPU figures")
    lines += [
        "",
        "## Checks",
        "",
        benchmarks.markdown_table(
            ["check", "result", "detail"],
            [[c, r, d.replace("|", "/")] for c, r, d in checks],
            align="lll",
        ),
        "",
        "## Training",
        "",
        "tokens/s counts the source and target tokens of a step; × vanilla is the ratio to the "
        "stock OpenNMT-tf Transformer of the same size in the same mode.",
        "",
        training_table(config, results),
    ]
    if elapsed is not None:
        lines += ["", "Run time: %.1f min." % (elapsed / 60)]
    return "\n".join(lines) + "\n"


# The rows (a TensorFlow process: the registry builds tiny models).


def _xla_refusal(family):
    """Why :obj:`family`'s model refuses XLA (``set_jit_compile``), or ``None``."""
    from ldr_opennmt.errors import UserError

    try:
        family.build_tiny().set_jit_compile(True)
    except UserError as e:
        return str(e)
    return None


def _own_row(family, name, title, size, **fields):
    """A row of :obj:`family` that the benchmark's table does not have, trained in its
    default mode on the benchmark's domains; at :obj:`size` (its builder arguments) for
    a family of another architecture than the Transformer."""
    from ldr_opennmt import registry

    caps = registry.capabilities(family.name)
    model = family.build_tiny()
    values = dict(
        family=family.name,
        family_title=family.title,
        kwargs=dict(size) if family.architecture != TRANSFORMER else {},
        domains=list(benchmarks.DOMAINS),
        domain_training=caps.default_domain_training,
        tf=False,
        model=name,
        labels=(
            benchmarks.FEED_NONE if caps.labels == registry.LABEL_NONE else benchmarks.FEED_DOMAIN
        ),
        domain_tokens=isinstance(getattr(type(model), "domain_tokens", None), property),
    )
    values.update(fields)
    return benchmarks.Row(name, title, **values)


def check_rows(table, rnn_size):
    """The rows this check trains, from the family registry (none is written here).

    Args:
      table: The benchmark's row table (``benchmarks.build_rows``).
      rnn_size: The size (builder arguments) of the families of another architecture.

    Returns:
      A list of ``benchmarks.Row``, vanilla first: the training rows of :obj:`table`;
      after the rows of a family whose builder takes :data:`TARGET_SIDE`, its model with
      that argument (``PREFIX_target``, PREFIX its name's first word), in the family's
      default training mode; then a row for each registered family with no row in
      :obj:`table` (the RNNs), named after it, in its default training mode.
    """
    import inspect

    from ldr_opennmt import registry

    trained = [row for row in table if row.train]
    rows = []
    for index, row in enumerate(trained):
        rows.append(row)
        following = trained[index + 1].family if index + 1 < len(trained) else None
        if row.family is None or following == row.family:
            continue
        family = registry.get(row.family)
        if TARGET_SIDE in inspect.signature(family.builder).parameters:
            name = "%s_target" % family.name.split("_")[0]
            title = "%s, source and target" % family.title
            rows.append(_own_row(family, name, title, rnn_size, kwargs={TARGET_SIDE: True}))
    measured = {row.family for row in table}
    for family in registry.families():
        if family.name not in measured:
            rows.append(_own_row(family, family.name, family.title, rnn_size))
    return rows


def translate_row(table):
    """The row of the translation check: :data:`TRANSLATE_FAMILY`'s SavedModel row."""
    return next(r for r in table if r.family == TRANSLATE_FAMILY and r.tf and not r.ensemble)


def row_checks(rows):
    """What the rows get besides training, from their families' capabilities.

    Returns:
      ``(no_xla, frozen)``: the names of the rows whose model refuses XLA (no mixed
      precision + XLA run), and of those whose absent domains' parameters must stay
      bit-identical: their family has domain parameters that each sentence selects by its
      label (labels needed), trains without a frozen base (``requires_base``: its base
      model is frozen by design) and takes XLA.
    """
    from ldr_opennmt import registry

    no_xla, frozen = [], []
    for row in rows:
        if row.family is None:
            continue
        family = registry.get(row.family)
        caps = registry.capabilities(family.name)
        if _xla_refusal(family):
            no_xla.append(row.name)
        elif (
            caps.domain_parameters
            and caps.labels == registry.LABEL_NEEDED
            and not caps.requires_base
        ):
            frozen.append(row.name)
    return no_xla, frozen


def _titles(config):
    """``{row name: title}`` of a run's rows."""
    return {row.name: row.title for row in benchmarks.config_rows(config)}


# The driver.


def make_config(args, workdir):
    """The configuration shared with the child processes: :func:`benchmarks.base_config`'s
    (sizes, data, inference settings), the rows that ``--families`` selects
    (:func:`check_rows`) and this check's settings.

    Reads the registry, hence imports TensorFlow: :func:`run_checks` calls it in a child
    process.

    Raises:
      ValueError: for a ``--families`` name that selects no row.
    """
    values = dict(benchmarks.QUICK if args.quick else benchmarks.DEFAULTS)
    for key in ("layers", "units", "heads", "vocab", "length", "batch", "warmup", "steps"):
        values[key] = getattr(args, key)
    bench_args = argparse.Namespace(
        threads=os.cpu_count() or 1,
        quantization=None,
        seed=args.seed,
        quick=args.quick,
        parts=[benchmarks.TRAIN],
        families=list(args.families or []),
        **values,
    )
    config = benchmarks.base_config(bench_args, workdir)
    table = benchmarks.build_rows(config["size"])
    rows = check_rows(table, QUICK_RNN_SIZE if args.quick else RNN_SIZE)
    for name in args.families or []:
        try:
            benchmarks.select_rows(rows, [name])
        except ValueError:
            raise ValueError(
                "--families: %r names no row of this check (registered families, groups or "
                "rows: %s)" % (name, ", ".join(benchmarks.family_names(rows)))
            ) from None
    selected = benchmarks.select_rows(rows, args.families)
    no_xla, frozen = row_checks(selected)
    config.update(
        rows=[dataclasses.asdict(row) for row in selected],
        systems=[row.name for row in selected],
        no_xla=no_xla,
        frozen_systems=frozen,
        translate=dataclasses.asdict(translate_row(table)),
        timing_steps=args.timing_steps,
        frozen_steps=args.frozen_steps,
        modes=list(args.modes),
        mixed_policy=args.mixed_policy,
    )
    return config


def _config_task(workdir):
    """The child process of :func:`make_config`: the arguments from ``args.json``."""
    with open(os.path.join(workdir, "args.json")) as f:
        args = argparse.Namespace(**json.load(f))
    try:
        return make_config(args, workdir)
    except ValueError as e:
        return {"usage_error": str(e)}


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
    _log("%d systems: %s" % (len(config["systems"]), ", ".join(config["systems"])))
    sentences = max(3000, config["sentences"], 16 * config["batch"])
    config["data_sentences"] = sentences
    config["paths"] = benchmarks.write_data(
        os.path.join(workdir, "data"),
        config["vocab"],
        sentences,
        config["length"],
        config["seed"],
        block=config["batch"],
    )
    with open(os.path.join(workdir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    tasks = tasks_of(config)
    if not args.skip_frozen:
        tasks += ["frozen:%s" % s for s in config["frozen_systems"]]
    if not args.skip_translate:
        tasks.append("translate")
    results = {}
    for number, task in enumerate(tasks, start=1):
        _log("%d/%d %s ..." % (number, len(tasks), task))
        result = run_child(task, workdir, timeout=args.task_timeout)
        kind, _, rest = task.partition(":")
        if kind == "train":
            mode, _, system = rest.partition(":")
            results.setdefault(mode, {})[system] = result
        elif kind == "frozen":
            results.setdefault("frozen", {})[rest] = result
        else:
            results[kind] = result
        if "error" in result:
            _log("%s failed: %s" % (task, result["error"]))
        else:
            _log("%s done in %.0f s" % (task, result.get("seconds_total", 0)))
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
    name = (info["gpus"][0]["name"] if info["gpus"] else "cpu").lower()
    slug = re.sub(r"[^a-z0-9]+", "-", name).strip("-")
    return os.path.join(
        ROOT, "results", "gpu_check-%s-%s.md" % (slug, time.strftime("%Y%m%d-%H%M"))
    )


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
    gpu = gpu_module()
    info = probe_machine(workdir)
    for line in environment_lines(info):
        _log(line)
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
            print(no_gpu_line(info))
            return no_gpu_status(info)
    machine = benchmarks.machine_description()
    config, results = run_checks(args, info, workdir)
    checks = evaluate_checks(info, config, results)
    report = format_report(
        info, config, results, checks, machine, elapsed=time.perf_counter() - start
    )
    out = args.out or default_out(info)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    benchmarks.write_atomically(out, report)
    benchmarks.write_atomically(
        os.path.splitext(out)[0] + ".json",
        json.dumps({"machine": info, "config": config, "results": results}, indent=2, default=str),
    )
    sys.stdout.write(report)
    failed = [c for c, r, _ in checks if r == "FAIL"]
    _log("report written to %s" % out)
    if failed:
        _log("FAILED: %s" % "; ".join(failed))
        return 1
    _log("every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
