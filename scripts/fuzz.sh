#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/; clang-14, ASan + UBSan, EK_SANITIZE=ON and
# EK_FUZZ=ON in build-san/, the same tree as the sanitizer unit tests) and runs each
# for SECONDS over a scratch copy of its committed corpus (fuzz/corpus/<reader>/) and,
# read-only, its regressions (fuzz/regressions/<reader>/), with fuzz/<reader>.dict when
# there is one. Every committed input runs first, whatever SECONDS is. Exits non-zero
# when any harness crashes, leaks, trips UBSan or spends over TIMEOUT s on one input;
# the reproducer is kept under BUILD/fuzz-artifacts/. See fuzz/README.md.
#
#   fuzz.sh [--no-build] [--parallel N] [--keep DIR] [--fork] SECONDS [READER...]
#     --no-build    use the harnesses already in BUILD (scripts/test.sh builds them)
#     --parallel N  run N harnesses at a time (default 1)
#     --keep DIR    keep each grown corpus (DIR/<reader>/) and libFuzzer log (DIR/<reader>.log)
#     --fork        long runs: libFuzzer's -fork=1, which goes on past a crash, timeout or
#                   out-of-memory (each reproducer is still kept, and still fails the run)
# Environment: EK_FUZZ_BUILD (default build-san), EK_FUZZ_NICE (default 10),
# EK_FUZZ_TIMEOUT (seconds per input, default 10), EK_FUZZ_JOBS (build jobs, default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_IT=1 PARALLEL=1 KEEP="" FORK=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD_IT=0; shift ;;
    --parallel) PARALLEL=$2; shift 2 ;;
    --keep) KEEP=$(realpath -m "$2"); shift 2 ;;
    --fork) FORK=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1); shift ;;
    -*) echo "fuzz: error: unknown option '$1'" >&2; exit 2 ;;
    *) break ;;
  esac
done
SECONDS_EACH=${1:-}
case "$SECONDS_EACH" in
  ''|*[!0-9]*) echo "fuzz: error: SECONDS must be a whole number, got '$SECONDS_EACH' (fuzz.sh [options] SECONDS [READER...])" >&2; exit 2 ;;
esac
shift
BUILD=${EK_FUZZ_BUILD:-$ROOT/build-san}
NICE=${EK_FUZZ_NICE:-10}
TIMEOUT=${EK_FUZZ_TIMEOUT:-10}

if [ "$BUILD_IT" = 1 ]; then
  command -v clang++-14 >/dev/null ||
    { echo "fuzz: error: clang++-14 not found (scripts/setup.sh installs clang-14 and libclang-rt-14-dev)" >&2; exit 1; }
  CC=clang-14 CXX=clang++-14 cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DEK_SANITIZE=ON -DEK_FUZZ=ON -DEK_BUILD_BENCH=OFF -DEK_COMPONENTS=all \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache >/dev/null
  cmake --build "$BUILD" -j"${EK_FUZZ_JOBS:-$(nproc)}" --target fuzzers
fi

readers=("$@")
if [ ${#readers[@]} -eq 0 ]; then
  for f in "$ROOT"/fuzz/fuzz_*.cc; do
    r=$(basename "$f" .cc)
    readers+=("${r#fuzz_}")
  done
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ek-fuzz.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
ARTIFACTS=$BUILD/fuzz-artifacts
mkdir -p "$ARTIFACTS"
[ -z "$KEEP" ] || mkdir -p "$KEEP"

# One harness: writes WORK/<reader>.rc and WORK/<reader>.log.
run_one() {
  local r=$1 bin=$BUILD/fuzz/fuzz_$1 corpus dict=() regress=() rc=0
  if [ ! -x "$bin" ]; then
    echo "fuzz: error: $bin was not built" >"$WORK/$r.log"
    echo 1 >"$WORK/$r.rc"
    return
  fi
  corpus=${KEEP:-$WORK}/$r
  mkdir -p "$corpus" "$WORK/tmp-$r"
  if [ -d "$ROOT/fuzz/corpus/$r" ]; then cp -r "$ROOT/fuzz/corpus/$r/." "$corpus/"; fi
  if [ -d "$ROOT/fuzz/regressions/$r" ]; then regress=("$ROOT/fuzz/regressions/$r"); fi
  if [ -f "$ROOT/fuzz/$r.dict" ]; then dict=(-dict="$ROOT/fuzz/$r.dict"); fi
  # TMPDIR: harnesses that read files write them in a private folder under it.
  TMPDIR=$WORK/tmp-$r nice -n "$NICE" "$bin" "${FORK[@]}" "${dict[@]}" -max_total_time="$SECONDS_EACH" -timeout="$TIMEOUT" \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$ARTIFACTS/$r-" \
    "$corpus" "${regress[@]}" >"$WORK/$r.log" 2>&1 || rc=$?
  echo "$rc" >"$WORK/$r.rc"
  [ -z "$KEEP" ] || cp "$WORK/$r.log" "$KEEP/$r.log"
}

t0=$(date +%s)
running=0
for r in "${readers[@]}"; do
  run_one "$r" &
  running=$((running + 1))
  if [ "$running" -ge "$PARALLEL" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
t1=$(date +%s)

# libFuzzer's last status line ("#N DONE cov: C ft: F corp: K/S exec/s: E ..."; in fork
# mode "#N: cov: C ft: F corp: K exec/s E oom/timeout/crash: O/T/C ...") and final stats.
failed=()
printf '%-16s %10s %8s %7s %7s %7s  %s\n' reader execs exec/s cov ft corpus result
for r in "${readers[@]}"; do
  log=$WORK/$r.log
  rc=$(cat "$WORK/$r.rc" 2>/dev/null || echo 1)
  line=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  field() { sed -nE "s/.* $1:? ([0-9]+).*/\\1/p" <<<"$line"; }
  execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
  eps=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log" | tail -1)
  [ -n "$execs" ] || execs=$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$line")
  [ -n "$eps" ] || eps=$(field exec/s)
  status=ok
  if [ "$rc" != 0 ]; then status=FAILED; fi
  bad=$(sed -nE 's/.*oom\/timeout\/crash: ([0-9]+\/[0-9]+\/[0-9]+).*/\1/p' <<<"$line")
  if [ -n "$bad" ] && [ "$bad" != 0/0/0 ]; then status="FAILED (oom/timeout/crash $bad)"; fi
  [ "$status" = ok ] || failed+=("$r")
  printf '%-16s %10s %8s %7s %7s %7s  %s\n' "$r" "${execs:--}" "${eps:--}" "$(field cov)" "$(field ft)" \
    "$(field corp)" "$status"
  if [ "$status" != ok ]; then
    echo "---- fuzz_$r (last 40 lines; reproducers in $ARTIFACTS) ----" >&2
    tail -40 "$log" >&2
  fi
done
echo "fuzz: ${#readers[@]} harnesses x ${SECONDS_EACH} s (${PARALLEL} at a time): $((t1 - t0)) s" >&2
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: error: ${failed[*]} failed" >&2
  exit 1
fi
