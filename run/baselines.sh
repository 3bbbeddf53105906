#!/usr/bin/env bash
# Mixed, residual adapters, TTM, ML and AdvL trained on the same corpus and evaluated per
# domain (adapters and TTM with oracle, generic and wrong labels); report in
# results/baselines/:
#   bash run/baselines.sh [--quick] [--systems adapters ttm ml advl]
#   bash run/baselines.sh --size paper --config data_configs/opus_en_fr.yml \
#       --data data/opus_en_fr --steps 200000 --adapter-steps 20000 \
#       --onmt-options=--mixed_precision,--jit_compile     # on a GPU
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/setup_env.sh"
cd "$ROOT"
exec python -m ldr_experiments.cli baselines "$@"
