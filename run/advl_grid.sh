#!/usr/bin/env bash
# AdvL's reversal weight chosen on the dev sets for the papers' tables (docs/tables.md): one AdvL
# training per weight with the tables' recipe and budget, dev BLEU of each, the choice in
# results/advl_grid/choice.json (bash run/tables.sh reads it). Resumable: a rerun skips what is done.
#   bash run/advl_grid.sh                            # the grid 0.01 0.03 0.1 0.3 (about 30 min)
#   bash run/advl_grid.sh --quick                    # tiny budgets (results/advl_grid-quick)
#   bash run/advl_grid.sh --weights 0.003 0.01 0.03  # another grid
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/setup_env.sh"
cd "$ROOT"
exec python -m ldr_experiments.cli advl-grid "$@"
