#!/usr/bin/env bash
# The README's test command: sets up .venv if needed, then runs the test suite.
# Extra arguments go to pytest (e.g. bash run/test.sh -k ldr -x).
# Two pytest-xdist workers by default (LDR_TEST_WORKERS=N to change, 0 for one process):
# much of a TensorFlow test is single-threaded graph tracing, so two workers on two cores
# finish sooner than one. Each test class runs whole in one worker (--dist loadscope), so the
# tiny models a class builds once are shared by its tests; what several files use is built
# once per session for both workers (tests/session_cache.py, tests/builds.py).
# The whole suite first measures this host's speed (about 25 s, python -m
# ldr_experiments.host_speed; LDR_HOST_SPEED=FIGURE skips it) and prints its time beside it
# at the end: times on hosts of different speeds compare through it (docs/development.md).
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
if [ ${#TARGETS[@]} -gt 0 ] && [ -z "${LDR_HOST_SPEED:-}" ]; then
  if line="$(python -m ldr_experiments.host_speed)"; then
    echo "[test] $line"
    LDR_HOST_SPEED="$(sed -n 's/^host speed: \([0-9.]*\) steps.*/\1/p' <<<"$line")"
    export LDR_HOST_SPEED
  else
    echo "[test] this host's speed could not be measured (python -m ldr_experiments.host_speed)"
  fi
fi
exec python -m pytest "${TARGETS[@]}" -p no:cacheprovider -n "${LDR_TEST_WORKERS:-2}" \
  --dist loadscope "$@"
