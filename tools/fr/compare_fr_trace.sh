#!/usr/bin/env bash
# Runs PyTorch's own analyzer (fr_trace, from the project venv: pip install
# torch tabulate) and `evenkeel fr` on each fixture and prints both first
# findings side by side. Not part of CI (CI has no torch); the outcome is
# pinned in src/flightrec/analyzer_test.cc and docs/fr.md.
#   bash tools/fr/compare_fr_trace.sh [BUILD_DIR=build]
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-build}/src/cli/evenkeel
PY=.venv/bin/python
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for dir in testdata/fr/*/ testdata/fr/real/*/ testdata/fr/gloo/*/; do
  name=${dir%/}
  case $name in testdata/fr/real | testdata/fr/gloo) continue ;; esac
  # fr_trace walks subfolders and reads only pickles: give it the top-level files.
  rm -rf "$tmp/d" && mkdir "$tmp/d" && find "$name" -maxdepth 1 -type f -exec cp {} "$tmp/d/" \;
  echo "== $name"
  echo -n "fr_trace: "
  timeout 120 "$PY" -m torch.distributed.flight_recorder.fr_trace "$tmp/d" 2>&1 |
    grep -E "sequence number|error msg|missing ranks|Error:" | head -3 | tr '\n' ' ' | cut -c1-400
  echo
  echo -n "evenkeel: "
  "$BIN" fr "$name" 2>/dev/null | grep -E "^verdict" | cut -c1-400
done
