#!/usr/bin/env bash
# LDR with 4-, 8-, 16-cell domain regions on the default corpus (the LDR paper's Table 5):
#   bash run/region_sweep.sh [--quick] [--cells 4 8 16] [--size paper --cells 4 8 16 32 64 ...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/setup_env.sh"
cd "$ROOT"
exec python -m ldr_experiments.cli region-sweep "$@"
