"""What this machine has, each probe in a child process: nvidia-smi, TensorFlow's build and
GPUs, the CUDA libraries it loads and their versions, XLA's ptxas and libdevice; and how the
report and the log describe it."""

import os
import re
import shutil

from ldr_experiments import standalone
from ldr_experiments.gpu_check.child import run_child
from ldr_experiments.gpu_check.plan import PROG


def gpu_module():
    """:mod:`ldr_opennmt.gpu` loaded from its file, without the package (whose
    ``__init__`` imports TensorFlow)."""
    return standalone.module("gpu")


# What this machine has (each probe in a child process).


def probe_tensorflow():
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


def probe_versions():
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
