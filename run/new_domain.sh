#!/usr/bin/env bash
# Train LDR and Mixed on all domains but one, then add it (the LDR paper's Table 6):
#   bash run/new_domain.sh [--quick] [--new-domain software] [--config X.yml --data DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/setup_env.sh"
cd "$ROOT"
exec python -m ldr_experiments.cli new-domain "$@"
