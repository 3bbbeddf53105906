#!/usr/bin/env bash
# The README's test command: sets up .venv if needed, then runs the test suite.
# Extra arguments go to pytest (e.g. bash run/test.sh -k ldr -x).
# Two pytest-xdist workers by default (LDR_TEST_WORKERS=N to change, 0 for one process):
# much of a TensorFlow test is single-threaded graph tracing, so two workers on two
# cores finish sooner than one. Each test file runs whole in one worker (--dist
# loadfile): the tiny models a file trains once are shared by its tests.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/setup_env.sh"
cd "$ROOT"
# Test paths among the arguments (bash run/test.sh tests/test_locks.py) replace the default
# `tests`; options alone (-k, -m, -x) filter the whole suite.
TARGETS=(tests)
for arg in "$@"; do
  case "$arg" in
    tests/* | ./tests/*) TARGETS=() ;;
  esac
done
exec python -m pytest "${TARGETS[@]}" -p no:cacheprovider -n "${LDR_TEST_WORKERS:-2}" \
  --dist loadfile "$@"
