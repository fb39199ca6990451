#!/usr/bin/env bash
# The format check and clang-tidy, as CI runs them (scripts/test.sh's lint stage).
#   scripts/lint.sh            both: clang-format --dry-run -Werror, then clang-tidy
#   scripts/lint.sh --format   the format check only (no build needed)
#   scripts/lint.sh --fix      reformat every checked file in place (clang-format -i)
# Checked: the C++ under src/, python/src, fuzz/ and bench/ that git tracks (*.cc, *.h),
# against .clang-format; the generated tables (*.inc) are their generators' output and are
# left alone. clang-tidy reads .clang-tidy and build/compile_commands.json (scripts/setup.sh's
# build; CMAKE_EXPORT_COMPILE_COMMANDS is on), over the library and binding sources.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-all}
case "$MODE" in all|--format|--fix) ;; *) echo "lint: error: unknown option '$MODE'" >&2; exit 2 ;; esac
CF=${CLANG_FORMAT:-clang-format-14}
CT=${RUN_CLANG_TIDY:-run-clang-tidy-14}
mapfile -t files < <(git ls-files -- 'src/*.cc' 'src/*.h' 'python/src/*.cc' 'python/src/*.h' \
  'fuzz/*.cc' 'fuzz/*.h' 'bench/*.cc' 'bench/*.h')
if [ "$MODE" = --fix ]; then
  "$CF" -i "${files[@]}"
  exit 0
fi
status=0
t0=$(date +%s)
if ! "$CF" --dry-run -Werror "${files[@]}"; then
  echo "lint: error: files above differ from .clang-format: bash scripts/lint.sh --fix" >&2
  status=1
fi
t1=$(date +%s)
if [ "$MODE" = all ]; then
  [ -f build/compile_commands.json ] || {
    echo "lint: error: build/compile_commands.json is missing: bash scripts/setup.sh first" >&2; exit 1; }
  # The libraries, the CLI and the binding; the gtest files add parse time (gtest's headers)
  # for checks that find nothing there that the code under test does not show.
  mapfile -t tidy < <(printf '%s\n' "${files[@]}" | grep -E '^(src|python/src)/.*\.cc$' | grep -v '_test\.cc$')
  # run-clang-tidy takes regular expressions; the paths are anchored to the project root.
  regex=()
  for f in "${tidy[@]}"; do regex+=("$PWD/${f//./\\.}\$"); done
  if ! "$CT" -quiet -p build -j"$(nproc)" "${regex[@]}" >build/clang-tidy.log 2>&1; then
    grep -E 'warning:|error:' build/clang-tidy.log | sort -u >&2 || cat build/clang-tidy.log >&2
    echo "lint: error: clang-tidy found the problems above (.clang-tidy; full log build/clang-tidy.log)" >&2
    status=1
  fi
fi
t2=$(date +%s)
echo "lint: format check $((t1 - t0)) s, clang-tidy $((t2 - t1)) s; status $status" >&2
exit $status
