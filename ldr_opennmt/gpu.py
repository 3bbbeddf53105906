"""GPUs: what the training stack's TensorFlow needs to use one, and the refusal of a silent
CPU fallback.

TensorFlow (``tf.sysconfig.get_build_info()``: CUDA 11.8 and cuDNN 8 for 2.13.1 on Python 3.11,
CUDA 12.5 and cuDNN 9 for 2.21 on Python 3.12; :data:`STACK`) dlopens :data:`CUDA_LIBRARIES`
by name when it starts; if one of them fails to load it registers no GPU and runs everything
on the CPU, with one log line that ``TF_CPP_MIN_LOG_LEVEL=2`` hides. A training asked to run
on GPUs then runs, hundreds of times slower, on the CPU. :func:`check_command_line` turns that
into a one-line error naming the libraries that fail to load and the fix
(``source run/setup_env.sh --gpu``, docs/gpu.md).

Nothing here imports TensorFlow at module level (only :func:`check_gpus_available` does,
to list the GPUs), so the helpers run in an environment without it.
"""

import collections
import ctypes
import os
import re
import shutil
import subprocess
import sys

#: What a training stack's TensorFlow needs of CUDA: its version, the libraries it loads at
#: start (any one missing means no GPU), the lowest Linux driver CUDA runs on (minor-version
#: compatibility), and the lowest driver that compiles its PTX (the CUDA version's own),
#: needed on GPUs of compute capability >= ``ptx_only_capability``, for which TensorFlow ships
#: PTX and no native code.
CudaStack = collections.namedtuple(
    "CudaStack",
    "tensorflow cuda libraries minimum_driver ptx_jit_driver ptx_only_capability",
)

#: The stacks (docs/installation.md), by Python version.
STACKS = {
    # TensorFlow 2.13.1's native code stops at sm_75 (PTX compute_80 above); libcudart's
    # soname is 11.0 for every CUDA 11 minor version.
    (3, 11): CudaStack(
        "2.13.1",
        "11.8",
        (
            "libcudart.so.11.0",
            "libcublas.so.11",
            "libcublasLt.so.11",
            "libcufft.so.10",
            "libcusolver.so.11",
            "libcusparse.so.11",
            "libcudnn.so.8",
        ),
        "450.80.02",
        "520.61.05",
        (8, 0),
    ),
    # TensorFlow 2.21.0: native code sm_60 to sm_89, PTX compute_90 above; CUDA 12.5's own
    # driver is 555.42.02.
    (3, 12): CudaStack(
        "2.21.0",
        "12.5",
        (
            "libcudart.so.12",
            "libcublas.so.12",
            "libcublasLt.so.12",
            "libcufft.so.11",
            "libcusolver.so.11",
            "libcusparse.so.12",
            "libcudnn.so.9",
        ),
        "525.60.13",
        "555.42.02",
        (9, 0),
    ),
}
#: This Python's stack.
STACK = STACKS[(3, 12) if sys.version_info[:2] >= (3, 12) else (3, 11)]

#: The libraries TensorFlow loads at start.
CUDA_LIBRARIES = STACK.libraries

#: The command that installs and exposes them.
FIX = "source run/setup_env.sh --gpu"

MINIMUM_DRIVER = STACK.minimum_driver
PTX_JIT_DRIVER = STACK.ptx_jit_driver
PTX_ONLY_CAPABILITY = STACK.ptx_only_capability
_PTX_CAPABILITY = "%d.%d" % PTX_ONLY_CAPABILITY


def library(prefix):
    """The name of :data:`CUDA_LIBRARIES`' library :obj:`prefix` (``"libcudnn"``)."""
    return next(name for name in CUDA_LIBRARIES if name.startswith(prefix + ".so."))


#: Setting this environment variable to 1 lets a run asked to use GPUs go on without any.
ALLOW_CPU_ENV = "LDR_ALLOW_CPU"

#: Run types that compute (a GPU machine running them on the CPU is a silent fallback).
COMPUTE_RUN_TYPES = ("train", "eval", "infer", "score", "predict_domains")
#: The commands of this package that run ``onmt-main``'s main with its Runner.
PACKAGE_COMMANDS = ("ldr-main",)


# Versions and drivers.


def parse_version(text):
    """``"450.80.02"`` -> ``(450, 80, 2)``; ``None`` if :obj:`text` holds no number."""
    numbers = re.findall(r"\d+", text or "")
    return tuple(int(n) for n in numbers) if numbers else None


