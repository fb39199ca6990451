#!/usr/bin/env bash
# The stages scripts/test.sh runs in the background while its stages run in front:
# 1. the sanitizer build (scripts/sanitizer_build.sh: build-san, ONE clang build with ASan +
#    UBSan whose libraries are also built with libFuzzer's coverage), from the start, at the
#    lowest priority: in a session of its own whose autogroup is niced to 19 (with autogroup
#    scheduling the kernel shares the CPU between sessions first, so a plain `nice` would
#    still take a session's full share from the test ranks). It takes only the CPU the
#    tests leave idle. Its log: build-san/background-build.log.
# Beside it, the stages that need only build/:
# 2. the run report's page in a real browser (Debian chromium, puppeteer-core), in a
#    session raised above the rest (its bounds are real time: a first render under 3 s);
# 3. ctest's slow label in build/: the tokenizer parity on the 50 MB corpus (no real-time
#    bound), niced like the build;
# and once the build is done:
# 4. the unit tests under the sanitizers and every fuzz/ harness for a few seconds over its
#    committed corpus and regressions (any report fails), in this script's own session at
#    the normal priority: one autogroup's share beside the slow suite's ranks.
# On CI's cold machine the sanitizer build is the long one (its compiler cache is empty), so
# the stages that do not need it no longer wait for it. Exit status: 0 when all pass, 1 when
# any fails, 3 when the sanitizer build fails. Run alone, it does the same in front.
set -uo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT"
stage() { echo "test: stage $1: $(($(date +%s) - $2)) s (load average $(cut -d' ' -f1-3 /proc/loadavg))"; }
mkdir -p "$ROOT/build-san"
b0=$(date +%s)
setsid -w bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null || true; exec nice -n 19 bash "$1/scripts/sanitizer_build.sh"' \
  sanitizer-build "$ROOT" >"$ROOT/build-san/background-build.log" 2>&1 &
build_pid=$!
trap 'kill -- -"$build_pid" 2>/dev/null || true' EXIT
trap 'exit 143' TERM INT
status=0
[ -d tests/report ] || { echo "test: error: test folder tests/report is missing"; exit 1; }
# 2. The browser tests, in a session of its own whose autogroup is raised (nice -15; only
# root may, elsewhere it stays at 0): beside the test stages at the normal priority the
# report's first render, bounded in real time, waits for its share of the CPU.
setsid -w bash -c 'echo -15 >/proc/self/autogroup 2>/dev/null || true; exec "$@"' browser \
  env EVENKEEL="$ROOT/build/src/cli/evenkeel" node --test --test-concurrency=1 tests/report/ &
browser_pid=$!
trap 'kill -- -"$build_pid" -"$browser_pid" 2>/dev/null || true' EXIT
wait "$browser_pid" || status=1
b1=$(date +%s); stage "browser" "$b0"
# 3. ctest's slow label in build/ (scripts/test.sh runs the rest there): the tokenizer parity
# on the 50 MB corpus, one test per tokenizer, and the corpus's generator (its fixture).
setsid -w bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null || true; exec nice -n 19 "$@"' corpus-parity \
  ctest --test-dir "$ROOT/build" -L slow -j"$(nproc)" --output-on-failure &
corpus_pid=$!
trap 'kill -- -"$build_pid" -"$corpus_pid" 2>/dev/null || true' EXIT
wait "$corpus_pid" || status=1
b2=$(date +%s); stage "ctest slow label (niced)" "$b1"
if ! wait "$build_pid"; then
  echo "test: error: the sanitizer build failed (build-san/background-build.log):"
  tail -n 60 "$ROOT/build-san/background-build.log"
  exit 3
fi
b3=$(date +%s); stage "sanitizer build (niced, from the start)" "$b0"
# 4. The unit-labelled checks that compile nothing (the fixtures are their generators' output:
# python and shell) ran in build/ already; under the sanitizers only the gtest binaries.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$ROOT/build-san" -L unit -E '^(tokenize_tricky_fixture_current|triage_fixtures_fresh)$' \
  -j"$(nproc)" --output-on-failure || status=1
b4=$(date +%s); stage "sanitizer unit tests" "$b3"
EK_FUZZ_BUILD=$ROOT/build-san bash scripts/fuzz.sh --no-build --parallel "$(nproc)" 3 || status=1
b5=$(date +%s); stage "fuzz" "$b4"
echo "test: background stages: browser $((b1 - b0)) s, ctest slow label $((b2 - b1)) s, sanitizer build" \
  "$((b3 - b0)) s from the start (awaited $((b3 - b2)) s after the two), sanitizer unit tests $((b4 - b3)) s," \
  "fuzz $((b5 - b4)) s; status $status"
exit $status
