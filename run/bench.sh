#!/usr/bin/env bash
# Training and CPU inference speed and peak memory of vanilla OpenNMT-tf and the registered
# model families side by side (SavedModels and folded CTranslate2 models), with the issues'
# targets. The systems are the benchmark rows of the registered families (ldr_experiments/benchmarks/):
#   bash run/bench.sh                    # every family; about 10 minutes on 2 CPU cores
#   bash run/bench.sh --quick            # 1-2 minutes, tiny sizes: checks that it runs
#   bash run/bench.sh --out BENCH.md     # also writes the markdown report
#   bash run/bench.sh --families ldr_transformer factorized    # some families (or groups)
#   bash run/bench.sh --user_module my_method.py --families my_family   # a family of yours
#   bash run/bench.sh --serving          # then ldr-serve's benchmark, bash run/serve_bench.sh
#                                        # (about 5 more minutes; docs/serving-benchmark.md)
# Run nothing else meanwhile: the measurements share the CPU.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/setup_env.sh"
cd "$ROOT"
SERVING=0
ARGS=()
for arg in "$@"; do
  if [ "$arg" = "--serving" ]; then SERVING=1; else ARGS+=("$arg"); fi
done
python -m ldr_experiments.cli bench ${ARGS[@]+"${ARGS[@]}"}
if [ "$SERVING" = 1 ]; then
  bash "$ROOT/run/serve_bench.sh"
fi
