#!/usr/bin/env bash
# Mixed and the Factorized designs PA, SF, DF trained with the curriculum and evaluated
# per domain (oracle, generic, wrong labels); report in results/factorized/:
#   bash run/factorized.sh [--quick] [--designs pa sf df]
#   bash run/factorized.sh --size paper --config data_configs/opus_en_fr.yml \
#       --data data/opus_en_fr --steps 200000 --stage2-steps 50000 \
#       --onmt-options=--mixed_precision,--jit_compile     # on a GPU
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/setup_env.sh"
cd "$ROOT"
exec python -m ldr_experiments.cli factorized "$@"
