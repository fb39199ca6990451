"""Checkpoints users load with transformers: bf16 consolidated safetensors shards.

    CKPT/step-00000500/
      model-00001-of-00007.safetensors ...   bf16, at most `shard_bytes` each
      model.safetensors.index.json           metadata.total_size, weight_map
      config.json, generation_config.json    the model's, dtype set to bfloat16
      tokenizer.json, tokenizer_config.json  ... the model directory's tokenizer files
      evenkeel-checkpoint.json               written last (docs/checkpoint_format.md)

Every rank gathers each parameter in turn (one all-gather per tensor, so no rank
holds more than one full tensor beyond rank 0's current shard); rank 0 writes the
shards with the `safetensors` package into a hidden temporary directory, then the
C++ core hashes every file, writes evenkeel-checkpoint.json and renames the
directory into place. Older checkpoints beyond `keep` are removed only after that.
Verification and "newest verified" are the C++ code `evenkeel ckpt` runs.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.tensor import DTensor

from evenkeel import _core

__all__ = ["TOKENIZER_FILES", "CheckpointWriter", "checkpoint_name", "copy_model_files", "newest_resumable", "newest_verified", "verify"]

# Files of a model directory that a checkpoint carries along, when present: the C++
# list (run::kCheckpointCopiedFiles), which the gate's storage plan measures too.
# config.json is rewritten (dtype, use_cache) rather than copied.
_COPIED = tuple(_core.checkpoint_copied_files())
TOKENIZER_FILES = tuple(n for n in _COPIED if n not in ("config.json", "generation_config.json"))


def checkpoint_name(step: int) -> str:
    return f"step-{int(step):08d}"


def verify(path: str, full: bool = True) -> dict:
    """Verifies a checkpoint directory as `evenkeel ckpt verify` does. Returns the
    report ({"ok": ..., "problems": [...], ...}); problems name the file and byte."""
    return _core.verify_checkpoint(os.fspath(path), full)


def newest_verified(ckpt_dir: str, full: bool = True) -> tuple[dict | None, list[str]]:
    """The newest checkpoint in `ckpt_dir` that verifies (its evenkeel-checkpoint.json
    as a dict, with "path" added), or None; and one warning per newer one skipped."""
    text, path, warnings = _core.newest_verified_checkpoint(os.fspath(ckpt_dir), full)
    if text is None:
        return None, list(warnings)
    meta = json.loads(text)
    meta["path"] = path
    return meta, list(warnings)


def newest_resumable(ckpt_dir: str, wanted: str = "full", full: bool = True) -> tuple[dict | None, list[str]]:
    """The checkpoint a run resumes from at `wanted` level ("full": the newest whose
    weights and training state verify, else the newest whose weights do, with a warning
    saying why; "weights": the newest whose weights verify), as the launcher chooses it
    (ckpt::NewestResumable): its evenkeel-checkpoint.json with "path" and "resume_level"
    added, or None; and the warnings (each newer checkpoint skipped, a level lowered)."""
    text, path, level, warnings = _core.newest_resumable_checkpoint(os.fspath(ckpt_dir), full, wanted)
    if text is None:
        return None, list(warnings)
    meta = json.loads(text)
    meta["path"] = path
    meta["resume_level"] = level
    return meta, list(warnings)


def _plan_shards(sizes: list[int], shard_bytes: int) -> list[int]:
    """Shard index of each tensor, in order: a new shard starts when the next tensor
    would pass `shard_bytes` (a tensor larger than that gets a shard of its own), as
    transformers' save_pretrained splits."""
    out, shard, used = [], 0, 0
    for size in sizes:
        if used and used + size > shard_bytes:
            shard, used = shard + 1, 0
        out.append(shard)
        used += size
    return out


@dataclass
class ExportPlan:
    """The bf16 export's layout, identical on every rank: each parameter's name, shape and
    shard file (safetensors' `save_pretrained` split), and the shard files' names. Both
    writers (CheckpointWriter here, evenkeel.saver.Saver) follow it."""
    names: list[str]
    shapes: list[tuple[int, ...]]
    shard_of: list[int]
    files: list[str] = field(default_factory=list)


def export_plan(model: nn.Module, shard_bytes: int, dtype: torch.dtype) -> ExportPlan:
    params = list(model.named_parameters())  # tied parameters once, as save_pretrained writes them
    itemsize = torch.tensor([], dtype=dtype).element_size()
    shard_of = _plan_shards([p.numel() * itemsize for _, p in params], shard_bytes)
    count = (shard_of[-1] + 1) if shard_of else 0
    return ExportPlan([n for n, _ in params], [tuple(p.shape) for _, p in params], shard_of,
                      [f"model-{i + 1:05d}-of-{count:05d}.safetensors" for i in range(count)])