def required_driver(compute_capability=None):
    """The lowest NVIDIA driver the stack's TensorFlow (its CUDA) needs on Linux.

    Args:
      compute_capability: The GPU's ``(major, minor)`` or ``"8.0"``, or ``None`` if
        unknown.
    """
    if isinstance(compute_capability, str):
        compute_capability = parse_version(compute_capability)
    if compute_capability is not None and tuple(compute_capability) >= PTX_ONLY_CAPABILITY:
        return PTX_JIT_DRIVER
    return MINIMUM_DRIVER


def driver_problem(driver_version, compute_capability=None):
    """One line saying the driver is too old (found and needed), or ``None`` if it is not.

    Args:
      driver_version: What ``nvidia-smi --query-gpu=driver_version`` gave.
      compute_capability: The GPU's compute capability (``"9.0"`` or a tuple), if known.
    """
    found = parse_version(driver_version)
    needed = required_driver(compute_capability)
    if found is None or found >= parse_version(needed):
        return None
    if needed == MINIMUM_DRIVER:
        return (
            "NVIDIA driver %s found; CUDA %s needs >= %s (>= %s on GPUs of compute "
            "capability %s and newer): update the driver"
            % (driver_version, STACK.cuda, MINIMUM_DRIVER, PTX_JIT_DRIVER, _PTX_CAPABILITY)
        )
    if not isinstance(compute_capability, str):
        compute_capability = ".".join(str(n) for n in compute_capability)
    return (
        "NVIDIA driver %s found; CUDA %s needs >= %s on this GPU (compute capability %s,"
        " whose TensorFlow %s kernels are compiled from PTX): update the driver"
        % (driver_version, STACK.cuda, PTX_JIT_DRIVER, compute_capability, STACK.tensorflow)
    )


# nvidia-smi.


def run_nvidia_smi(*args, timeout=30):
    """The standard output of ``nvidia-smi ARGS``, or ``None`` if it is missing or fails."""
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return None
    try:
        result = subprocess.run(
            [executable] + list(args),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None


def listed_gpus(nvidia_smi=None):
    """The GPUs ``nvidia-smi -L`` lists (its ``GPU i: NAME (UUID: ...)`` lines).

    Args:
      nvidia_smi: A callable run like :func:`run_nvidia_smi` (``nvidia_smi("-L")``
        returns the text, or ``None``); tests pass one to simulate a GPU.
    """
    output = (nvidia_smi or run_nvidia_smi)("-L")
    return [line.strip() for line in (output or "").splitlines() if line.startswith("GPU ")]


def gpu_properties(nvidia_smi=None):
    """``[{"name", "driver_version", "compute_cap"}]`` of each GPU, from nvidia-smi
    (``compute_cap`` is ``None`` with drivers older than 510, which lack the field)."""
    smi = nvidia_smi or run_nvidia_smi
    fields = ("name", "driver_version", "compute_cap")
    output = smi("--query-gpu=%s" % ",".join(fields), "--format=csv,noheader")
    if output is None:
        fields = fields[:2]
        output = smi("--query-gpu=%s" % ",".join(fields), "--format=csv,noheader")
    gpus = []
    for line in (output or "").splitlines():
        if not line.strip():
            continue
        values = [value.strip() for value in line.split(",")]
        gpu = dict(zip(fields, values))
        gpu.setdefault("compute_cap", None)
        gpus.append(gpu)
    return gpus


# The CUDA libraries.


def _load(name, loader):
    try:
        loader(name)
        return None
    except OSError as e:
        return str(e)


def failing_libraries(libraries=CUDA_LIBRARIES, loader=None):
    """The libraries of :obj:`libraries` that fail to load, in order.

    Args:
      libraries: Library names, loaded as the dynamic loader finds them
        (``LD_LIBRARY_PATH``), as TensorFlow does.
      loader: Loads one name or raises ``OSError`` (default: ``ctypes.CDLL``).

    Returns:
      A list of ``(name, error message)``.
    """
    loader = loader or ctypes.CDLL
    failures = []
    for name in libraries:
        error = _load(name, loader)
        if error is not None:
            failures.append((name, error))
    return failures


def loaded_path(name, maps_path="/proc/self/maps"):
    """The file a loaded library :obj:`name` was mapped from (Linux), or ``None``."""
    try:
        with open(maps_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split(None, 5)
                if len(fields) == 6:
                    path = fields[5].strip()
                    if os.path.basename(path) == name:
                        return path
    except OSError:
        pass
    return None


def library_report(libraries=CUDA_LIBRARIES):
    """``{name: path it loaded from, or None if it failed}`` for :obj:`libraries`."""
    report = {}
    for name in libraries:
        report[name] = loaded_path(name) if _load(name, ctypes.CDLL) is None else None
    return report


def _call_int(library, function, *args):
    value = ctypes.c_int()
    status = getattr(ctypes.CDLL(library), function)(*args, ctypes.byref(value))
    return value.value if status == 0 else None


def _cudart_version_from_path(path):
    """``"11.8"`` from the file libcudart was loaded from: the version of the wheel whose
    lib folder holds it (``site-packages/nvidia/cuda_runtime/lib``), or the real file name
    of a system install (``libcudart.so.11.8.89``); ``None`` if neither says."""
    if not path:
        return None
    match = re.search(r"libcudart\.so\.(\d+)\.(\d+)\.\d+$", os.path.realpath(path))
    if match:
        return "%s.%s" % match.groups()
    site_packages = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(path))))
    try:
        names = os.listdir(site_packages)
    except OSError:
        return None
    for name in names:
        match = re.match(r"nvidia_cuda_runtime_cu\d+-(\d+)\.(\d+)\.[^-]*\.dist-info$", name)
        if match:
            return "%s.%s" % match.groups()
    return None


