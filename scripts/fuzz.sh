#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang-14, ASan + UBSan; -DEK_FUZZ=ON in build-fuzz/)
# and runs each for SECONDS (default 5) over a temporary copy of its committed corpus
# (fuzz/corpus/<reader>/, with fuzz/<reader>.dict when there is one), one at a time.
# Exits non-zero when any harness crashes, leaks, trips UBSan or exceeds 2 s on an
# input; the reproducer is kept under build-fuzz/fuzz-artifacts/. See fuzz/README.md.
#   fuzz.sh [SECONDS] [READER...]     e.g. fuzz.sh 600 pickle
# Environment: EK_FUZZ_BUILD (build folder, default build-fuzz), EK_FUZZ_JOBS (build
# jobs, default all cores).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_EACH=${1:-5}
shift || true
case "$SECONDS_EACH" in
  ''|*[!0-9]*) echo "fuzz: error: SECONDS must be a whole number, got '$SECONDS_EACH'" >&2; exit 2 ;;
esac
BUILD=${EK_FUZZ_BUILD:-$ROOT/build-fuzz}
JOBS=${EK_FUZZ_JOBS:-$(nproc)}
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

# clang and its sanitizer/libFuzzer runtime, as scripts/setup.sh installs its packages.
APT_PACKAGES=(clang-14 libclang-rt-14-dev)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "fuzz: apt-get install ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

t0=$(date +%s)
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
CC=clang-14 CXX=clang++-14 cmake -S "$ROOT" -B "$BUILD" -G Ninja -DEK_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DEK_BUILD_BENCH=OFF -DEK_COMPONENTS=all "${launcher[@]}" >/dev/null
cmake --build "$BUILD" -j"$JOBS"
t1=$(date +%s)
echo "fuzz: build $((t1 - t0)) s" >&2

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
failed=()
printf '%-16s %8s %7s %7s %7s  %s\n' reader exec/s cov ft corpus result
for r in "${readers[@]}"; do
  bin=$BUILD/fuzz/fuzz_$r
  if [ ! -x "$bin" ]; then
    echo "fuzz: error: $bin was not built" >&2
    failed+=("$r")
    continue
  fi
  corpus=$WORK/corpus-$r
  mkdir -p "$corpus"
  if [ -d "$ROOT/fuzz/corpus/$r" ]; then cp -r "$ROOT/fuzz/corpus/$r/." "$corpus/"; fi
  dict=()
  if [ -f "$ROOT/fuzz/$r.dict" ]; then dict=(-dict="$ROOT/fuzz/$r.dict"); fi
  log=$WORK/$r.log
  status=ok
  # TMPDIR: harnesses that read files write them in a private folder under it.
  if ! TMPDIR=$WORK nice -n 10 "$bin" "${dict[@]}" -max_total_time="$SECONDS_EACH" -timeout=2 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$ARTIFACTS/$r-" "$corpus" >"$log" 2>&1; then
    status=FAILED
    failed+=("$r")
  fi
  # The last status line: "#N DONE cov: C ft: F corp: K/S exec/s: E ..."
  line=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$line")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$line")
  corp=$(sed -nE 's/.* corp: ([0-9]+).*/\1/p' <<<"$line")
  eps=$(sed -nE 's/.* exec\/s: ([0-9]+).*/\1/p' <<<"$line")
  printf '%-16s %8s %7s %7s %7s  %s\n' "$r" "${eps:--}" "${cov:--}" "${ft:--}" "${corp:--}" "$status"
  if [ "$status" != ok ]; then
    echo "---- fuzz_$r (last 40 lines; reproducer in $ARTIFACTS) ----" >&2
    tail -40 "$log" >&2
  fi
done
t2=$(date +%s)
echo "fuzz: ${#readers[@]} harnesses x ${SECONDS_EACH} s: $((t2 - t1)) s fuzzing, $((t2 - t0)) s in all" >&2
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: error: ${failed[*]} failed" >&2
  exit 1
fi
