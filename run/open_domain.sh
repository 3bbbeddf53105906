#!/usr/bin/env bash
# Open-domain translation: a Transformer and a Factorized design trained on all domains but
# one, translating every test set with generic, oracle and ensemble labels; report in
# results/open_domain/:
#   bash run/open_domain.sh [--quick] [--unseen software] [--design pa]
#   bash run/open_domain.sh --size paper --config data_configs/opus_en_fr.yml \
#       --data data/opus_en_fr --steps 200000 --stage2-steps 50000 \
#       --onmt-options=--mixed_precision,--jit_compile     # on a GPU
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/setup_env.sh"
cd "$ROOT"
exec python -m ldr_experiments.cli open-domain "$@"
