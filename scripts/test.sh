#!/usr/bin/env bash
# Sets up, builds and runs every test: the C++ suites and end-to-end tests under ctest,
# then the Python suites (pytest) that drive the binary and the package against real
# peers (Hugging Face tokenizers and datasets, PyTorch with gloo, Prometheus,
# Alertmanager), then the unit tests under ASan+UBSan and the fuzz harnesses (fuzz/)
# from one clang build. Before the tests, the lint stage: the format check and clang-tidy
# (scripts/lint.sh). Exit status is non-zero if any test or check fails; nothing is skipped.
# Benchmarks are not built here: scripts/bench.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# Each stage's time as it ends (a run cut short still shows where its time went), and all
# of them again on the last line.
stage() { echo "test: stage $1: $(($(date +%s) - $2)) s (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2; }
t0=$(date +%s)
bash scripts/setup.sh
t1=$(date +%s); stage "setup and build" "$t0"
status=0
# The sanitizer build (build-san, for the stage at the end) runs from here on in the
# background, at the lowest priority: in a session of its own whose autogroup is niced to
# 19 (with autogroup scheduling, the kernel shares the CPU between sessions first, so a
# plain `nice` would still take a session's full share from the test ranks). It takes only
# the CPU the tests leave idle: the slow suite's ranks spend a quarter of its wall time
# waiting (rendezvous, checkpoint writes, hang and timeout tests). Its log is
# build-san/background-build.log; its exit status is awaited before the stage.
mkdir -p "$ROOT/build-san"
setsid -w bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null || true; exec nice -n 19 bash "$1/scripts/sanitizer_build.sh"' \
  sanitizer-build "$ROOT" >"$ROOT/build-san/background-build.log" 2>&1 &
san_pid=$!
san0=$(date +%s)
trap 'kill -- -"$san_pid" 2>/dev/null || true' EXIT
bash scripts/lint.sh || status=1
tl=$(date +%s); stage lint "$t1"
cd build
# Tokenizer parity against Hugging Face (tests/CMakeLists.txt) is part of every test run;
# a build where those tests went missing must not pass.
if ! grep -q tokenize_parity_corpus_qwen3 <<<"$(ctest -N)"; then
  echo "test: error: the tokenizer parity tests are not registered (tests/CMakeLists.txt)" >&2
  exit 1
fi
ctest --output-on-failure -j"$(nproc)" || status=1
t2=$(date +%s); stage ctest "$tl"
cd "$ROOT"
# (tests/watch runs under ctest as watch_e2e.) A suite folder that went missing fails the run.
suites=(tests/cli tests/pack tests/tokenizer_variants tests/trainer tests/launch tests/slurm tests/hardening tests/template)
for d in "${suites[@]}"; do
  [ -d "$d" ] || { echo "test: error: test folder $d is missing" >&2; exit 1; }
done
# Two runs over the same suites, every test in exactly one: the fast set, then the slow one
# (tests/conftest.py: modules whose tests start real PyTorch ranks). The fast set runs on
# two pytest-xdist workers, a module to a worker (--dist loadfile keeps a module's order):
# its tests wait on the binary and on Hugging Face's tokenizer in turn, so one worker left
# a core idle. The slow set stays on one: its tests start four ranks each, which load both
# cores already, and its hang and timeout tests measure real seconds.
EVENKEEL=$ROOT/build/src/cli/evenkeel "$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider --durations=10 \
  -n 2 --dist loadfile -m "not slow" "${suites[@]}" || status=1
t25=$(date +%s); stage "pytest fast" "$t2"
EVENKEEL=$ROOT/build/src/cli/evenkeel "$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider --durations=25 \
  -m slow "${suites[@]}" || status=1
t3=$(date +%s); stage "pytest slow" "$t25"
# The sanitizer stage: ONE clang build (build-san: ASan + UBSan, libraries also built with
# libFuzzer's coverage; scripts/sanitizer_build.sh, started in the background above) for
# two jobs, the unit tests under the sanitizers and every fuzz/ harness for a few seconds
# over its committed corpus and regressions. Any report fails the run.
wait_s=$(date +%s)
if ! wait "$san_pid"; then
  echo "test: error: the sanitizer build failed (build-san/background-build.log):" >&2
  tail -n 60 "$ROOT/build-san/background-build.log" >&2
  exit 1
fi
san1=$(date +%s)
echo "test: stage sanitizer build: done $((san1 - san0)) s after it started in the background;" \
  "the tests waited $((san1 - wait_s)) s for it" >&2
# The unit-labelled checks that compile nothing (the fixtures are their generators' output:
# python and shell) ran in build/ above; under the sanitizers only the gtest binaries.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$ROOT/build-san" -L unit -E '^(tokenize_tricky_fixture_current|triage_fixtures_fresh)$' \
  -j"$(nproc)" --output-on-failure || status=1
san2=$(date +%s); stage "sanitizer unit tests" "$san1"
EK_FUZZ_BUILD=$ROOT/build-san bash scripts/fuzz.sh --no-build --parallel "$(nproc)" 3 || status=1
san3=$(date +%s)
echo "test: sanitizer stage: waited $((san1 - wait_s)) s for the build, unit tests $((san2 - san1)) s," \
  "fuzz $((san3 - san2)) s" >&2
# The run report's page in a real browser (Debian chromium, puppeteer-core): node's test runner.
[ -d tests/report ] || { echo "test: error: test folder tests/report is missing" >&2; exit 1; }
EVENKEEL=$ROOT/build/src/cli/evenkeel node --test --test-concurrency=1 tests/report/ || status=1
t4=$(date +%s)
# Where the time went (CI shows the end of the output).
echo "test: times: setup and build $((t1 - t0)) s, lint $((tl - t1)) s, ctest $((t2 - tl)) s," \
  "pytest $((t3 - t2)) s (fast $((t25 - t2)) s, slow $((t3 - t25)) s)," \
  "sanitizer stage $((san3 - wait_s)) s, browser $((t4 - san3)) s, total $((t4 - t0)) s; status $status" >&2
exit $status
