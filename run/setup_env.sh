#!/usr/bin/env bash
# Creates .venv (if missing) and installs the package with its locked dependencies
# (requirements.lock: every transitive dependency, with hashes; see run/lock.sh).
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
# Reinstalls when setup.py or the lock file changed since the last installation.
if [ ! -f "$STAMP" ] || [ "$ROOT/setup.py" -nt "$STAMP" ] ||
  [ "$ROOT/requirements.lock" -nt "$STAMP" ]; then
  echo "[setup] installing ldr-opennmt and its locked dependencies (first run takes a few minutes)"
  # Every dependency, pip included, comes from requirements.lock (exact versions and sha256
  # hashes; refreshed by `bash run/lock.sh`), then the package itself without dependencies.
  # --no-build-isolation: the editable build uses the locked setuptools and wheel rather than
  # fetching the latest setuptools into an isolated build environment (PYTHONWARNINGS: the
  # locked setuptools warns that a folder named like the package is in the project's root).
  "$ROOT/.venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --require-hashes -r "$ROOT/requirements.lock" &&
    PYTHONWARNINGS=ignore "$ROOT/.venv/bin/python" -m pip install --quiet \
      --disable-pip-version-check --no-deps --no-build-isolation -e "$ROOT" &&
    touch "$STAMP" || { echo "[setup] installation failed" >&2; return 1 2>/dev/null || exit 1; }
fi
export PATH="$ROOT/.venv/bin:$PATH"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore}"
