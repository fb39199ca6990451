#!/usr/bin/env bash
# The gate over the report's data size: 16 ranks x 30,849 blocks x 2048 tokens
# (about 4 GB), warm page cache, against the report's 2.71 s for its six checks.
#   bash bench/gate/bench_gate.sh [WORKDIR]   (needs ~4 GB of disk; build first)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${EVENKEEL:-$ROOT/build/src/cli/evenkeel}
GEN=${MAKE_SYNTHETIC_PACK:-$ROOT/build/bench/gate/make_synthetic_pack}
WORK=${1:-/tmp/ek_gate_bench}
[ -x "$BIN" ] && [ -x "$GEN" ] || { echo "build first: cmake --build $ROOT/build" >&2; exit 1; }
if [ ! -f "$WORK/pack/manifest.json" ]; then
  "$GEN" "$WORK/pack" --world 16 --blocks 30849 --seq 2048
fi
cat > "$WORK/run.toml" <<TOML
[run]
name = "gate-bench"
[cluster]
nodes = 2
gpus_per_node = 8
[data]
pack_dir = "pack"
[model]
params = 32.76e9
[train]
seq_len = 2048
micro_batch = 1
grad_accum = 8
save_every = 500
[checkpoint]
dir = "ckpt"
keep = 1
write_gbps = 2.0
[gpu]
memory_gb = 275
TOML
export TORCH_FR_BUFFER_SIZE=2000
bytes=$(du -sb "$WORK/pack" | cut -f1)
# Warm the page cache, then time three runs.
cat "$WORK"/pack/rank-*.i32 > /dev/null
times=()
for i in 1 2 3; do
  s=$(date +%s.%N)
  "$BIN" gate "$WORK/run.toml" --log "$WORK/gate-log.json" > "$WORK/gate.out" || true
  e=$(date +%s.%N)
  times+=("$(echo "$e - $s" | bc -l)")
done
best=$(printf '%s\n' "${times[@]}" | sort -n | head -1)
cat "$WORK/gate.out"
printf 'gate over %.2f GB (16 ranks x 30,849 blocks x 2048 tokens), %d threads: best %.3f s of 3 (runs: %s)\n' \
  "$(echo "$bytes / 1000000000" | bc -l)" "$(nproc)" "$best" "${times[*]}"
printf 'field report: 2.71 s for the six checks across two nodes -> %.1fx faster\n' "$(echo "2.71 / $best" | bc -l)"
