#!/usr/bin/env bash
# Glossaries applied at translation time, measured (docs/serving.md): LDR trained on the default
# corpus with terms annotated inline (ldr-data terms) and on the plain corpus, both exported for
# CTranslate2; term success on held-out terms and chrF on plain input; report in
# results/terminology/:
#   bash run/terminology.sh [--quick] [--family ldr] [--steps N]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/setup_env.sh"
cd "$ROOT"
exec python -m ldr_experiments.cli terminology "$@"