def write_index(out: str, plan: ExportPlan, dtype: torch.dtype) -> None:
    """model.safetensors.index.json for the export `plan` in directory `out`."""
    itemsize = torch.tensor([], dtype=dtype).element_size()
    weight_map = {n: plan.files[s] for n, s in zip(plan.names, plan.shard_of)}
    total = sum(math.prod(s) * itemsize for s in plan.shapes)
    with open(os.path.join(out, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)
        f.write("\n")


@dataclass
class SaveResult:
    path: str
    files: int
    bytes: int


class CheckpointWriter:
    """Writes checkpoints of one model into `ckpt_dir`. Collective: every rank calls
    save() with the same step; only `writer_rank` touches the disk."""

    def __init__(self, ckpt_dir: str, model_dir: str, *, shard_bytes: int = 5 * 10**9, keep: int = 2,
                 writer_rank: int = 0, dtype: torch.dtype = torch.bfloat16):
        self.ckpt_dir = os.fspath(ckpt_dir)
        self.model_dir = os.fspath(model_dir)
        self.shard_bytes = int(shard_bytes)
        self.keep = int(keep)
        self.writer_rank = writer_rank
        self.dtype = dtype
        if self.shard_bytes <= 0:
            raise ValueError("shard size must be positive")

    def save(self, model: nn.Module, step: int, manifest: dict) -> SaveResult | None:
        """Gathers and writes the model as checkpoint `step`; `manifest` holds the
        evenkeel-checkpoint.json fields the caller knows (epoch, position, run, pack,
        ...). Returns the result on the writing rank, None elsewhere."""
        rank = dist.get_rank() if dist.is_initialized() else 0
        writing = rank == self.writer_rank
        params = list(model.named_parameters())  # tied parameters once, as save_pretrained writes them
        plan = export_plan(model, self.shard_bytes, self.dtype)
        shard_of, names = plan.shard_of, plan.files
        tmp = None
        if writing:
            os.makedirs(self.ckpt_dir, exist_ok=True)
            tmp = os.path.join(self.ckpt_dir, f".{checkpoint_name(step)}.tmp-{os.getpid()}")
            if os.path.exists(tmp):
                shutil.rmtree(tmp)
            os.makedirs(tmp)
        from safetensors.torch import save_file

        shard: dict[str, torch.Tensor] = {}
        for i, (name, p) in enumerate(params):
            full = p.full_tensor() if isinstance(p, DTensor) else p.detach()
            if writing:
                shard[name] = full.detach().to(device="cpu", dtype=self.dtype).contiguous()
                if i + 1 == len(params) or shard_of[i + 1] != shard_of[i]:
                    save_file(shard, os.path.join(tmp, names[shard_of[i]]), metadata={"format": "pt"})
                    shard = {}
            del full
        if not writing:
            return None
        write_index(tmp, plan, self.dtype)
        copy_model_files(self.model_dir, tmp, self.dtype)
        final = os.path.join(self.ckpt_dir, checkpoint_name(step))
        meta = {"format_version": 1, "created": "", "evenkeel_version": "", "files": [], "extra": {},
                "dtype": str(self.dtype).replace("torch.", ""), **manifest, "step": int(step)}
        _core.finalize_checkpoint(tmp, final, json.dumps(meta))
        _core.prune_checkpoints(self.ckpt_dir, self.keep)
        size = sum(os.path.getsize(os.path.join(final, n)) for n in os.listdir(final))
        return SaveResult(final, len(os.listdir(final)), size)


def copy_model_files(model_dir: str, out: str, dtype: torch.dtype) -> None:
    """The model directory's config (dtype set to the export's, the KV cache on again) and
    its generation config and tokenizer files, into a checkpoint being written."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    name = str(dtype).replace("torch.", "")
    config["dtype"] = name  # transformers >= 4.56 reads "dtype"; older ones "torch_dtype"
    if "torch_dtype" in config:
        config["torch_dtype"] = name
    config["use_cache"] = True  # the training run turned the KV cache off; users generate
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    for n in ("generation_config.json", *TOKENIZER_FILES):
        src = os.path.join(model_dir, n)
        if os.path.isfile(src):
            shutil.copyfile(src, os.path.join(out, n))
