#!/usr/bin/env python3
"""The reference trainer: the field report's recipe at a size that runs on a CPU.

A decoder-only transformer sharded with FSDP2 (`fully_shard` per layer, then the
root), AdamW, linear warmup then cosine decay, bf16 mixed precision on CUDA (fp32
on CPU), gradient accumulation, blocks from an evenkeel pack through BlockDataset
and evenfix, a checkpoint every --save-every steps and at each epoch end, each
guarded by dist.barrier() (the report's save barrier), and weights-only resume
from the newest checkpoint.

Launch with torchrun (or any launcher that sets RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT):

    torchrun --nproc-per-node 4 trainer/train.py --pack PACK --ckpt-dir CKPT --evenfix min

Backend nccl on CUDA, gloo on CPU; --timeout is the collective timeout. The
flight recorder follows torch's variables (TORCH_FR_BUFFER_SIZE or
TORCH_NCCL_TRACE_BUFFER_SIZE; 0 turns it off). NCCL dumps it on a timeout by
itself; on gloo this trainer writes the same pickle when a collective fails, to
TORCH_FR_DUMP_TEMP_FILE (or TORCH_NCCL_DEBUG_INFO_TEMP_FILE) + rank.

Each rank prints `[rank R] ...` lines: evenfix's, the plan, errors with the phase
they hit (forward, backward, optimizer, save_barrier, save), and `done`.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import math
import os
import pickle
import sys
import time
import traceback
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                     set_model_state_dict)
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from evenkeel import BlockDataset, Heartbeat, evenfix


# ---------------------------------------------------------------------------------------------
# Model


@dataclass
class ModelConfig:
    vocab_size: int
    seq_len: int
    d_model: int = 64
    layers: int = 2
    heads: int = 4
    ffn_mult: int = 4


class Block(nn.Module):
    """Pre-norm decoder layer: causal self-attention, then a GELU MLP."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.heads = c.heads
        self.norm1 = nn.LayerNorm(c.d_model)
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model, bias=False)
        self.proj = nn.Linear(c.d_model, c.d_model, bias=False)
        self.norm2 = nn.LayerNorm(c.d_model)
        self.up = nn.Linear(c.d_model, c.ffn_mult * c.d_model, bias=False)
        self.down = nn.Linear(c.ffn_mult * c.d_model, c.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class Decoder(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.embed = nn.Embedding(c.vocab_size, c.d_model)
        self.pos = nn.Embedding(c.seq_len, c.d_model)
        self.layers = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def shard(model: Decoder, on_cuda: bool, reshard_after_forward: bool) -> None:
    """FSDP2 FULL_SHARD: each decoder layer is a unit (the report's Qwen3DecoderLayer
    auto-wrap), the root holds the embeddings and the head."""
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if on_cuda \
        else MixedPrecisionPolicy()
    for layer in model.layers:
        fully_shard(layer, mp_policy=mp, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mp_policy=mp, reshard_after_forward=reshard_after_forward)


def lr_lambda(warmup: int, total: int, min_ratio: float):
    def f(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
    return f


# ---------------------------------------------------------------------------------------------
# Run state, logging and the flight recorder


class Run:
    """Where this rank is, so a failed collective can say what the rank was doing."""

    def __init__(self, rank: int):
        self.rank = rank
        self.phase = "init"
        self.phase_since = time.monotonic()
        self.global_step = 0

    def enter(self, phase: str) -> None:
        self.phase = phase
        self.phase_since = time.monotonic()

    def log(self, msg: str) -> None:
        sys.stdout.write(f"[rank {self.rank}] {msg}\n")  # one write: ranks may share a pipe
        sys.stdout.flush()


def dump_flight_recorder(run: Run, backend: str) -> str | None:
    """Writes this rank's flight-recorder pickle where torch's own dump would go."""
    size = os.environ.get("TORCH_FR_BUFFER_SIZE") or os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE")
    if size is not None and int(size) <= 0:
        return None
    if backend == "nccl":
        return None  # the NCCL watchdog dumps on timeout (TORCH_NCCL_DUMP_ON_TIMEOUT)
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    if not prefix:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        prefix = os.path.join(cache, "torch", "comm_lib_trace_rank_")
    try:
        data = torch._C._distributed_c10d._dump_fr_trace()
    except Exception as e:  # a recorder that cannot dump must not hide the real error
        run.log(f"flight recorder: no dump: {e}")
        return None
    path = f"{prefix}{run.rank}"
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    entries = pickle.loads(data).get("entries", [])
    if entries:
        last = entries[-1]
        run.log(f"flight recorder: last collective {last['profiling_name']} "
                f"seq {last['collective_seq_id']} ({len(entries)} entries) -> {path}")
    return path


# ---------------------------------------------------------------------------------------------
# Checkpoints: full (unsharded) state dicts, gathered by all ranks, written by rank 0 atomically.


def checkpoint_path(ckpt_dir: str, step: int) -> str:
    return os.path.join(ckpt_dir, f"step-{step:08d}.pt")


def latest_checkpoint(ckpt_dir: str) -> str | None:
    found = sorted(glob.glob(os.path.join(ckpt_dir, "step-*.pt")))
    return found[-1] if found else None


def save_checkpoint(run: Run, model: nn.Module, ckpt_dir: str, meta: dict) -> str:
    """The report's save: every rank enters the barrier, then gathers; rank 0 writes."""
    run.enter("save_barrier")
    run.log(f"save barrier at step {run.global_step}")
    dist.barrier()
    run.enter("save")
    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    path = checkpoint_path(ckpt_dir, run.global_step)
    if run.rank == 0:
        os.makedirs(ckpt_dir, exist_ok=True)
        tmp = f"{path}.tmp.{os.getpid()}"
        with open(tmp, "wb") as f:
            torch.save({"model": state, **meta}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # a crash leaves the previous checkpoint, never half of this one
    run.log(f"saved {path}")
    return path


def load_weights(model: nn.Module, path: str) -> dict:
    """Weights-only resume: rank 0 reads the file, the weights are broadcast; the
    optimizer starts fresh. Returns the checkpoint's metadata."""
    blob = torch.load(path, map_location="cpu", weights_only=True) if dist.get_rank() == 0 else {}
    meta_list = [{k: v for k, v in blob.items() if k != "model"}]
    dist.broadcast_object_list(meta_list, src=0)
    set_model_state_dict(model, blob.get("model", {}),
                         options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    return meta_list[0]


# ---------------------------------------------------------------------------------------------
# Training


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pack", required=True, help="pack directory (evenkeel pack --out)")
    p.add_argument("--ckpt-dir", required=True, help="checkpoint directory")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many optimizer steps (0: no cap)")
    p.add_argument("--micro-batch", type=int, default=1, help="blocks per micro-batch")
    p.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--warmup", type=int, default=10, help="warmup steps")
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--save-every", type=int, default=0, help="checkpoint every N steps (0: epoch ends only)")
    p.add_argument("--evenfix", choices=["min", "pad", "off"], default="min")
    p.add_argument("--timeout", type=float, default=1800, help="collective timeout, seconds")
    p.add_argument("--seed", type=int, default=0, help="data order and model init")
    p.add_argument("--no-shuffle", action="store_true")
    p.add_argument("--no-resume", action="store_true", help="ignore checkpoints in --ckpt-dir")
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab-size", type=int, default=0, help="model vocabulary (0: the pack's)")
    p.add_argument("--no-reshard-after-forward", action="store_true",
                   help="keep parameters gathered between forward and backward (SHARD_GRAD_OP)")
    p.add_argument("--log-every", type=int, default=1)
    p.add_argument("--heartbeat-dir", default=os.environ.get("EVENKEEL_HEARTBEAT_DIR", ""),
                   help="write an evenkeel heartbeat per step here, for evenkeel agent/watch")
    return p.parse_args(argv)


def train(args: argparse.Namespace, run: Run, backend: str, device: torch.device) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    ds = BlockDataset(args.pack, rank, seed=args.seed, shuffle=not args.no_shuffle)
    if ds.world != world:
        raise SystemExit(f"train: the pack is for world {ds.world}, this run has {world} ranks")
    evenfix(ds, mode=args.evenfix)
    pinned = len(ds)  # blocks this rank iterates per epoch, as evenfix pinned them
    blocks_per_step = args.micro_batch * args.grad_accum
    steps_per_epoch = pinned // blocks_per_step  # a trailing partial accumulation window is dropped
    total_steps = steps_per_epoch * args.epochs
    if args.max_steps:
        total_steps = min(total_steps, args.max_steps)
    run.log(f"blocks={ds.local_blocks} pinned={pinned} steps_per_epoch={steps_per_epoch} "
            f"total_steps={total_steps} evenfix={args.evenfix}")

    vocab = args.vocab_size or ds.vocab_size
    if vocab < ds.vocab_size:
        raise SystemExit(f"train: --vocab-size {vocab} is below the pack's {ds.vocab_size}")
    config = ModelConfig(vocab_size=vocab, seq_len=ds.seq_len - 1, d_model=args.d_model,
                         layers=args.layers, heads=args.heads)
    torch.manual_seed(args.seed)
    with torch.device(device):
        model = Decoder(config)
    shard(model, device.type == "cuda", not args.no_reshard_after_forward)

    start_epoch, start_step = 0, 0
    latest = None if args.no_resume else latest_checkpoint(args.ckpt_dir)
    if latest:
        meta = load_weights(model, latest)
        run.global_step = meta["global_step"]
        start_epoch, start_step = meta["epoch"], meta["step_in_epoch"]
        if start_step >= steps_per_epoch:
            start_epoch, start_step = start_epoch + 1, 0
        run.log(f"resumed weights from {latest}: epoch {start_epoch} step {start_step} (global {run.global_step})")

    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    schedule = lr_lambda(args.warmup, total_steps, args.min_lr_ratio)
    resumed_at = run.global_step  # the schedule continues where the run left off
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: schedule(s + resumed_at))

    def meta(epoch: int, step_in_epoch: int) -> dict:
        return {"global_step": run.global_step, "epoch": epoch, "step_in_epoch": step_in_epoch,
                "pinned_blocks": pinned, "micro_batch": args.micro_batch, "grad_accum": args.grad_accum,
                "evenfix": args.evenfix, "model_config": asdict(config)}

    last_saved = None
    heartbeat = None
    tokens_seen = 0
    for epoch in range(start_epoch, args.epochs):
        if run.global_step >= total_steps:
            break
        ds.start_at(epoch, start_step if epoch == start_epoch else 0, args.micro_batch, args.grad_accum)
        blocks = iter(ds)
        step_in_epoch = start_step if epoch == start_epoch else 0
        if heartbeat is None and args.heartbeat_dir:
            heartbeat = Heartbeat(args.heartbeat_dir, rank=rank, total_steps=total_steps)
        while step_in_epoch < steps_per_epoch and run.global_step < total_steps:
            loss_sum = 0.0
            for micro in range(args.grad_accum):
                batch = [next(blocks) for _ in range(args.micro_batch)]
                batch = batch[0].unsqueeze(0) if len(batch) == 1 else torch.stack(batch)
                batch = batch.to(device, non_blocking=True)
                model.set_requires_gradient_sync(micro == args.grad_accum - 1)
                run.enter(f"forward (step {run.global_step + 1}, micro-batch {micro})")
                logits = model(batch[:, :-1])
                loss = F.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].long().flatten())
                run.enter(f"backward (step {run.global_step + 1}, micro-batch {micro})")
                (loss / args.grad_accum).backward()
                loss_sum += loss.item()
            run.enter(f"optimizer (step {run.global_step + 1})")
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            run.global_step += 1
            step_in_epoch += 1
            tokens_seen += args.grad_accum * batch.numel()
            if heartbeat is not None:
                heartbeat.beat(run.global_step, tokens_seen)
            if rank == 0 and (run.global_step % args.log_every == 0 or run.global_step == total_steps):
                run.log(f"step {run.global_step} epoch {epoch} loss {loss_sum / args.grad_accum:.4f} "
                        f"lr {sched.get_last_lr()[0]:.3g}")
            if args.save_every and run.global_step % args.save_every == 0:
                last_saved = save_checkpoint(run, model, args.ckpt_dir, meta(epoch, step_in_epoch))
        if last_saved != checkpoint_path(args.ckpt_dir, run.global_step):
            # The end-of-epoch save, where the report's run hung.
            last_saved = save_checkpoint(run, model, args.ckpt_dir, meta(epoch, step_in_epoch))
    run.enter("done")
    if heartbeat is not None:
        heartbeat.done()
    run.log(f"done steps={run.global_step} checkpoint={last_saved}")


def main(argv=None) -> int:
    args = parse_args(argv)
    on_cuda = torch.cuda.is_available()
    backend = "nccl" if on_cuda else "gloo"
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if on_cuda else torch.device("cpu")
    if on_cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=args.timeout),
                            device_id=device if on_cuda else None)
    run = Run(dist.get_rank())
    try:
        train(args, run, backend, device)
    except Exception as e:
        waited = time.monotonic() - run.phase_since
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        run.log(f"error in {run.phase} after {waited:.1f}s at step {run.global_step}: {type(e).__name__}: {first}")
        traceback.print_exc()
        dump_flight_recorder(run, backend)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # a group with a timed-out collective can hang in teardown
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: finalizing torch's modules takes ~10 s of CPU on a loaded
    # host, and everything this process owes the world (checkpoint, logs) is written.
    os._exit(code)
