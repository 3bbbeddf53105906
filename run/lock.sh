#!/usr/bin/env bash
# Refreshes requirements.lock (Python 3.11), or with PYTHON=python3.12 requirements-py312.lock
# and requirements-py312-nodeps.lock, the lock files run/setup_env.sh installs from: every transitive
# dependency of `ldr-opennmt[test,docs,experiments]` (setup.py: the test tools, which include the serve
# extra's server, and the documentation tools of run/docs.sh, which CI runs), plus the style
# tools and pip itself, pinned with the sha256 of every file PyPI publishes for that version.
# A user's `pip install ldr-opennmt` gets none of the extras.
#
#   bash run/lock.sh                              # after a change to setup.py's requirements
#   bash run/lock.sh --upgrade-package sacrebleu  # a deliberate upgrade (then re-validate)
#   PYTHON=python3.12 bash run/lock.sh            # the Python 3.12 stack's locks
#
# Python 3.12: setup.py's requirements for 3.12 leave opennmt-tf out (its metadata asks for
# tensorflow-addons, which has no wheel there, and TensorFlow < 2.14); it is locked alone in
# requirements-py312-nodeps.lock (the hashes of its files on PyPI) and installed without
# dependencies, which setup.py lists for it.
#
# Why pip-compile (pip-tools) rather than `pip download` + `pip hash`: pip-compile resolves
# the whole graph without installing it, keeps every pin of the existing lock that still
# satisfies setup.py (a refresh upgrades nothing unless asked), records why each package is
# there ("# via"), and hashes every published file of a version (all platforms), where
# `pip download` would hash only the files this machine would install.
# pip-tools runs in a throw-away venv, so it never touches .venv or the lock's own pins.
# It resolves against PyPI alone, whatever this machine's pip configuration adds (local
# mirrors, find-links): the lock must name files anyone can fetch.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3.11}"
PIP_TOOLS_VERSION=7.6.2
# Installed from the lock too: the style tools of pyproject.toml and setup.cfg (black,
# isort, flake8), so that everyone checks the style with the same versions, and pip (the
# version setup_env.sh installs with; no unpinned `pip install --upgrade pip`).
TOOLS="black==26.10.1 flake8==7.5.0 isort==9.0.2 pip==26.3"

OUTPUT=requirements.lock
if "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))'; then
  OUTPUT=requirements-py312.lock
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "pip-tools==$PIP_TOOLS_VERSION"
printf '%s\n' $TOOLS >"$WORK/tools.in"
cd "$ROOT"
env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL -u PIP_CONSTRAINT -u PIP_INDEX_URL \
  PIP_CONFIG_FILE=/dev/null CUSTOM_COMPILE_COMMAND="bash run/lock.sh" \
  "$WORK/venv/bin/pip-compile" --quiet --resolver=backtracking \
  --index-url https://pypi.org/simple --no-emit-index-url --no-emit-find-links \
  --generate-hashes --allow-unsafe --strip-extras --extra test --extra docs --extra experiments \
  --output-file "$OUTPUT" "$@" setup.py "$WORK/tools.in"
# The temporary input's path would change at every run: name it by what it is.
sed -i "s|$WORK/tools.in|run/lock.sh (TOOLS)|g" "$OUTPUT"
if [ "$OUTPUT" = requirements-py312.lock ]; then
  echo "opennmt-tf==2.32.0" >"$WORK/nodeps.in"
  # pip-compile would follow opennmt-tf's dependencies; only its own files are hashed here.
  env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL -u PIP_CONSTRAINT -u PIP_INDEX_URL \
    PIP_CONFIG_FILE=/dev/null "$WORK/venv/bin/python" -m pip download --quiet --no-deps \
    --disable-pip-version-check --index-url https://pypi.org/simple --dest "$WORK/nodeps" \
    -r "$WORK/nodeps.in"
  {
    echo "# Installed without dependencies on Python 3.12 (run/setup_env.sh); by bash run/lock.sh"
    printf 'opennmt-tf==2.32.0'
    for file in "$WORK"/nodeps/*; do
      printf ' \\\n    --hash=sha256:%s' "$(sha256sum "$file" | cut -d' ' -f1)"
    done
    echo
  } >requirements-py312-nodeps.lock
fi
echo "[lock] $OUTPUT refreshed; install it with: source run/setup_env.sh"
