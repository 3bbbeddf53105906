#!/usr/bin/env bash
# The server's domain guard and calibrated confidence, measured (docs/serving.md): LDR and DC
# trained on every domain but one, exported with --domain_guard --confidence, and their
# wrong-label cost, confidence AUROC and reliability, and guard routing on a test set with
# unseen-domain lines; report in results/serve_quality/:
#   bash run/serve_quality.sh [--quick] [--unseen software] [--families ldr dc]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/setup_env.sh"
cd "$ROOT"
exec python -m ldr_experiments.cli serve-quality "$@"
