#!/usr/bin/env bash
# Checks that the project runs on the GPU and measures it (docs/gpu.md):
#   bash run/gpu_check.sh                         # all families, 3 modes (not yet timed on a GPU)
#   bash run/gpu_check.sh --families ldr --modes mixed_xla  # families, groups, rows: as bench.sh
#   bash run/gpu_check.sh --quick                 # tiny sizes: checks that it runs
# Without a GPU: checks the CUDA libraries and versions, says so in one line, exits 0.
# The GPU libraries come from `source run/setup_env.sh --gpu` (once); setup_env.sh exports
# their paths whenever they are installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# No arguments: this script's own must not reach setup_env.sh (it would read a --gpu).
source "$ROOT/run/setup_env.sh" ""
cd "$ROOT"
exec python -m ldr_experiments.cli gpu-check "$@"
