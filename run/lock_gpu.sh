#!/usr/bin/env bash
# Refreshes requirements-gpu.lock, the lock file `source run/setup_env.sh --gpu` installs
# from: NVIDIA's CUDA 11.8-era runtime wheels from PyPI that TensorFlow 2.13.1 (built
# against CUDA 11.8 and cuDNN 8.6, `tf.sysconfig.get_build_info()`) loads at start, and the
# CUDA 11.8 compiler wheel whose ptxas and libdevice XLA (--jit_compile) needs. Only these
# wheels and their own dependencies are pinned, with the sha256 of every file PyPI publishes
# for each version; requirements.lock (the CPU install, run/lock.sh) is a constraint, so
# nothing here can disagree with a pin of it.
#
#   bash run/lock_gpu.sh           # after a change to GPU_PACKAGES below
#   PYTHON=python3.12 bash run/lock_gpu.sh   # requirements-gpu-py312.lock: the Python 3.12
#                                            # stack's CUDA 12 wheels (tensorflow[and-cuda])
#
# Like run/lock.sh: pip-compile (pip-tools) in a throw-away venv, against PyPI alone
# (whatever this machine's pip configuration adds), never touching .venv. The wheels have no
# PEP 658 metadata on PyPI, so pip-compile downloads each one once to read it (about 1.7 GB,
# cuDNN alone 700 MB) into a temporary cache removed at the end.
#
# The wheels exist for Linux x86_64 (and some for aarch64 and Windows); the lock is for
# Linux x86_64 with Python 3.11, the platform of requirements.lock.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3.11}"
PIP_TOOLS_VERSION=7.6.2
# The versions TensorFlow 2.13.1 was built and tested with (CUDA 11.8, cuDNN 8.6): cudart,
# cuBLAS (with cuBLASLt), cuDNN, cuFFT, cuRAND, cuSOLVER, cuSPARSE, and nvcc (ptxas,
# nvvm/libdevice). cuRAND is not among the libraries TensorFlow 2.13 refuses to start a GPU
# without, but its random kernels use it.
GPU_PACKAGES="nvidia-cuda-runtime-cu11==11.8.89
nvidia-cublas-cu11==11.11.3.6
nvidia-cudnn-cu11==8.6.0.163
nvidia-cufft-cu11==10.9.0.58
nvidia-curand-cu11==10.3.0.86
nvidia-cusolver-cu11==11.4.1.48
nvidia-cusparse-cu11==11.7.5.86
nvidia-cuda-nvcc-cu11==11.8.89"

CPU_LOCK=requirements.lock
OUTPUT=requirements-gpu.lock
if "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))'; then
  # The Python 3.12 stack: the CUDA 12 / cuDNN 9 wheels of TensorFlow 2.21's and-cuda extra
  # (what `pip install tensorflow[and-cuda]==2.21.0` adds).
  # The and-cuda extra's lowest versions, which TensorFlow 2.21 was built and tested with
  # (tf.sysconfig.get_build_info(): CUDA 12.5, cuDNN 9), not the newest 12.x it admits.
  GPU_PACKAGES="nvidia-cublas-cu12==12.5.3.2
nvidia-cuda-cupti-cu12==12.5.82
nvidia-cuda-nvcc-cu12==12.5.82
nvidia-cuda-nvrtc-cu12==12.5.82
nvidia-cuda-runtime-cu12==12.5.82
nvidia-cudnn-cu12==9.3.0.75
nvidia-cufft-cu12==11.2.3.61
nvidia-curand-cu12==10.3.6.82
nvidia-cusolver-cu12==11.6.3.83
nvidia-cusparse-cu12==12.5.1.3
nvidia-nccl-cu12==2.27.7
nvidia-nvjitlink-cu12==12.5.82"
  CPU_LOCK=requirements-py312.lock
  OUTPUT=requirements-gpu-py312.lock
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "pip-tools==$PIP_TOOLS_VERSION"
{
  printf '%s\n' "$GPU_PACKAGES"
  # Constraints: the CPU lock's pins (a GPU wheel's dependency can only be one of them).
  printf -- '-c %s\n' "$ROOT/$CPU_LOCK"
} >"$WORK/gpu.in"
cd "$ROOT"
env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL -u PIP_CONSTRAINT -u PIP_INDEX_URL \
  PIP_CONFIG_FILE=/dev/null PIP_CACHE_DIR="$WORK/cache" \
  CUSTOM_COMPILE_COMMAND="bash run/lock_gpu.sh" \
  "$WORK/venv/bin/pip-compile" --quiet --resolver=backtracking \
  --index-url https://pypi.org/simple --no-emit-index-url --no-emit-find-links \
  --generate-hashes --allow-unsafe --strip-extras --cache-dir "$WORK/cache" \
  --output-file "$OUTPUT" "$@" "$WORK/gpu.in"
# The temporary paths would change at every run: name them by what they are.
sed -i -e "s|$WORK/gpu.in|run/lock_gpu.sh (GPU_PACKAGES)|g" \
  -e "s|$ROOT/$CPU_LOCK|$CPU_LOCK|g" "$OUTPUT"
echo "[lock] $OUTPUT refreshed; install it with: source run/setup_env.sh --gpu"
