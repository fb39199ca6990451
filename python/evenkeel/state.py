"""The full training state of a checkpoint (format 2, docs/checkpoint_format.md): what a
run needs to continue exactly where it stopped, beside the bf16 export users load.

    from evenkeel import state
    state.save(CKPT_TMP / "train_state", model, optimizer, scheduler, data)   # collective
    data = state.load(CKPT / "train_state", model, optimizer, scheduler, saved_world=4)

Written with torch.distributed.checkpoint (DCP): each rank writes its own shard of the
parameters at training precision (fp32 master weights) and of AdamW's moments
(`__R_0.distcp`), rank 0 the metadata (`.metadata`); nothing is gathered. The scheduler's
state, the data position and each rank's RNG state (`rng.rank{R}`) ride along as DCP
objects. Loading reshards: a state saved by 4 ranks loads into 2 or 8 (DCP reads each
rank's rows from whichever files hold them); a rank beyond the saved world has no saved
RNG state and keeps its own.

evenkeel.saver.Saver writes it through DCP's asynchronous path with every checkpoint
(the call returns once the state is staged in host memory; the files are written in the
background, over a process group of its own).
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

__all__ = ["CONTENTS", "DATA_KEYS", "STATE_DIR", "aliases", "load", "manifest_ref", "save", "state_dict"]

STATE_DIR = "train_state"  # ckpt::kTrainStateDir
CONTENTS = ["model", "optimizer", "scheduler", "rng", "data"]
DATA_KEYS = ("epoch", "step_in_epoch", "step", "tokens_seen")


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def _rng() -> dict:
    out = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = torch.cuda.get_rng_state()
    return out


def aliases(model) -> dict[str, str]:
    """Tied parameters' later names and the first name of the same tensor
    ({"lm_head.weight": "model.embed_tokens.weight"} with tied embeddings). The model's
    state dict holds a tied tensor under each name; the training state keeps it once (the
    plan's 12 B/param counts it once: a tied Qwen3-0.6B would otherwise write 622 MB twice)."""
    first: dict[int, str] = {}
    out: dict[str, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in first:
            out[name] = first[id(p)]
        else:
            first[id(p)] = name
    return out


def state_dict(model, optimizer, scheduler, data: dict) -> dict:
    """The state to save: the model's and the optimizer's sharded state dicts (DTensors
    under FSDP2; a tied tensor under its first name only), the scheduler's, the data
    position (DATA_KEYS) and this rank's RNG."""
    msd, osd = get_state_dict(model, optimizer)
    for name in aliases(model):
        msd.pop(name, None)
    missing = [k for k in DATA_KEYS if k not in data]
    if missing:
        raise ValueError(f"train state: the data position lacks {', '.join(missing)}")
    return {"model": msd, "optimizer": osd, "scheduler": scheduler.state_dict(),
            "data": {k: int(data[k]) for k in DATA_KEYS}, "rng": {f"rank{_rank()}": _rng()}}


def manifest_ref(world: int, precision: str = "fp32") -> dict:
    """The `train_state` object of evenkeel-checkpoint.json for a state saved by `world` ranks."""
    return {"format": "torch.distributed.checkpoint", "dir": STATE_DIR, "world": int(world),
            "precision": precision, "contents": list(CONTENTS)}


def save(path: str, model, optimizer, scheduler, data: dict, *, process_group=None) -> None:
    """Writes the state into `path` (a directory), every rank its own part. Collective."""
    dcp.save(state_dict(model, optimizer, scheduler, data), checkpoint_id=os.fspath(path),
             process_group=process_group)


def load(path: str, model, optimizer, scheduler, *, saved_world: int) -> dict:
    """Loads the state of `path` into model, optimizer and scheduler (resharding to this
    world) and this rank's RNG when the saved world had this rank; returns the data
    position. Collective."""
    msd, osd = get_state_dict(model, optimizer)  # the optimizer's state made, to be filled
    tied = aliases(model)
    for name in tied:
        msd.pop(name, None)
    sd = {"model": msd, "optimizer": osd, "scheduler": scheduler.state_dict(),
          "data": {k: 0 for k in DATA_KEYS}}
    rank = _rank()
    if rank < saved_world:
        sd["rng"] = {f"rank{rank}": _rng()}
    dcp.load(sd, checkpoint_id=os.fspath(path))
    for name, source in tied.items():
        sd["model"][name] = sd["model"][source]  # the same tensor again, as the model ties it
    set_state_dict(model, optimizer, model_state_dict=sd["model"], optim_state_dict=sd["optimizer"])
    scheduler.load_state_dict(sd["scheduler"])
    if "rng" in sd:
        saved = sd["rng"][f"rank{rank}"]
        torch.set_rng_state(saved["cpu"])
        if "cuda" in saved and torch.cuda.is_available():
            torch.cuda.set_rng_state(saved["cuda"])
    return {k: int(v) for k, v in sd["data"].items()}
