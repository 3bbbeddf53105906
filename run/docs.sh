#!/usr/bin/env bash
# Builds the documentation site (docs/, Sphinx with MyST Markdown pages) into
# docs/_build/html, warnings as errors: a broken link, anchor or include, a docstring whose
# markup fails, or a failed check of the references generated from the code (docs/_ext/)
# stops the build, every problem listed (--keep-going).
#
#   bash run/docs.sh              # then open docs/_build/html/index.html
#   bash run/docs.sh -E           # extra arguments go to sphinx-build (-E: rebuild every page)
#
# The tools (Sphinx, MyST-Parser, furo) come from requirements.lock, with everything else
# (setup.py's docs extra; run/setup_env.sh installs it). LDR_DOCS_BUILD=DIR builds into
# DIR/html (doctrees in DIR/doctrees) instead of docs/_build: tests/test_docs.py builds
# into a temporary directory.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/setup_env.sh"
cd "$ROOT"
BUILD="${LDR_DOCS_BUILD:-docs/_build}"
python -m sphinx -b html -W --keep-going -q -d "$BUILD/doctrees" "$@" docs "$BUILD/html"
echo "[docs] built $BUILD/html/index.html"
