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

from evenkeel._core import Error, NotFoundError
from evenkeel.dataset import BlockDataset
from evenkeel.evenfix import evenfix
from evenkeel.heartbeat import Heartbeat
from evenkeel.plan import Plan
from evenkeel.runfile import RunFile

__all__ = ["BlockDataset", "Error", "Heartbeat", "NotFoundError", "Plan", "RunFile", "evenfix"]
__version__ = "0.1.0"
