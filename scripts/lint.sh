#!/usr/bin/env bash
# The format check and clang-tidy, as CI runs them (scripts/test.sh's lint stage).
#   scripts/lint.sh            both: clang-format --dry-run -Werror, then clang-tidy
#   scripts/lint.sh --format   the format check only (no build needed)
#   scripts/lint.sh --fix      reformat every checked file in place (clang-format -i)
#   scripts/lint.sh --tidy-all both, clang-tidy over every library, CLI and binding source
# Checked: the C++ under src/, python/src, fuzz/ and bench/ that git tracks (*.cc, *.h),
# against .clang-format; the generated tables (*.inc) are their generators' output and are
# left alone. clang-tidy reads .clang-tidy and build/compile_commands.json (scripts/setup.sh's
# build; CMAKE_EXPORT_COMPILE_COMMANDS is on), over the library and binding sources.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-all}
case "$MODE" in all|--format|--fix|--tidy-all) ;; *) echo "lint: error: unknown option '$MODE'" >&2; exit 2 ;; esac
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
mkdir -p build
if ! "$CF" --dry-run -Werror "${files[@]}" >build/clang-format.log 2>&1; then
  head -n 30 build/clang-format.log >&2
  echo "lint: error: these files differ from .clang-format (all: build/clang-format.log;" \
    "bash scripts/lint.sh --fix reformats):" >&2
  grep -oE '^[^: ]+\.(cc|h):' build/clang-format.log | sort -u | tr -d : | sed 's/^/  /' >&2
  status=1
fi
t1=$(date +%s)
if [ "$MODE" = all ] || [ "$MODE" = --tidy-all ]; then
  [ -f build/compile_commands.json ] || {
    echo "lint: error: build/compile_commands.json is missing: bash scripts/setup.sh first" >&2; exit 1; }
  # The libraries, the CLI and the binding; the gtest files add parse time (gtest's headers)
  # for checks that find nothing there that the code under test does not show.
  mapfile -t tidy < <(printf '%s\n' "${files[@]}" | grep -E '^(src|python/src)/.*\.cc$' | grep -v '_test\.cc$')
  # Over all 98 sources clang-tidy takes about 4 min on this 2-core machine (3-5 s a file,
  # most of it parsing fmt, simdjson and httplib), more than the 3 min CI gives it. So CI
  # checks the sources the change touched: the .cc files changed since the merge base with
  # main or origin/main (or, on main itself, since the first parent: a merge's whole branch), and the .cc
  # beside each changed header. --tidy-all (or EK_TIDY_ALL=1) checks every one.
  if [ "$MODE" != --tidy-all ] && [ "${EK_TIDY_ALL:-0}" != 1 ]; then
    # A fresh clone of a branch has origin/main, not main.
    base=$(git merge-base HEAD main 2>/dev/null || git merge-base HEAD origin/main 2>/dev/null || true)
    if [ -z "$base" ] || [ "$base" = "$(git rev-parse HEAD)" ]; then
      base=$(git rev-parse -q --verify HEAD~1 || true)
    fi
    if [ -n "$base" ]; then
      changed=$(git diff --name-only "$base" -- 'src/*' 'python/src/*' | sed -E 's/\.h$/.cc/' | sort -u)
      mapfile -t tidy < <(printf '%s\n' "${tidy[@]}" | grep -Fxf <(printf '%s\n' "$changed") || true)
      echo "lint: clang-tidy over the ${#tidy[@]} sources changed since ${base:0:12} (all: --tidy-all)" >&2
    fi
  fi
  # build/ is a unity build (scripts/setup.sh): its database names the batch files
  # (Unity/unity_N_cxx.cxx, or unity_GROUP_cxx.cxx where a target batches by UNITY_GROUP:
  # src/tokenize), so clang-tidy reads one made from it with an entry per source,
  # each with its batch's command: the same flags, one configuration.
  mkdir -p build/tidy
  python3 - build/compile_commands.json build/tidy/compile_commands.json <<'PY'
import json, re, sys
out = []
for e in json.load(open(sys.argv[1])):
    f = e["file"]
    if not re.search(r"/Unity/unity_\w+_cxx\.cxx$", f):
        out.append(e)
        continue
    for src in re.findall(r'^#include "([^"]+)"', open(f).read(), re.M):
        out.append({**e, "file": src, "command": e["command"].replace(f, src)})
json.dump(out, open(sys.argv[2], "w"), indent=0)
PY
  # run-clang-tidy takes regular expressions; the paths are anchored to the project root.
  regex=()
  for f in "${tidy[@]}"; do regex+=("$PWD/${f//./\\.}\$"); done
  if [ ${#tidy[@]} -gt 0 ] && ! "$CT" -quiet -p build/tidy -j"$(nproc)" "${regex[@]}" >build/clang-tidy.log 2>&1; then
    # run-clang-tidy-14 always passes --use-color: the log is made plain text for CI's output.
    sed -i 's/\x1b\[[0-9;]*m//g' build/clang-tidy.log
    grep -E 'warning:|error:' build/clang-tidy.log | sort -u >&2 || cat build/clang-tidy.log >&2
    echo "lint: error: clang-tidy found the problems above (.clang-tidy; full log build/clang-tidy.log)" >&2
    status=1
  fi
fi
t2=$(date +%s)
echo "lint: format check $((t1 - t0)) s, clang-tidy $((t2 - t1)) s; status $status" >&2
exit $status
