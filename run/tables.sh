#!/usr/bin/env bash
# The papers' tables (docs/tables.md): trains and evaluates every family of the registry on
# the default corpus and writes results/tables/report.md. Resumable: a rerun skips what is done.
#   bash run/tables.sh            # every Transformer family at the demo's size (about 150 min)
#   bash run/tables.sh --quick    # a smoke run of every row with tiny budgets (results/tables-quick)
#   bash run/tables.sh --families ldr_transformer factorized_pa    # some rows (Mixed comes too)
#   bash run/tables.sh --scale paper --config data_configs/opus_en_fr.yml --data data/opus_en_fr \
#     --onmt-options=--mixed_precision,--jit_compile --num_gpus 1      # paper size, on GPUs
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/setup_env.sh"
cd "$ROOT"
exec python -m ldr_experiments.cli tables "$@"
