#!/usr/bin/env bash
# Creates .venv (if missing) and installs the package with its pinned dependencies.
# Sourced by run/test.sh and run/demo.sh, or by hand (`source run/setup_env.sh`): it sets
# no shell options, so sourcing it leaves an interactive shell as it was.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x "$ROOT/.venv/bin/python" ]; then
  echo "[setup] creating $ROOT/.venv with $PYTHON"
  "$PYTHON" -m venv "$ROOT/.venv"
fi
STAMP="$ROOT/.venv/.ldr-installed"
if [ ! -f "$STAMP" ] || [ "$ROOT/setup.py" -nt "$STAMP" ]; then
  echo "[setup] installing ldr-opennmt and pinned dependencies (first run takes a few minutes)"
  "$ROOT/.venv/bin/python" -m pip install --quiet --upgrade pip &&
    "$ROOT/.venv/bin/python" -m pip install --quiet -e "$ROOT[test]" &&
    touch "$STAMP" || { echo "[setup] installation failed" >&2; return 1 2>/dev/null || exit 1; }
fi
export PATH="$ROOT/.venv/bin:$PATH"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore}"