def library_versions():
    """The versions of the CUDA libraries that load, read from the libraries themselves
    (no GPU needed): ``{"cudart": "11.8", "cudnn": "8.6.0", "cublas": "11.11.3", ...}``;
    a library that does not load is left out.

    The libraries are loaded first in TensorFlow's order (cuBLAS before cuDNN): cuDNN 8.6
    loads its sub-libraries on its first call, and if that loads cuBLAS too, cuBLAS's
    failed look-up of the optional libnvrtc.so makes cuDNN abort the process. Run this in
    a child process where an abort must not end the caller (:mod:`ldr_experiments.gpu_check`
    does).
    """
    versions = {}
    failed = {name for name, _ in failing_libraries()}
    readers = {
        # cudaRuntimeGetVersion(int*): 1000 * major + 10 * minor.
        "cudart": lambda: _call_int(library("libcudart"), "cudaRuntimeGetVersion"),
        # cufftGetVersion(int*): e.g. 10900.
        "cufft": lambda: _call_int(library("libcufft"), "cufftGetVersion"),
    }
    for name, read in readers.items():
        try:
            value = read()
        except (OSError, AttributeError):
            continue
        if value is None and name == "cudart":
            # Without a driver cudaRuntimeGetVersion fails (cudaErrorInsufficientDriver):
            # the version is then read from where the library came from.
            version = _cudart_version_from_path(loaded_path(library("libcudart")))
            if version:
                versions[name] = version
            continue
        if value is None:
            continue
        if name == "cudart":
            versions[name] = "%d.%d" % (value // 1000, value % 1000 // 10)
        else:
            versions[name] = "%d.%d.%d" % (value // 1000, value % 1000 // 100, value % 100)
    try:
        if failed & {library("libcudnn"), library("libcublas"), library("libcublasLt")}:
            raise OSError("not loaded")
        # size_t cudnnGetVersion(void): 1000 * major + 100 * minor + patch (cuDNN 8),
        # 10000 * major + 100 * minor + patch (cuDNN 9).
        cudnn = ctypes.CDLL(library("libcudnn"))
        cudnn.cudnnGetVersion.restype = ctypes.c_size_t
        value = cudnn.cudnnGetVersion()
        major = 1000 if value < 90000 else 10000
        versions["cudnn"] = "%d.%d.%d" % (value // major, value % major // 100, value % 100)
    except (OSError, AttributeError):
        pass
    # cublasGetProperty / cusolverGetProperty / cusparseGetProperty(type, int*):
    # type 0, 1, 2 = major, minor, patch (libraryPropertyType).
    for name, shared_object, function in (
        ("cublas", library("libcublas"), "cublasGetProperty"),
        ("cusolver", library("libcusolver"), "cusolverGetProperty"),
        ("cusparse", library("libcusparse"), "cusparseGetProperty"),
    ):
        try:
            parts = [_call_int(shared_object, function, ctypes.c_int(kind)) for kind in (0, 1, 2)]
        except (OSError, AttributeError):
            continue
        if None not in parts:
            versions[name] = "%d.%d.%d" % tuple(parts)
    return versions


def version_mismatches(versions, build_info):
    """What disagrees between the loaded libraries and TensorFlow's build.

    Args:
      versions: :func:`library_versions`.
      build_info: ``tf.sysconfig.get_build_info()`` (``cuda_version``, ``cudnn_version``).

    Returns:
      A list of one-line descriptions (empty: the loaded versions are those of the
      build; a library that does not load is not a mismatch).
    """
    mismatches = []
    cuda = build_info.get("cuda_version")
    if cuda and "cudart" in versions and versions["cudart"] != cuda:
        mismatches.append(
            "libcudart is CUDA %s, TensorFlow was built with CUDA %s" % (versions["cudart"], cuda)
        )
    cudnn = str(build_info.get("cudnn_version") or "")
    if cudnn and "cudnn" in versions:
        if parse_version(versions["cudnn"])[: len(parse_version(cudnn))] != parse_version(cudnn):
            mismatches.append(
                "libcudnn is cuDNN %s, TensorFlow was built with cuDNN %s"
                % (versions["cudnn"], cudnn)
            )
    return mismatches


def xla_data_dir(xla_flags=None):
    """The folder ``--xla_gpu_cuda_data_dir`` names in ``XLA_FLAGS``, or ``None``."""
    flags = os.environ.get("XLA_FLAGS", "") if xla_flags is None else xla_flags
    match = re.search(r"--xla_gpu_cuda_data_dir=(\S+)", flags)
    return match.group(1) if match else None


def xla_data_dir_problem(directory):
    """What XLA would miss in :obj:`directory` (``bin/ptxas``, ``nvvm/libdevice``), or
    ``None`` if it has both."""
    if directory is None:
        return "XLA_FLAGS has no --xla_gpu_cuda_data_dir (%s sets it)" % FIX
    missing = []
    if not os.access(os.path.join(directory, "bin", "ptxas"), os.X_OK):
        missing.append("bin/ptxas")
    libdevice = os.path.join(directory, "nvvm", "libdevice")
    if not (os.path.isdir(libdevice) and any(n.endswith(".bc") for n in os.listdir(libdevice))):
        missing.append("nvvm/libdevice/*.bc")
    if missing:
        return "--xla_gpu_cuda_data_dir=%s has no %s" % (directory, " and no ".join(missing))
    return None


# The refusal of a silent CPU fallback.


def _option_value(argv, name):
    """The value of ``--name V`` or ``--name=V`` (the last one), or ``None``."""
    value = None
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(name + "="):
            value = arg[len(name) + 1 :]
    return value


def _run_type(argv):
    for arg in argv:
        if arg in COMPUTE_RUN_TYPES or arg in ("export", "average_checkpoints", "update_vocab"):
            return arg
    return None


def gpus_hidden(environ=None):
    """Whether ``CUDA_VISIBLE_DEVICES`` hides every GPU (the user chose the CPU)."""
    environ = os.environ if environ is None else environ
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    return visible is not None and visible.strip() in ("", "-1")


def gpus_requested(argv, prog="onmt-main", nvidia_smi=None, environ=None):
    """Why a command line asks for GPUs, or ``None`` if it does not.

    GPUs are asked for by ``--num_gpus N`` with N > 0 given explicitly (its default, 1,
    is not a request), by ``--mixed_precision``, and, for ``ldr-main`` (the package's
    own command) running a computing run type, by a machine whose ``nvidia-smi -L`` lists
    a GPU, unless ``CUDA_VISIBLE_DEVICES`` hides them all.

    Args:
      argv: The arguments of ``onmt-main`` / ``ldr-main`` (without the program name).
      prog: The program name (its base name is compared).
      nvidia_smi: Passed to :func:`listed_gpus` (tests simulate a GPU with it).
      environ: The environment (default ``os.environ``).

    Returns:
      A short reason (``"--num_gpus 2"``, ``"--mixed_precision"``, ``"nvidia-smi lists
      GPU 0: ..."``), or ``None``.
    """
    argv = list(argv)
    num_gpus = _option_value(argv, "--num_gpus")
    if num_gpus is not None:
        try:
            if int(num_gpus) > 0:
                return "--num_gpus %s" % num_gpus
        except ValueError:
            pass  # onmt-main's parser reports it.
    if "--mixed_precision" in argv:
        return "--mixed_precision"
    if os.path.basename(prog or "") in PACKAGE_COMMANDS and _run_type(argv) in COMPUTE_RUN_TYPES:
        if not gpus_hidden(environ):
            gpus = listed_gpus(nvidia_smi)
            if gpus:
                return "nvidia-smi lists %s" % (
                    gpus[0] if len(gpus) == 1 else "%d GPUs" % len(gpus)
                )
    return None


def wheel_library_dirs(paths=None):
    """The lib folders of NVIDIA's wheels installed in this environment
    (``site-packages/nvidia/*/lib``), whether or not they are on ``LD_LIBRARY_PATH``."""
    import sys

    found = []
    for entry in sys.path if paths is None else paths:
        root = os.path.join(entry or ".", "nvidia")
        if not os.path.isdir(root):
            continue
        for name in sorted(os.listdir(root)):
            lib = os.path.join(root, name, "lib")
            if os.path.isdir(lib) and lib not in found:
                found.append(lib)
    return found


def fallback_message(requested_reason, failures, library_dirs=None):
    """The one-line error of a run that asked for GPUs and got none.

    Args:
      requested_reason: What asked for GPUs (:func:`gpus_requested`).
      failures: :func:`failing_libraries`.
      library_dirs: :func:`wheel_library_dirs` (default: this environment's).
    """
    library_dirs = wheel_library_dirs() if library_dirs is None else library_dirs
    fix = FIX
    if failures:
        cause = "the CUDA libraries %s fail to load" % ", ".join(name for name, _ in failures)
        names = {name for name, _ in failures}
        installed = {n for d in library_dirs for n in os.listdir(d) if n in names}
        if installed == names:
            fix = "source run/setup_env.sh"
            cause += " (installed in %s, not on LD_LIBRARY_PATH)" % os.path.dirname(
                os.path.dirname(library_dirs[0])
            )
    else:
        cause = (
            "every CUDA library loads, so the driver is missing or refused "
            "(run nvidia-smi; CUDA %s needs a driver >= %s, >= %s for compute capability "
            "%s and newer)" % (STACK.cuda, MINIMUM_DRIVER, PTX_JIT_DRIVER, _PTX_CAPABILITY)
        )
    return (
        "GPUs asked for (%s) but TensorFlow found none and would run on the CPU: %s; fix: "
        "`%s` (docs/gpu.md), or %s=1 to run on the CPU"
        % (requested_reason, cause, fix, ALLOW_CPU_ENV)
    )


def check_gpus_available(requested_reason, list_gpus=None, loader=None, environ=None):
    """Refuses to go on without a GPU when GPUs were asked for.

    Args:
      requested_reason: What asked for GPUs (:func:`gpus_requested`); ``None``: nothing
        did, nothing is checked.
      list_gpus: Returns TensorFlow's GPUs (default:
        ``tf.config.list_physical_devices("GPU")``); tests simulate none.
      loader: Passed to :func:`failing_libraries`.
      environ: The environment (``LDR_ALLOW_CPU=1`` lets the run go on).

    Raises:
      UserError: one line naming the CUDA libraries that fail to load and the fix.
    """
    environ = os.environ if environ is None else environ
    if not requested_reason or environ.get(ALLOW_CPU_ENV) == "1":
        return
    if list_gpus is None:
        import tensorflow as tf

        def list_gpus():
            return tf.config.list_physical_devices("GPU")

    if list_gpus():
        return
    from ldr_opennmt.errors import UserError

    raise UserError(fallback_message(requested_reason, failing_libraries(loader=loader)))


def check_command_line(argv, prog="onmt-main", nvidia_smi=None, list_gpus=None, environ=None):
    """:func:`gpus_requested` then :func:`check_gpus_available`: the call for a command's
    entry point, before it builds anything.

    Raises:
      UserError: when the command line (or, for ``ldr-main``, the machine) asks for GPUs
        and TensorFlow has none.
    """
    reason = gpus_requested(argv, prog=prog, nvidia_smi=nvidia_smi, environ=environ)
    check_gpus_available(reason, list_gpus=list_gpus, environ=environ)


def check_stock_onmt_main(argv=None, prog=None):
    """Under stock ``onmt-main`` (not ``ldr-main``), :func:`check_command_line` on its
    arguments; elsewhere nothing.

    For :func:`ldr_opennmt.upstream.install`: ``onmt-main --model FILE`` imports the model
    definition (which installs the patches) after its own
    ``list_physical_devices`` and before it builds or trains anything, and stock
    ``onmt-main`` has no other hook. Only the command
    line counts there (``--num_gpus N``, ``--mixed_precision``), not ``nvidia-smi``.

    Raises:
      UserError: as :func:`check_command_line`.
    """
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    prog = os.path.basename(sys.argv[0] if prog is None else prog)
    if prog == "onmt-main":
        check_command_line(argv, prog=prog)
