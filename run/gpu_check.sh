#!/usr/bin/env bash
# Checks that the project runs on the GPU and measures it (docs/gpu.md):
#   bash run/gpu_check.sh                         # all families, 3 modes (not yet timed on a GPU)
#   bash run/gpu_check.sh --families ldr --modes mixed_xla  # families, groups, rows: as bench.sh
#   bash run/gpu_check.sh --quick                 # tiny sizes: checks that it runs
# Without a GPU: checks the CUDA libraries and versions, says so in one line, exits 0.
# With one, it then runs the test suite's GPU paths (below).
# The GPU libraries come from `source run/setup_env.sh --gpu` (once); setup_env.sh exports
# their paths whenever they are installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# No arguments: this script's own must not reach setup_env.sh (it would read a --gpu).
source "$ROOT/run/setup_env.sh" ""
cd "$ROOT"
python -m ldr_experiments.cli gpu-check "$@"
# Then, where a GPU is listed and the check passed, the test suite's GPU paths, which are
# opt-in on CPU hosts (docs/development.md, LDR_TEST_FULL=1): every family under mixed
# precision and XLA, update skipping under both, and two replicas (MirroredStrategy).
# LDR_GPU_CHECK_TESTS=0 leaves them out.
if [ "${LDR_GPU_CHECK_TESTS:-1}" = 1 ] && nvidia-smi -L 2>/dev/null | grep -q "^GPU "; then
  echo "gpu_check: the test suite's GPU paths (LDR_TEST_FULL=1)" >&2
  LDR_TEST_FULL=1 python -m pytest -p no:cacheprovider -q tests/training/test_precision.py \
    tests/models/test_optimizer.py tests/training/test_mirrored.py
fi
