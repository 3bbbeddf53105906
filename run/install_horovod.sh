#!/usr/bin/env bash
# Optional: builds Horovod from source into .venv, against the pinned TensorFlow, with Gloo
# (no MPI needed). Not part of the README's two commands; needed only for `--horovod` training
# (docs/scale.md, "N processes, on one machine or several: Horovod"; docs/installation.md).
#
#   bash run/install_horovod.sh          # CPU collectives (Gloo): what the tests and CPU runs use
#   bash run/install_horovod.sh --gpu    # plus NCCL GPU collectives (needs CUDA and NCCL)
#
# Why a script rather than a `pip install -e .[horovod]` extra: Horovod compiles its TensorFlow
# ops only when TensorFlow is importable at build time, so it must be built without pip's build
# isolation and with HOROVOD_WITH_TENSORFLOW=1; an extra would silently build a Horovod without
# TensorFlow support. It takes about 2 minutes on 2 cores.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/setup_env.sh"
HOROVOD_VERSION=0.28.1
# Measured on 2026-12-07 (docs/installation.md): Horovod 0.28.1, its last release, does not
# build against TensorFlow 2.21 (the Python 3.12 stack), with or without HOROVOD_ENABLE_XLA_OPS=0:
# its xla_mpi_ops.cc includes TensorFlow's xla/printer.h, which needs highwayhash headers that
# the TensorFlow wheel does not ship.
if python -c 'import sys; sys.exit(sys.version_info[:2] < (3, 12))'; then
  echo "[horovod] Horovod $HOROVOD_VERSION does not build against TensorFlow 2.21 (the Python 3.12 stack: TensorFlow's xla/printer.h needs highwayhash headers its wheel lacks); use the Python 3.11 stack: PYTHON=python3.11 LDR_VENV=.venv-py311 bash run/install_horovod.sh" >&2
  exit 1
fi

GPU=0
[ "${1:-}" = "--gpu" ] && GPU=1

export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1
export HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1
export MAKEFLAGS="${MAKEFLAGS:--j$(nproc)}"
# Gloo's CMake files declare a minimum version that CMake 4 rejects without this policy floor.
export CMAKE_POLICY_VERSION_MINIMUM=3.5
if [ "$GPU" = 1 ]; then
  export HOROVOD_GPU_OPERATIONS=NCCL
else
  # A CPU build must not pick up an nvcc found on PATH: CMake would then try to enable CUDA
  # (and fails on stub or mismatched compilers). Drop every PATH entry that holds one.
  CLEAN_PATH=""
  IFS=: read -r -a ENTRIES <<<"$PATH"
  for entry in "${ENTRIES[@]}"; do
    [ -x "$entry/nvcc" ] && continue
    CLEAN_PATH="${CLEAN_PATH:+$CLEAN_PATH:}$entry"
  done
  export PATH="$CLEAN_PATH"
fi
command -v cmake >/dev/null 2>&1 || python -m pip install --quiet "cmake<4"
command -v g++ >/dev/null 2>&1 || { echo "[horovod] needs a C++ compiler (g++)" >&2; exit 1; }

echo "[horovod] building horovod==$HOROVOD_VERSION (TensorFlow, Gloo$([ "$GPU" = 1 ] && echo ", NCCL"))"
python -m pip install --disable-pip-version-check --no-build-isolation --no-cache-dir \
  "horovod==$HOROVOD_VERSION" "cloudpickle==3.1.2" "psutil==7.1.3"
horovodrun --check-build
