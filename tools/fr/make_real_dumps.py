#!/usr/bin/env python3
"""Reproduces the field report's desync on 4 CPU processes and keeps each rank's
flight-recorder dump.

Ranks 0-2 run one more training step than rank 3 (the uneven block counts of the
report): at the same collective slot they enter the backward pass's
reduce_scatter while rank 3, out of data, enters the save barrier's all_reduce
(a 1-element all_reduce, which is what ProcessGroupNCCL::barrier records as
"all_reduce_barrier"). Neither collective can finish; once it times out a
watchdog thread in every rank writes the gloo flight recorder on demand with
torch._C._distributed_c10d._dump_fr_trace() to <out>/<prefix><rank> (pickle),
and the JSON form to <out>/json/<prefix><rank> with _dump_fr_trace_json().

Needs PyTorch >= 2.8 from PyPI (gloo records into the flight recorder when
TORCH_FR_BUFFER_SIZE is set). Usage (what made testdata/fr/real/):
    .venv/bin/python tools/fr/make_real_dumps.py testdata/fr/real/gloo_barrier
    .venv/bin/python tools/fr/make_real_dumps.py --barrier all_reduce \
        testdata/fr/real/gloo_allreduce_barrier
"""
import argparse
import datetime
import os
import socket
import sys
import threading
import time

WORLD = 4
ODD_RANK = 3
STEPS = 6            # full training steps every rank runs
SHARD = 256          # elements per rank in the gradient reduce_scatter
BARRIER_MODE = "barrier"
TIMEOUT_S = 6        # collective timeout; the watchdog dumps after this
PREFIX = "nccl_trace_rank_"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_step(dist, torch, world):
    # Forward: an all_gather of parameter shards (FSDP-like); backward: reduce_scatter.
    shard = torch.ones(256)
    full = torch.empty(256 * world)
    dist.all_gather_into_tensor(full, shard)
    return backward_reduce(dist, torch, world)


def backward_reduce(dist, torch, world):
    # Note: gloo implements reduce_scatter_tensor as an all_reduce of the whole
    # input and records it as "gloo:all_reduce" [[world*SHARD]] (the list form is
    # worse: one all_reduce per rank). Only NCCL records "reduce_scatter".
    grads = torch.ones(world * SHARD)
    out = torch.empty(SHARD)
    return dist.reduce_scatter_tensor(out, grads, async_op=True)


def save_barrier(dist, torch):
    # dist.barrier() on NCCL is a 1-element all_reduce ("all_reduce_barrier"); on
    # gloo it is its own op ("gloo:barrier", no tensors). --barrier all_reduce
    # issues the 1-element all_reduce the NCCL barrier would.
    if BARRIER_MODE == "barrier":
        return dist.barrier(async_op=True)
    flag = torch.ones(1)
    return dist.all_reduce(flag, async_op=True)


def watchdog(work, rank, out_dir, done):
    deadline = time.monotonic() + TIMEOUT_S + 2
    while time.monotonic() < deadline and not work.is_completed():
        time.sleep(0.1)
    import torch._C._distributed_c10d as c10d
    pickled = c10d._dump_fr_trace()
    as_json = c10d._dump_fr_trace_json()
    with open(os.path.join(out_dir, f"{PREFIX}{rank}"), "wb") as f:
        f.write(pickled)
    os.makedirs(os.path.join(out_dir, "json"), exist_ok=True)
    if isinstance(as_json, str):
        as_json = as_json.encode()
    with open(os.path.join(out_dir, "json", f"{PREFIX}{rank}"), "wb") as f:
        f.write(as_json)
    done.set()


def run_rank(rank, port, out_dir, barrier_mode):
    global BARRIER_MODE, SHARD
    BARRIER_MODE = barrier_mode
    if barrier_mode == "all_reduce":
        # gloo aborts the process (EnforceNotMet) when the 1-element all_reduce
        # receives a larger message from the others' collective, so that no dump
        # gets written; 1-element shards keep the messages the same length.
        SHARD = 1
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      RANK=str(rank), WORLD_SIZE=str(WORLD))
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    t = torch.ones(1024)
    dist.all_reduce(t)                      # warm-up: one all_reduce of the loss scale
    for _ in range(STEPS):
        train_step(dist, torch, WORLD).wait()
    # Ranks other than ODD_RANK have more data: they go on to the next gradient
    # reduce_scatter while rank 3 walks into the save barrier at the same slot.
    work = (save_barrier(dist, torch) if rank == ODD_RANK
            else backward_reduce(dist, torch, WORLD))
    done = threading.Event()
    threading.Thread(target=watchdog, args=(work, rank, out_dir, done), daemon=True).start()
    try:
        work.wait()
    except Exception as e:  # the timeout surfaces here on gloo
        print(f"rank {rank}: collective failed: {str(e).splitlines()[0]}", file=sys.stderr)
    done.wait(TIMEOUT_S + 30)
    sys.stdout.flush()
    os._exit(0)   # the group is wedged; skip destroy_process_group


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--barrier", choices=["barrier", "all_reduce"], default="barrier",
                    help="what rank 3 enters: dist.barrier() or a 1-element all_reduce")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
    port = free_port()
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=run_rank, args=(r, port, args.out_dir, args.barrier)) for r in range(WORLD)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    bad = [r for r, p in enumerate(procs) if p.exitcode != 0]
    if bad:
        sys.exit(f"ranks {bad} did not exit cleanly")
    for r in range(WORLD):
        path = os.path.join(args.out_dir, f"{PREFIX}{r}")
        print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
