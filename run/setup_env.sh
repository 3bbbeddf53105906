#!/usr/bin/env bash
# Creates .venv (if missing) and installs the package with its locked dependencies
# (requirements.lock on Python 3.11, requirements-py312.lock on Python 3.12: every transitive
# dependency, with hashes; see run/lock.sh).
# Sourced by run/test.sh and run/demo.sh, or by hand (`source run/setup_env.sh`): it sets
# no shell options, so sourcing it leaves an interactive shell as it was.
#
# GPUs (docs/gpu.md): `source run/setup_env.sh --gpu` also installs NVIDIA's CUDA 11.8 /
# cuDNN 8.6 runtime wheels of requirements-gpu.lock into .venv (about 2.9 GB; Linux x86_64,
# NVIDIA driver >= 450.80.02, >= 520.61.05 for GPUs of compute capability 8.0 and newer) and
# exports what TensorFlow and XLA need to find them: LD_LIBRARY_PATH (each wheel's lib
# folder) and XLA_FLAGS=--xla_gpu_cuda_data_dir (ptxas and nvvm/libdevice). Nothing outside
# .venv is touched. Once installed, a plain `source run/setup_env.sh` exports them too.
# (`bash run/setup_env.sh --gpu` installs only: the exports end with that shell.)
# LDR_VENV=DIR sets up DIR instead of .venv (tests).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_ldr_venv="${LDR_VENV:-$ROOT/.venv}"
if [ ! -x "$_ldr_venv/bin/python" ]; then
  # Two training stacks (docs/installation.md): Python 3.12 with TensorFlow 2.21 (preferred:
  # current and supported longer) and Python 3.11 with TensorFlow 2.13.1. The Python used:
  # $PYTHON (as given: another version is refused), else the first 3.12 found (python3.12 on
  # PATH, uv's, pyenv's, python3), else the first 3.11 found the same way.
  _ldr_pyok() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] not in ((3, 11), (3, 12)))' >/dev/null 2>&1; }
  _ldr_pyis() { "$1" -c "import sys; sys.exit(sys.version_info[:2] != (3, $2))" >/dev/null 2>&1; }
  _ldr_python=""
  if [ -n "${PYTHON:-}" ]; then
    if _ldr_pyok "$PYTHON"; then _ldr_python="$PYTHON"; else
      echo "[setup] PYTHON=$PYTHON is not Python 3.11 or 3.12 ($("$PYTHON" --version 2>&1 || echo 'not found')): training needs one of them (TensorFlow 2.21 or 2.13); give PYTHON=/path/to/python3.12" >&2
      unset -f _ldr_pyok _ldr_pyis; unset _ldr_python _ldr_venv
      return 1 2>/dev/null || exit 1
    fi
  else
    for _ldr_minor in 12 11; do
      for _ldr_candidate in "python3.$_ldr_minor" \
        "$( (uv python find "3.$_ldr_minor") 2>/dev/null || true)" \
        "$( (pyenv root) 2>/dev/null || echo /nonexistent)"/versions/3."$_ldr_minor"*/bin/python3."$_ldr_minor" \
        python3; do
        if [ -n "$_ldr_candidate" ] && command -v "$_ldr_candidate" >/dev/null 2>&1 &&
          _ldr_pyis "$_ldr_candidate" "$_ldr_minor"; then
          _ldr_python="$_ldr_candidate"
          break 2
        fi
      done
    done
  fi
  if [ -z "$_ldr_python" ]; then
    echo "[setup] training needs Python 3.12 or 3.11 (TensorFlow has no wheel of the versions used here for $( (python3 --version) 2>&1 || echo 'the Python here')): install one (uv python install 3.12; pyenv install 3.12; or python3.12 from your distribution) and run again, or give PYTHON=/path/to/python3.12" >&2
    unset -f _ldr_pyok _ldr_pyis; unset _ldr_python _ldr_candidate _ldr_minor _ldr_venv
    return 1 2>/dev/null || exit 1
  fi
  if _ldr_pyis "$_ldr_python" 12; then
    _ldr_stack="TensorFlow 2.21 with tf-keras; TensorFlow Addons replaced by the package's own"
  else
    _ldr_stack="TensorFlow 2.13.1 with TensorFlow Addons 0.21"
  fi
  echo "[setup] creating $_ldr_venv with $_ldr_python ($("$_ldr_python" --version 2>&1)): $_ldr_stack"
  "$_ldr_python" -m venv "$_ldr_venv"
  unset -f _ldr_pyok _ldr_pyis; unset _ldr_python _ldr_candidate _ldr_minor _ldr_stack
fi
STAMP="$_ldr_venv/.ldr-installed"
# The venv's stack (its Python) decides its locks: requirements.lock (3.11),
# requirements-py312.lock (3.12); and below, its GPU libraries.
_ldr_py312=""
_ldr_lock=requirements.lock
if "$_ldr_venv/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 12))' >/dev/null 2>&1; then
  _ldr_py312=1
  _ldr_lock=requirements-py312.lock
