#!/usr/bin/env bash
# Builds the benchmarks in their own tree (build-bench/: Release, -DEK_BUILD_BENCH=ON) and
# runs them. The test build (scripts/setup.sh's build/) has none: CI never runs them.
#   scripts/bench.sh            the Google Benchmark suites (tokenize_bench, triage_bench) and
#                               the report at 1,024 GPUs (bench/report/bench_scale.py)
#   scripts/bench.sh -- ARGS    pass ARGS to the Google Benchmark binaries, e.g. a quick
#                               check that they build and run: -- --benchmark_min_time=0.01
#   scripts/bench.sh --peers    also the side-by-side scripts against the peers (README's
#                               table): tokenize (Qwen3, Llama 3, Gemma 3 against HF
#                               tokenizers, fastokens, bpe-qwen), pack, chat pack, templates.
#                               Needs scripts/setup.sh's npm and venv peers and the 50 MB
#                               corpus (made by tools/corpus/make_corpus.py if missing); minutes.
# The gate at the report's size (bench/gate/bench_gate.sh, 4 GB of disk) and the flight
# recorder's (bench/fr/run_bench.sh) are run by hand; both take their binaries from here:
#   EVENKEEL=build-bench/src/cli/evenkeel MAKE_SYNTHETIC_PACK=build-bench/bench/gate/make_synthetic_pack bash bench/gate/bench_gate.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PEERS=0
GB_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --peers) PEERS=1; shift ;;
    --) shift; GB_ARGS=("$@"); break ;;
    *) echo "bench: error: unknown option '$1' (bench.sh [--peers] [-- BENCHMARK_ARGS...])" >&2; exit 2 ;;
  esac
done
B=$ROOT/build-bench
cmake -S "$ROOT" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DEK_COMPONENTS=all -DEK_BUILD_BENCH=ON >/dev/null
cmake --build "$B" -j"$(nproc)" --target evenkeel tokenize_bench triage_bench template_bench make_synthetic_pack \
  make_scale_telemetry
"$B/bench/tokenize_bench" "${GB_ARGS[@]}"
"$B/bench/triage/triage_bench" "${GB_ARGS[@]}"
# The report at 1,024 GPUs x 6 h: its 10 s bound is measured here, alone, not in the browser test.
"$ROOT/.venv/bin/python" bench/report/bench_scale.py --evenkeel "$B/src/cli/evenkeel" \
  --make-scale "$B/bench/report/make_scale_telemetry" --dir "$B/report-scale"
if [ "$PEERS" = 1 ]; then
  PY=$ROOT/.venv/bin/python
  "$PY" tools/corpus/make_corpus.py --if-missing --quiet
  "$PY" bench/tokenize/bench_tokenize.py --evenkeel "$B/src/cli/evenkeel" --bench-bin "$B/bench/tokenize_bench"
  EVENKEEL=$B/src/cli/evenkeel "$PY" bench/pack/bench_pack.py
  EVENKEEL=$B/src/cli/evenkeel "$PY" bench/pack/bench_chat.py
  EVENKEEL=$B/src/cli/evenkeel "$PY" bench/pack/bench_inputs.py
  EVENKEEL=$B/src/cli/evenkeel "$PY" bench/pack_parquet_vs_jsonl.py
  "$PY" bench/template/bench_template.py --bench-bin "$B/bench/template/template_bench"
  "$PY" bench/trainer/bench_saves.py
fi
