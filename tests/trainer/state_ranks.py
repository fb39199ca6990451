"""Ranks for test_state.py: a small FSDP2 model trained on CPU (gloo), its full training
state saved with evenkeel.state and loaded into another world size.

    python state_ranks.py train WORLD DIR STEPS [SAVE_AT]   # trains; saves DIR/state at SAVE_AT; dumps DIR/full-STEPS.pt
    python state_ranks.py resume WORLD DIR STEPS            # loads DIR/state (any world), trains to STEPS, dumps
    python state_ranks.py weights WORLD DIR STEPS           # as resume, then a fresh optimizer (weights-only resume)
"""
import faulthandler
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

from evenkeel import state

SAVED_WORLD = 4


def build(seed: int):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 24), torch.nn.GELU(), torch.nn.Linear(24, 7), torch.nn.Linear(7, 8))
    for m in model:
        if isinstance(m, torch.nn.Linear):
            fully_shard(m)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    return model, opt, sched


def step(model, opt, sched, s: int):
    g = torch.Generator().manual_seed(1000 + s)
    x = torch.randn(16, 8, generator=g)  # every rank the same batch: the result does not depend on the world
    noise = torch.randn(16, 8) * 0  # draws from the global RNG, which the state restores
    loss = ((model(x) - x + noise) ** 2).mean()
    loss.backward()
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)


def full(t):
    return t.full_tensor() if isinstance(t, DTensor) else t


def dump(model, opt, sched, path):
    params = {n: full(p).detach().clone() for n, p in model.named_parameters()}
    moments = {}
    for n, p in model.named_parameters():
        st = opt.state[p]
        moments[n] = {k: full(v).detach().clone() for k, v in st.items()}
    if dist.get_rank() == 0:
        torch.save({"params": params, "moments": moments, "last_epoch": sched.last_epoch,
                    "lr": opt.param_groups[0]["lr"]}, path)


def worker(rank, mode, world, out, steps, save_at):
    faulthandler.enable(all_threads=True)  # a C++ abort in a rank prints where each thread was
    os.environ.update(MASTER_ADDR="127.0.0.1")
    dist.init_process_group("gloo", init_method=f"file://{out}/pg-{mode}-{world}-{steps}-{os.getppid()}", rank=rank, world_size=world)
    torch.manual_seed(7 + rank)
    if mode == "train":
        model, opt, sched = build(1)
        first = 0
    else:
        model, opt, sched = build(2)  # other weights: all must come from the state
        data = state.load(os.path.join(out, "state"), model, opt, sched, saved_world=SAVED_WORLD)
        first = data["step"]
        if mode == "weights":
            opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s + first))
    for s in range(first, steps):
        step(model, opt, sched, s)
        if mode == "train" and s + 1 == save_at:
            state.save(os.path.join(out, "state"), model, opt, sched,
                       {"epoch": 0, "step_in_epoch": save_at, "step": save_at, "tokens_seen": 16 * save_at})
            dump(model, opt, sched, os.path.join(out, f"train-{world}-{save_at}.pt"))
    dump(model, opt, sched, os.path.join(out, f"{mode}-{world}-{steps}.pt"))
    dist.barrier()
    dist.destroy_process_group()
    # As evenkeel.train's __main__ does: everything this rank owes is written, so skip the
    # interpreter's teardown. Under load (a parallel build beside the suite) a rank aborted
    # there now and then, "terminate called without an active exception" with no Python
    # frame left (faulthandler), after its dump and the barrier: torch's C++ teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    mode, world, out, steps = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    save_at = int(sys.argv[5]) if len(sys.argv) > 5 else -1
    mp.spawn(worker, args=(mode, world, out, steps, save_at), nprocs=world)
