#!/usr/bin/env bash
# ldr-serve's benchmark (docs/serving-benchmark.md): exports a trained multi-domain model twice
# (ldr-export ctranslate2, ldr-main export; greedy, at most 64 target tokens, raw-text
# tokenizers of the corpus) and runs ldr_experiments/serve_bench.py on both exports.
#   bash run/serve_bench.sh                 # the LDR model of `bash run/demo.sh --quick`
#   bash run/serve_bench.sh -- --benchmarks BENCHMARKS.md   # adds the run to BENCHMARKS.md
#   bash run/serve_bench.sh --config data.yml ldr.yml --corpus data/default [--work DIR] \
#       [-- ldr_experiments/serve_bench.py options, e.g. --seconds 10 --out figures.md]
#   bash run/serve_bench.sh --runtimes [-- --benchmarks BENCHMARKS.md]   # the runtimes part only
# Then (always, or alone with --runtimes) ldr_experiments/serve_runtimes.py compares the serving runtime
# (.venv-serve of run/setup_serve.sh: Python 3.12, CTranslate2 4, no TensorFlow) with this
# environment on the CTranslate2 export: ldr-serve's startup time and memory, 1/8/32
# clients, and CTranslate2 4 against 3.24 offline (float32 and int8); --benchmarks FILE
# adds its run to FILE too.
# About 6 minutes on 2 CPU cores (the runtimes part: 2 more). Run nothing else meanwhile:
# the measurements share the CPU.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/run/setup_env.sh"
cd "$ROOT"
INVOKED_AS="bash run/serve_bench.sh${*:+ $*}"

CONFIGS=(results/demo-quick/configs/data.yml results/demo-quick/configs/ldr.yml)
CORPUS=data/default
WORK=""
RUNTIMES_ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --config)
      CONFIGS=()
      shift
      while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do CONFIGS+=("$1"); shift; done
      ;;
    --corpus) CORPUS="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --runtimes) RUNTIMES_ONLY=1; shift ;;
    --) shift; break ;;
    *) echo "serve_bench.sh: unknown option $1 (options of serve_bench.py go after --)" >&2; exit 2 ;;
  esac
done
for path in "${CONFIGS[@]}" "$CORPUS/tokenizer.en.yml" "$CORPUS/tokenizer.fr.yml" \
  "$CORPUS/raw/test.medical.en"; do
  if [ ! -e "$path" ]; then
    echo "serve_bench.sh: $path not found (the default model is that of bash run/demo.sh --quick)" >&2
    exit 2
  fi
done
if [ -z "$WORK" ]; then
  WORK="$(mktemp -d)"
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"
cat >"$WORK/serve.yml" <<EOF
data:
  source_tokenization: $(cd "$CORPUS" && pwd)/tokenizer.en.yml
  target_tokenization: $(cd "$CORPUS" && pwd)/tokenizer.fr.yml
params:
  beam_width: 1
  maximum_decoding_length: 64
EOF
rm -rf "$WORK/ct2" "$WORK/saved_model"
echo "[serve_bench] exporting ${CONFIGS[*]} to $WORK" >&2
ldr-export ctranslate2 --config "${CONFIGS[@]}" "$WORK/serve.yml" --output_dir "$WORK/ct2" >&2
# --benchmarks FILE among the options after --: the runtimes part adds its run there too.
RUNTIME_OPTIONS=()
ARGS=("$@")
for i in "${!ARGS[@]}"; do
  if [ "${ARGS[$i]}" = "--benchmarks" ] && [ $((i + 1)) -lt ${#ARGS[@]} ]; then
    RUNTIME_OPTIONS=(--benchmarks "${ARGS[$((i + 1))]}")
  fi
done
if [ -z "$RUNTIMES_ONLY" ]; then
  ldr-main --log_level ERROR --config "${CONFIGS[@]}" "$WORK/serve.yml" export \
    --output_dir "$WORK/saved_model" >&2 2>"$WORK/export.log" || {
    cat "$WORK/export.log" >&2
    exit 1
  }
  uptime >&2
  # Not exec: the trap above removes the temporary exports when the benchmark ends.
  python -m ldr_experiments.cli serve-bench --model_dir "$WORK/ct2" --saved_model "$WORK/saved_model" \
    --sentences "$CORPUS/raw/test.medical.en" --max_decoding_length 64 \
    --invoked_as "$INVOKED_AS" "$@"
fi
SERVE_BIN="$(source run/setup_serve.sh >&2 && dirname "$(command -v ldr-serve)")"
uptime >&2
python -m ldr_experiments.cli serve-runtimes --model_dir "$WORK/ct2" --serve_bin "$SERVE_BIN" \
  --train_bin "$(dirname "$(command -v python)")" \
  --sentences "$CORPUS/raw/test.medical.en" --max_decoding_length 64 \
  --invoked_as "$INVOKED_AS" "${RUNTIME_OPTIONS[@]}"
