"""This rank's flight-recorder dump after a failed collective, where torch's own dump
would go (TORCH_FR_DUMP_TEMP_FILE, or TORCH_NCCL_DEBUG_INFO_TEMP_FILE, + the rank), for
`evenkeel fr` to match across ranks.

The public path comes first: on NCCL the watchdog writes the dump itself when a
collective times out (TORCH_FR_DUMP_ON_TIMEOUT / TORCH_NCCL_DUMP_ON_TIMEOUT, set by
`evenkeel launch`), so nothing is done here. Gloo has no such dump, and torch 2.15 has
no public Python function that writes one: `torch.distributed.debug.start_debug_server`
serves `/fr_dump_file`, but through an HTTP control plane that asks every rank over the
store, which a rank whose collective just failed cannot count on. So on gloo, and only
there, the private `torch._C._distributed_c10d._dump_fr_trace()` serializes this
process's buffer; a torch without it gets a log line, never a crash that would hide the
real error.
"""

from __future__ import annotations

import os
import pickle
from typing import Callable

import torch

__all__ = ["dump"]


def _buffer_size() -> int | None:
    size = os.environ.get("TORCH_FR_BUFFER_SIZE") or os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE")
    return None if size is None else int(size)


def dump_path(rank: int) -> str:
    """Where torch's own dump of `rank` would go."""
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    if not prefix:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        prefix = os.path.join(cache, "torch", "comm_lib_trace_rank_")
    return f"{prefix}{rank}"


def dump(rank: int, backend: str, log: Callable[[str], None]) -> str | None:
    """Writes this rank's flight-recorder pickle (temp file, fsync, rename) and returns its
    path; None when the recorder is off, on NCCL (its watchdog dumps), or when this torch
    cannot dump (said through `log`)."""
    size = _buffer_size()
    if size is not None and size <= 0:
        return None
    if backend == "nccl":
        return None  # public path: the NCCL watchdog dumps on timeout (TORCH_FR_DUMP_ON_TIMEOUT)
    private = getattr(torch._C._distributed_c10d, "_dump_fr_trace", None)
    if private is None:
        log("flight recorder: no dump: this torch has no _dump_fr_trace and gloo no dump of its own")
        return None
    try:
        data = private()
    except Exception as e:  # a recorder that cannot dump must not hide the real error
        log(f"flight recorder: no dump: {e}")
        return None
    path = dump_path(rank)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    entries = pickle.loads(data).get("entries", [])
    if entries:
        last = entries[-1]
        log(f"flight recorder: last collective {last['profiling_name']} "
            f"seq {last['collective_seq_id']} ({len(entries)} entries) -> {path}")
    return path
