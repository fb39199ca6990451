"""evenfix: every rank iterates the same number of blocks, so no rank leaves the
training loop (and walks into a collective outside it, like the end-of-epoch save
barrier) while the others still reduce gradients. The field report's deadlock:
a 0.17% block spread hung 16 GPUs at step 3,850 of 3,857 (README, docs/trainer.md)."""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist

from evenkeel.dataset import BlockDataset

_MODES = ("min", "pad", "off")


def _say(line: str) -> None:
    # One write per line, so ranks sharing a terminal or pipe do not interleave mid-line.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def evenfix(dataset: BlockDataset, group=None, mode: str = "min", *, verbose: bool = True) -> int:
    """Pin the blocks per epoch of ``dataset`` to the same count on every rank of ``group``.

    - ``"min"``: all-reduce MIN of the local block counts; each rank drops its trailing
      ``local - min`` blocks of every epoch's order.
    - ``"pad"``: all-reduce MAX; a shorter rank repeats blocks of its order, cyclically
      from the start, up to the maximum, so no block is dropped.
    - ``"off"``: nothing is pinned or exchanged; ranks keep their own counts.

    A collective over ``group`` (every rank must call it): on NCCL the count travels on
    the current CUDA device, otherwise on the CPU. Without an initialized process group
    the world is this process alone. Prints ``[evenfix] local=30,849 -> min=30,835`` on
    each rank unless ``verbose`` is false. Returns the pinned count (the local count for
    ``"off"``).
    """
    if mode not in _MODES:
        raise ValueError(f"evenfix: mode must be one of {', '.join(_MODES)}, not {mode!r}")
    local = dataset.local_blocks
    if mode == "off":
        if verbose:
            _say(f"[evenfix] local={local:,} (off: ranks may differ)")
        return local
    count = local
    if dist.is_available() and dist.is_initialized():
        device = torch.device("cpu")
        if dist.get_backend(group) == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        t = torch.tensor([local], dtype=torch.int64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MIN if mode == "min" else dist.ReduceOp.MAX, group=group)
        count = int(t.item())
    dataset.pin(count)
    if verbose:
        _say(f"[evenfix] local={local:,} -> {'min' if mode == 'min' else 'max'}={count:,}")
    return count
