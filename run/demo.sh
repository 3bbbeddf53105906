#!/usr/bin/env bash
# The README's main command: builds the default corpus, trains Mixed, DC, LDR, Mixing and
# Factorized SF, evaluates them per domain and writes results/demo/report.md.
#   bash run/demo.sh            # about 40 minutes on 2 CPU cores
#   bash run/demo.sh --quick    # about 5 minutes, smaller budgets (results/demo-quick)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/setup_env.sh"
cd "$ROOT"
# The drivers are scripts of the repository (run/experiments/), not of the installed package.
PYTHONPATH="$ROOT/run${PYTHONPATH:+:$PYTHONPATH}" exec python -m experiments.demo "$@"
