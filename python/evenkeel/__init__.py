"""evenkeel for PyTorch: packed block files as zero-copy tensors, and evenfix.

    from evenkeel import BlockDataset, evenfix
    ds = BlockDataset("/nvme/pack", rank=dist.get_rank(), seed=1234)
    evenfix(ds)            # every rank now iterates the global minimum block count
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        for block in ds:   # int32 tensor of seq_len tokens, a view of the mapped file
            ...

The ordering and resume logic lives in C++ (src/loader); this package adds
torch types and the collective.
"""

import importlib

from evenkeel._core import Error, NotFoundError

__all__ = ["BlockDataset", "Error", "Heartbeat", "NotFoundError", "Plan", "RunFile", "evenfix"]
__version__ = "0.1.0"

# The names that import torch are loaded on first use, so that a module of the package
# that needs no torch (the gate's isolation probe answering from its cache) starts in
# milliseconds rather than the seconds torch's import takes.
_LAZY = {"BlockDataset": "evenkeel.dataset", "evenfix": "evenkeel._evenfix", "Heartbeat": "evenkeel.heartbeat",
         "Plan": "evenkeel.plan", "RunFile": "evenkeel.runfile"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'evenkeel' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
