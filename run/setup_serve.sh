#!/usr/bin/env bash
# Creates .venv-serve, the serving runtime: Python 3.12 or newer with CTranslate2 4 and the
# server's libraries, no TensorFlow and no OpenNMT-tf (requirements-serve.lock: every
# transitive dependency, with hashes; refreshed by `bash run/lock_serve.sh`), and the package
# itself, and puts its ldr-serve and ldr-translate on PATH. They serve and translate the
# directories of `ldr-export ctranslate2`, which the training environment (.venv, Python
# 3.11, CTranslate2 3.24) writes; a SavedModel needs the training environment. The package's
# other commands (ldr-main, ldr-data, ldr-eval, ldr-export, ...) need TensorFlow: they are
# removed from .venv-serve/bin (ldr_opennmt/serving/runtime.py), so that with both
# environments on PATH they are the training environment's.
#
#   source run/setup_serve.sh     # then: ldr-serve --model_dir export/ct2
#
# The Python is found by run/serve_python.sh: $LDR_SERVE_PYTHON, else python3.12, python3.13
# or python3 on PATH if one is 3.12 or newer, else pyenv's $(pyenv root)/versions/3.12*
# (then 3.13 and newer). None found: install one (pyenv install 3.12, or the system's
# python3.12 package) or set LDR_SERVE_PYTHON=/path/to/python3.12.
#
# The environment is reused while requirements-serve.lock and setup.py are unchanged (their
# sha256 is recorded in .venv-serve/.ldr-serve-installed), so CI installs it once.
# LDR_SERVE_VENV=DIR sets up DIR instead of .venv-serve. Like run/setup_env.sh, it sets no
# shell options (sourcing it leaves an interactive shell as it was).
_ldr_serve_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=run/serve_python.sh
source "$_ldr_serve_root/run/serve_python.sh"
_ldr_serve_venv="${LDR_SERVE_VENV:-$_ldr_serve_root/.venv-serve}"
_ldr_serve_stamp="$_ldr_serve_venv/.ldr-serve-installed"
_ldr_serve_inputs="$(cat "$_ldr_serve_root/requirements-serve.lock" "$_ldr_serve_root/setup.py" |
  sha256sum | cut -d' ' -f1)"
_ldr_serve_ok=1
if [ ! -f "$_ldr_serve_stamp" ] || [ "$(cat "$_ldr_serve_stamp")" != "$_ldr_serve_inputs" ]; then
  _ldr_serve_ok=""
  if [ ! -x "$_ldr_serve_venv/bin/python" ]; then
    if _ldr_serve_python="$(ldr_serve_python)"; then
      echo "[serve] creating $_ldr_serve_venv with $_ldr_serve_python"
      "$_ldr_serve_python" -m venv "$_ldr_serve_venv"
    fi
  fi
  if [ -x "$_ldr_serve_venv/bin/python" ]; then
    echo "[serve] installing the serving runtime (requirements-serve.lock; about a minute)"
    # The package without its dependencies (they are the training stack's) and without
    # setup.py's Python bound (3.11, TensorFlow 2.13's): its serving modules need neither.
    "$_ldr_serve_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      --require-hashes -r "$_ldr_serve_root/requirements-serve.lock" &&
      PYTHONWARNINGS=ignore "$_ldr_serve_venv/bin/python" -m pip install --quiet \
        --disable-pip-version-check --no-deps --no-build-isolation --ignore-requires-python \
        -e "$_ldr_serve_root" &&
      echo "$_ldr_serve_inputs" >"$_ldr_serve_stamp" && _ldr_serve_ok=1
  fi
fi
if [ -n "$_ldr_serve_ok" ]; then
  # Every time (cheap): pip writes every console script again on each installation.
  "$_ldr_serve_venv/bin/python" -m ldr_opennmt.serving.runtime "$_ldr_serve_venv/bin" ||
    echo "[serve] warning: could not remove the training commands from $_ldr_serve_venv/bin" >&2
  export PATH="$_ldr_serve_venv/bin:$PATH"
else
  echo "[serve] installation failed" >&2
  return 1 2>/dev/null || exit 1
fi
