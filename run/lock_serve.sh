#!/usr/bin/env bash
# Refreshes requirements-serve.lock, the lock of the serving runtime (.venv-serve, made by
# run/setup_serve.sh): every transitive dependency of requirements-serve.in, for Python 3.12,
# pinned with the sha256 of every file PyPI publishes for that version (as run/lock.sh does
# for the training environment's requirements.lock, with pip-tools in a throw-away venv).
#
#   bash run/lock_serve.sh                                 # after a change to requirements-serve.in
#   bash run/lock_serve.sh --upgrade-package ctranslate2   # a deliberate upgrade
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/serve_python.sh"
PIP_TOOLS_VERSION=7.6.2
PYTHON="$(ldr_serve_python)" || exit 1
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "pip-tools==$PIP_TOOLS_VERSION"
cd "$ROOT"
env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL -u PIP_CONSTRAINT -u PIP_INDEX_URL \
  PIP_CONFIG_FILE=/dev/null CUSTOM_COMPILE_COMMAND="bash run/lock_serve.sh" \
  "$WORK/venv/bin/pip-compile" --quiet --resolver=backtracking \
  --index-url https://pypi.org/simple --no-emit-index-url --no-emit-find-links \
  --generate-hashes --allow-unsafe --strip-extras \
  --output-file requirements-serve.lock "$@" requirements-serve.in
echo "[lock] requirements-serve.lock refreshed; install it with: source run/setup_serve.sh"
