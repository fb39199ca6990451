#!/usr/bin/env bash
# Scale benchmark for `evenkeel fr` (the target: 1,024 ranks x 2,000 entries in
# under 2 s and under 2 GB). Generates the dumps once into bench/out/fr/, then
# times the analysis (wall clock and peak RSS from /usr/bin/time, best of 3).
#   bash bench/fr/run_bench.sh [BUILD_DIR=build] [RANKS=1024] [ENTRIES=2000]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
RANKS=${2:-1024}
ENTRIES=${3:-2000}
BIN=$BUILD/src/cli/evenkeel
OUT=bench/out/fr/scale_${RANKS}x${ENTRIES}
if [ ! -f "$OUT/nccl_trace_rank_$((RANKS - 1))" ]; then
  python3 bench/fr/gen_scale.py "$OUT" "$RANKS" "$ENTRIES"
fi
echo "input: $(du -sh "$OUT" | cut -f1) in $RANKS files; $(nproc) cores"
cat "$OUT"/* > /dev/null  # page cache warm, as after the dumps were just copied
best=""
for i in 1 2 3; do
  /usr/bin/time -f "%e %M" -o /tmp/ek_fr_time.$$ "$BIN" fr "$OUT" > /tmp/ek_fr_out.$$
  read -r secs kb < /tmp/ek_fr_time.$$
  echo "run $i: ${secs} s, peak RSS $((kb / 1024)) MiB"
  if [ -z "$best" ] || awk "BEGIN{exit !($secs < $best)}"; then best=$secs; fi
done
head -1 /tmp/ek_fr_out.$$
rm -f /tmp/ek_fr_time.$$ /tmp/ek_fr_out.$$
echo "best: ${best} s (target < 2 s, < 2 GB)"
