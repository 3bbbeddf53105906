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
# The drivers are scripts of the repository (run/experiments/), not of the installed package.
PYTHONPATH="$ROOT/run${PYTHONPATH:+:$PYTHONPATH}" exec python -m experiments.open_domain "$@"
