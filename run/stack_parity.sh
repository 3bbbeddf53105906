#!/usr/bin/env bash
# The two training stacks compared (docs/installation.md, "Two training stacks"): every family
# trained briefly on Python 3.11 / TensorFlow 2.13.1 / TensorFlow Addons and on Python 3.12 /
# TensorFlow 2.21 / the package's replacement, from the same corpus and seeded weights; the
# trained weights, losses and translations (model and CTranslate2 export) compared:
#   bash run/stack_parity.sh [OUT]     # default results/stack_parity; the report in OUT/report.md
# Each stack has its own venv: .venv-py311 and .venv-py312 (created by run/setup_env.sh on
# first use, with PYTHON=python3.11 / python3.12 when found; say where they are with
# PYTHON311=... PYTHON312=...; VENV311=DIR VENV312=DIR use existing ones, e.g. VENV311=.venv).
# About 15 minutes on 2 cores after the installs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/results/stack_parity}"
if [ -e "$OUT/py311" ] || [ -e "$OUT/py312" ]; then
  echo "[stack-parity] $OUT already holds measures: give another directory" >&2
  exit 1
fi
mkdir -p "$OUT"
for minor in 11 12; do
  var="PYTHON3$minor"
  python="${!var:-}"
  if [ -z "$python" ]; then
    for candidate in "python3.$minor" "$( (pyenv root) 2>/dev/null || echo /nonexistent)"/versions/3."$minor"*/bin/python3."$minor"; do
      if "$candidate" -c "import sys; sys.exit(sys.version_info[:2] != (3, $minor))" >/dev/null 2>&1; then
        python="$candidate"
        break
      fi
    done
  fi
  if [ -z "$python" ]; then
    echo "[stack-parity] no Python 3.$minor found: give PYTHON3$minor=/path/to/python3.$minor" >&2
    exit 1
  fi
  venv_var="VENV3$minor"
  venv="${!venv_var:-$ROOT/.venv-py3$minor}"
  echo "[stack-parity] Python 3.$minor stack ($python): $venv"
  # Each stack in its own shell: setup_env.sh puts its venv first on PATH.
  PYTHON="$python" LDR_VENV="$venv" bash -c \
    "source '$ROOT/run/setup_env.sh' && cd '$ROOT' && python -m ldr_experiments.cli stack-parity measure --out '$OUT/py3$minor'"
done
LDR_VENV="${VENV311:-$ROOT/.venv-py311}" bash -c \
  "source '$ROOT/run/setup_env.sh' && cd '$ROOT' && python -m ldr_experiments.cli stack-parity compare '$OUT/py311' '$OUT/py312' --out '$OUT'"
echo "[stack-parity] report: $OUT/report.md"
