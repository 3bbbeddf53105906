"""A child process of the GPU check (``python -m ldr_experiments.gpu_check --one TASK``) and
its result file."""

import json
import os
import subprocess
import sys
import time

from ldr_experiments import machine

# The measurements (each in its own process).


def load_config(workdir):
    with open(os.path.join(workdir, "config.json")) as f:
        return json.load(f)


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
        lines = [line for line in machine.read_text(log_path).splitlines() if line.strip()]
        error = lines[-1] if lines else "exit status %d" % status
        return {
            "error": "%s (exit status %d after %.0f s; log: %s)"
            % (error, status, elapsed, log_path)
        }
    with open(result_path(workdir, task)) as f:
        result = json.load(f)
    if isinstance(result, dict):
        result["seconds_total"] = elapsed
    return result


def result_path(workdir, task):
    return os.path.join(workdir, "results", task.replace(":", "-") + ".json")
