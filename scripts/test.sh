#!/usr/bin/env bash
# Sets up, builds and runs every test: the C++ suites and end-to-end tests under ctest,
# then the Python suites (pytest) that drive the binary and the package against real
# peers (Hugging Face tokenizers and datasets, PyTorch with gloo, Prometheus,
# Alertmanager); beside them, in the background (scripts/background_stage.sh), the unit
# tests under ASan+UBSan and the fuzz harnesses (fuzz/) from one clang build, the
# report's browser tests and ctest's slow label (the corpus parity). Before the tests, the
# lint stage: the format check and clang-tidy (scripts/lint.sh). Exit status is non-zero if
# any test or check fails; nothing is skipped.
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
# What failed, named again on the last lines (CI shows only the end of the output, and the
# background stages' log is printed after the front stages): each failing stage, and for a
# test stage the lines that name its failed tests, kept from its log in build/test-logs.
failed=()
logs=$ROOT/build/test-logs
mkdir -p "$logs"
# fail STAGE [LOG PATTERN [DETAIL]]: records STAGE as failed, with LOG's lines matching
# PATTERN, then (cut to 240 characters, the last 60) those matching DETAIL.
fail() {
  status=1
  failed+=("$1")
  if [ $# -ge 3 ] && [ -f "$2" ]; then
    grep -E "$3" "$2" | tail -n 40 | sed "s|^|  $1: |" >>"$logs/failures.txt" || true
    if [ $# -ge 4 ]; then
      grep -E "$4" "$2" | cut -c1-240 | tail -n 60 | sed "s|^|  $1 | |" >>"$logs/failures.txt" || true
    fi
  fi
}
: >"$logs/failures.txt"
# The background stages (scripts/background_stage.sh) run from here on, beside the stages
# in front: the sanitizer build at the lowest priority from the start; beside it the browser
# tests and the corpus parity; once it is built, the unit tests under the sanitizers and
# the fuzz harnesses. They fill the time the slow pytest suite spends waiting. Their
# output is build-san/background.log, shown at the end; their exit status is awaited there.
mkdir -p "$ROOT/build-san"
setsid -w bash "$ROOT/scripts/background_stage.sh" "$ROOT" >"$ROOT/build-san/background.log" 2>&1 &
bg_pid=$!
trap 'kill -- -"$bg_pid" 2>/dev/null || true' EXIT
bash scripts/lint.sh 2>&1 | tee "$logs/lint.log" || fail lint "$logs/lint.log" "error|warning|^[-+]"
tl=$(date +%s); stage lint "$t1"
cd build
# Tokenizer parity against Hugging Face (tests/CMakeLists.txt) is part of every test run;
# a build where those tests went missing must not pass.
if ! grep -q tokenize_parity_corpus_qwen3 <<<"$(ctest -N)"; then
  echo "test: error: the tokenizer parity tests are not registered (tests/CMakeLists.txt)" >&2
  exit 1
fi
# One test slot more than cores: watch_e2e (started first, COST in src/watch/CMakeLists.txt)
# spends most of its ~90 s waiting, and would hold a core's slot idle for all of it. The
# slow label (the 50 MB corpus parity, one test per tokenizer: half of ctest's CPU and no
# real-time bound) runs in the background stages instead, in the time the slow pytest
# suite waits; together the two runs are every test ctest knows.
ctest --output-on-failure -LE slow -j"$(($(nproc) + 1))" 2>&1 | tee "$logs/ctest.log" ||
  fail ctest "$logs/ctest.log" '^[[:space:]]+[0-9]+ - |\*\*\*(Failed|Timeout|Exception)'
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
# What names a pytest run's failures: its FAILED/ERROR lines and its count line.
pytest_failed='^(FAILED|ERROR) |^=* ?[0-9]+ (failed|passed|error).* in [0-9.]+s'
# and the lines of their tracebacks that say why: a failed assertion's first line shows only
# that a rank failed ("--- rank 0 (exit 1) ---"); the ranks' own errors follow it.
pytest_why='^(_{3,} .* _{3,}$|E .*(--- rank|Error|Exception|Traceback|[Tt]imed? ?out|Killed|signal|error:|exit))|^[a-z_/]+\.py:[0-9]+: '
EVENKEEL=$ROOT/build/src/cli/evenkeel "$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider --durations=10 \
  -n 2 --dist loadfile -m "not slow" "${suites[@]}" 2>&1 | tee "$logs/pytest-fast.log" ||
  fail "pytest fast" "$logs/pytest-fast.log" "$pytest_failed" "$pytest_why"
t25=$(date +%s); stage "pytest fast" "$t2"
EVENKEEL=$ROOT/build/src/cli/evenkeel "$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider --durations=25 \
  -m slow "${suites[@]}" 2>&1 | tee "$logs/pytest-slow.log" ||
  fail "pytest slow" "$logs/pytest-slow.log" "$pytest_failed" "$pytest_why"
t3=$(date +%s); stage "pytest slow" "$t25"
wait_s=$(date +%s)
bg_status=0
wait "$bg_pid" || bg_status=$?
t4=$(date +%s)
echo "test: the background stages (build-san/background.log), awaited $((t4 - wait_s)) s:" >&2
cat "$ROOT/build-san/background.log" >&2
[ "$bg_status" = 0 ] || fail "background stages" "$ROOT/build-san/background.log" \
  'error|FAILED|Failed|\*\*\*|status [1-9]|result.*(crash|fail)'
# Where the time went (CI shows the end of the output).
echo "test: times: setup and build $((t1 - t0)) s, lint $((tl - t1)) s, ctest $((t2 - tl)) s," \
  "pytest $((t3 - t2)) s (fast $((t25 - t2)) s, slow $((t3 - t25)) s)," \
  "then waited $((t4 - wait_s)) s for the background stages, total $((t4 - t0)) s; status $status" >&2
if [ ${#failed[@]} -gt 0 ]; then
  echo "test: failed: $(IFS=,; echo "${failed[*]}" | sed 's/,/, /g') (logs in build/test-logs):" >&2
  cat "$logs/failures.txt" >&2
fi
exit $status