fi
# Reinstalls when setup.py or the lock file changed since the last installation.
if [ ! -f "$STAMP" ] || [ "$ROOT/setup.py" -nt "$STAMP" ] ||
  [ "$ROOT/$_ldr_lock" -nt "$STAMP" ]; then
  echo "[setup] installing ldr-opennmt and its locked dependencies ($_ldr_lock; first run takes a few minutes)"
  # Every dependency, pip included, comes from the lock (exact versions and sha256 hashes;
  # refreshed by `bash run/lock.sh`), then the package itself without dependencies.
  # --no-build-isolation: the editable build uses the locked setuptools and wheel rather than
  # fetching the latest setuptools into an isolated build environment (PYTHONWARNINGS: the
  # locked setuptools warns that a folder named like the package is in the project's root).
  # Python 3.12: opennmt-tf without its dependencies (requirements-py312-nodeps.lock: its
  # metadata asks for tensorflow-addons, which has no wheel there), and the .pth file whose
  # start-up hook answers `import tensorflow_addons` with the package's replacement and sets
  # TF_USE_LEGACY_KERAS=1 (ldr_opennmt/upstream/addons_hook.py).
  "$_ldr_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --require-hashes -r "$ROOT/$_ldr_lock" &&
    { [ "$_ldr_lock" = requirements.lock ] ||
      { "$_ldr_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        --require-hashes --no-deps -r "$ROOT/requirements-py312-nodeps.lock" &&
        "$_ldr_venv/bin/python" "$ROOT/ldr_opennmt/upstream/addons_hook.py" --write-pth >/dev/null; }; } &&
    PYTHONWARNINGS=ignore "$_ldr_venv/bin/python" -m pip install --quiet \
      --disable-pip-version-check --no-deps --no-build-isolation -e "$ROOT" &&
    touch "$STAMP" || { echo "[setup] installation failed" >&2; unset _ldr_lock _ldr_py312; return 1 2>/dev/null || exit 1; }
fi
unset _ldr_lock
export PATH="$_ldr_venv/bin:$PATH"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore}"

# The GPU libraries. Written for callers that source this file under `set -euo pipefail`
# (run/test.sh): no unset variable is read, no failing command is left unguarded. A sourced
# file sees its caller's arguments when given none: `--gpu` is the only one looked at.
_ldr_gpu_stamp="$_ldr_venv/.ldr-gpu-installed"
_ldr_gpu=""
for _ldr_arg in "$@"; do
  if [ "$_ldr_arg" = "--gpu" ]; then _ldr_gpu=1; fi
