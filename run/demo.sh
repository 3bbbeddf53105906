#!/usr/bin/env bash
# The README's main command (docs/demo.md): builds the default corpus, trains Mixed, LDR (summed),
# Mixed (equal passes) (its control of the same compute), the FT_* baselines and a domain
# classifier, evaluates them per domain (BLEU, chrF, contrastive lexical choice; LDR with its
# true, generic, wrong and predicted labels) and writes results/demo/report.md.
#   bash run/demo.sh            # the default run (times and figures: docs/demo.md)
#   bash run/demo.sh --quick    # a smoke run with tiny budgets (results/demo-quick)
#   bash run/demo.sh --full     # also Mixed's second seed, DC, LDR^1, domain mixing, Factorized PA
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/setup_env.sh"
cd "$ROOT"
exec python -m ldr_experiments.cli demo "$@"
