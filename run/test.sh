#!/usr/bin/env bash
# The README's test command: sets up .venv if needed, then runs the test suite.
# Extra arguments go to pytest (e.g. bash run/test.sh -k ldr -x).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/setup_env.sh"
cd "$ROOT"
exec python -m pytest tests -p no:cacheprovider "$@"