done
if [ -n "$_ldr_gpu" ]; then
  # Each stack's CUDA (as ldr_opennmt/gpu.py's STACKS says it): the lowest driver its CUDA
  # runs on (minor-version compatibility), and the CUDA version's own driver, which compiles
  # its PTX: needed from the compute capability where TensorFlow ships PTX and no native code.
  if [ -n "$_ldr_py312" ]; then
    # TensorFlow 2.21: its and-cuda extra's CUDA 12.5 / cuDNN 9 wheels; native code sm_60 to
    # sm_89, PTX from compute capability 9.0.
    _ldr_gpu_lock=requirements-gpu-py312.lock _ldr_cuda=12.5 _ldr_tf=2.21.0
    _ldr_min=525.60.13 _ldr_ptx=555.42.02 _ldr_ptx_major=9
    _ldr_what="CUDA 12 / cuDNN 9 libraries of requirements-gpu-py312.lock (several GB)"
  else
    # TensorFlow 2.13.1: native code up to sm_75 only, PTX from compute capability 8.0.
    _ldr_gpu_lock=requirements-gpu.lock _ldr_cuda=11.8 _ldr_tf=2.13.1
    _ldr_min=450.80.02 _ldr_ptx=520.61.05 _ldr_ptx_major=8
    _ldr_what="CUDA 11.8 / cuDNN 8.6 libraries of requirements-gpu.lock (about 1.7 GB to download, 2.9 GB installed)"
  fi
  _ldr_fail=""
  if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
    echo "[setup] --gpu: NVIDIA's CUDA wheels of $_ldr_gpu_lock are for Linux x86_64, not $(uname -s) $(uname -m)" >&2
    _ldr_fail=1
  elif command -v nvidia-smi >/dev/null 2>&1; then
    # nvidia-smi < 510 has no compute_cap field.
    _ldr_driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)" || _ldr_driver=""
    _ldr_cc="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1)" || _ldr_cc=""
    _ldr_driver="$(printf '%s' "$_ldr_driver" | tr -d '[:space:]')"
    _ldr_cc="$(printf '%s' "$_ldr_cc" | tr -d '[:space:]')"
    _ldr_need=$_ldr_min
    case "$_ldr_cc" in
      [0-9]*.*)
        if [ "${_ldr_cc%%.*}" -ge "$_ldr_ptx_major" ] 2>/dev/null; then _ldr_need=$_ldr_ptx; fi
        ;;
    esac
    if [ -z "$_ldr_driver" ]; then
      echo "[setup] --gpu: nvidia-smi gave no driver version: installing anyway; CUDA $_ldr_cuda needs an NVIDIA driver >= $_ldr_need" >&2
    elif [ "$(printf '%s\n%s\n' "$_ldr_need" "$_ldr_driver" | sort -V | head -n 1)" != "$_ldr_need" ]; then
      if [ "$_ldr_need" = "$_ldr_min" ]; then
        echo "[setup] --gpu: NVIDIA driver $_ldr_driver found; CUDA $_ldr_cuda needs >= $_ldr_min (>= $_ldr_ptx on GPUs of compute capability $_ldr_ptx_major.0 and newer): update the driver" >&2
      else
        echo "[setup] --gpu: NVIDIA driver $_ldr_driver found; CUDA $_ldr_cuda needs >= $_ldr_ptx on this GPU (compute capability $_ldr_cc, whose TensorFlow $_ldr_tf kernels are compiled from PTX): update the driver" >&2
      fi
      _ldr_fail=1
    fi
  else
    echo "[setup] --gpu: no NVIDIA driver found (nvidia-smi): installing the CUDA libraries anyway; they need a driver >= $_ldr_min (>= $_ldr_ptx for compute capability $_ldr_ptx_major.0 and newer)" >&2
  fi
  if [ -z "$_ldr_fail" ] && { [ ! -f "$_ldr_gpu_stamp" ] ||
    [ "$ROOT/$_ldr_gpu_lock" -nt "$_ldr_gpu_stamp" ]; }; then
    echo "[setup] installing the $_ldr_what"
    # --no-deps: the lock holds the wheels and every dependency they have, with hashes.
    "$_ldr_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      --require-hashes --no-deps -r "$ROOT/$_ldr_gpu_lock" &&
      touch "$_ldr_gpu_stamp" || {
      echo "[setup] installation of the GPU libraries failed" >&2
      _ldr_fail=1
    }
  fi
  if [ -n "$_ldr_fail" ]; then
    unset _ldr_venv _ldr_gpu_stamp _ldr_gpu _ldr_arg _ldr_fail _ldr_driver _ldr_cc _ldr_need \
      _ldr_py312 _ldr_gpu_lock _ldr_cuda _ldr_tf _ldr_min _ldr_ptx _ldr_ptx_major _ldr_what
    return 1 2>/dev/null || exit 1
  fi
fi
if [ -f "$_ldr_gpu_stamp" ]; then
  # TensorFlow dlopens libcudart.so.11.0, libcublas.so.11, libcudnn.so.8, ... by name:
  # each wheel's lib folder goes on LD_LIBRARY_PATH (once, whatever the number of sources).
  for _ldr_lib in "$_ldr_venv"/lib/python3*/site-packages/nvidia/*/lib; do
    if [ -d "$_ldr_lib" ]; then
      case ":${LD_LIBRARY_PATH:-}:" in
        *":$_ldr_lib:"*) ;;
        *) export LD_LIBRARY_PATH="$_ldr_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
      esac
    fi
  done
  # XLA (--jit_compile) looks for DIR/bin/ptxas and DIR/nvvm/libdevice/libdevice.10.bc:
  # the nvcc wheel's nvidia/cuda_nvcc folder has exactly that layout. A data dir the user
  # already set in XLA_FLAGS is kept.
  for _ldr_lib in "$_ldr_venv"/lib/python3*/site-packages/nvidia/cuda_nvcc; do
    if [ -x "$_ldr_lib/bin/ptxas" ]; then
      case " ${XLA_FLAGS:-} " in
        *"--xla_gpu_cuda_data_dir"*) ;;
        *) export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_gpu_cuda_data_dir=$_ldr_lib" ;;
      esac
    fi
  done
  # TensorFlow 2.13.1 ships no native code for compute capability 8.0 and newer: the driver
  # compiles its PTX on first use. A JIT cache big enough for all of it (4 GiB, the maximum)
  # keeps that to the first start; lazy loading compiles only the kernels that run.
  export CUDA_CACHE_MAXSIZE="${CUDA_CACHE_MAXSIZE:-4294967296}"
  export CUDA_MODULE_LOADING="${CUDA_MODULE_LOADING:-LAZY}"
  if [ -n "$_ldr_gpu" ] && [ "${BASH_SOURCE[0]}" = "$0" ]; then
    echo "[setup] GPU libraries installed; \`source run/setup_env.sh\` puts them in a shell's environment"
  fi
fi
unset _ldr_venv _ldr_gpu_stamp _ldr_gpu _ldr_arg _ldr_fail _ldr_driver _ldr_cc _ldr_need _ldr_lib \
  _ldr_py312 _ldr_gpu_lock _ldr_cuda _ldr_tf _ldr_min _ldr_ptx _ldr_ptx_major _ldr_what
