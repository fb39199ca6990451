"""Hugging Face models under FSDP2: built on the meta device, sharded per decoder
layer, filled from the model's safetensors without any rank holding the whole model.

    from evenkeel.hf import load_sharded
    model = load_sharded("/models/Qwen3-32B", device, precision="bf16")

Peak host memory per rank while loading is about the rank's shard of the fp32
master weights (16 B/param x params / world is the whole training state; the
weights alone are 4 B/param / world) plus one tensor's rows being copied: each
rank reads only its own rows of each tensor through safetensors' memory-mapped
slices (``get_slice``), so nothing is broadcast and no rank materializes the
model. The page cache holds what was read, shared by the ranks of a node.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import torch
import torch.nn as nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Shard

__all__ = ["load_sharded", "weight_files", "decoder_layer_classes", "model_vocab_size"]


def weight_files(model_dir: str) -> dict[str, str]:
    """Tensor name -> safetensors file of a model directory (index or single file)."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index, encoding="utf-8") as f:
            weight_map = json.load(f).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ValueError(f"{index}: no weight_map")
        return {k: os.path.join(model_dir, v) for k, v in weight_map.items()}
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(single):
        from safetensors import safe_open
        with safe_open(single, "pt") as f:
            return {k: single for k in f.keys()}
    raise FileNotFoundError(f"{model_dir}: no model.safetensors or model.safetensors.index.json "
                            "(evenkeel fine-tunes pretrained weights in safetensors form)")


def decoder_layer_classes(model: nn.Module) -> set[str]:
    """The classes transformers says must not be split (Qwen3DecoderLayer, ...):
    FSDP's units, as the field report's auto-wrap policy used."""
    names = getattr(model, "_no_split_modules", None) or []
    return set(names)


def model_vocab_size(model_dir: str) -> int:
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    text = cfg.get("text_config") or {}
    return int(cfg.get("vocab_size") or text.get("vocab_size") or 0)


def _rows(n: int, rank: int, world: int) -> tuple[int, int]:
    """Rows [lo, hi) of a dim-0 Shard(0) DTensor on `rank`: torch.chunk's split,
    which FSDP2 uses (ceil(n / world) rows per rank, the last ranks short or empty)."""
    per = -(-n // world)
    return min(n, rank * per), min(n, (rank + 1) * per)


def _local_rows(p: torch.Tensor) -> tuple[torch.Tensor, int, int]:
    """The local tensor of a parameter and the global rows it holds."""
    if isinstance(p, DTensor):
        placements = p.placements
        mesh = p.device_mesh
        if len(placements) != 1 or not isinstance(placements[0], Shard) or placements[0].dim != 0:
            raise NotImplementedError(f"placement {placements} (evenkeel loads FSDP2 Shard(0) parameters)")
        lo, hi = _rows(p.shape[0], mesh.get_local_rank(), mesh.size())
        return p.to_local(), lo, hi
    return p.data, 0, p.shape[0] if p.dim() else 1


def _init_buffers(model: nn.Module) -> None:
    """Recomputes buffers that are not in the checkpoint (rotary inverse frequencies,
    Gemma's embedding scale) after to_empty(): transformers' own _init_weights knows each
    model's rule. A module with parameters as well (Gemma3TextScaledWordEmbedding: its
    weight and its embed_scale, sqrt(hidden)) runs the rule with meta stand-ins for its
    parameters, so only its buffers take values; the weights come from the safetensors
    next. Skipping such a module left embed_scale as to_empty()'s uninitialized memory
    (e.g. 1e-10 instead of 8), and a Gemma 3 trained with its embeddings scaled away."""
    init = getattr(model, "_init_weights", None)
    with torch.no_grad():
        for module in model.modules():
            if next(module.buffers(recurse=False), None) is None:
                continue
            if init is None:
                raise RuntimeError(f"{type(module).__name__} has buffers and the model no _init_weights")
            own = dict(module._parameters)
            try:
                for k, p in own.items():
                    if p is not None:
                        module._parameters[k] = nn.Parameter(torch.empty(p.shape, dtype=p.dtype, device="meta"),
                                                             requires_grad=p.requires_grad)
                init(module)
            finally:
                module._parameters.update(own)


def _fill_from_safetensors(model: nn.Module, model_dir: str) -> None:
    from safetensors import safe_open

    files = weight_files(model_dir)
    handles: dict[str, object] = {}
    missing = []
    try:
        with torch.no_grad():
            for name, p in model.named_parameters():  # tied parameters appear once
                path = files.get(name)
                if path is None:
                    missing.append(name)
                    continue
                f = handles.get(path)
                if f is None:
                    f = handles[path] = safe_open(path, "pt")
                sl = f.get_slice(name)
                shape = tuple(sl.get_shape())
                if shape != tuple(p.shape):
                    raise ValueError(f"{path}: {name} has shape {list(shape)}, the model {list(p.shape)}")
                local, lo, hi = _local_rows(p)
                if hi > lo:
                    src = sl[lo:hi] if len(shape) else f.get_tensor(name)
                    local.copy_(src.to(local.dtype).reshape(local.shape))
    finally:
        handles.clear()
    if missing:
        raise ValueError(f"{model_dir}: the weights lack {len(missing)} parameter(s) of the model, "
                         f"e.g. {', '.join(missing[:3])}")


def precision_policy(precision: str, on_cuda: bool) -> MixedPrecisionPolicy:
    """bf16 mixed precision (bf16 parameters and activations, fp32 gradient
    reductions, fp32 master weights) or plain fp32. "auto" is bf16 on CUDA."""
    if precision == "auto":
        precision = "bf16" if on_cuda else "fp32"
    if precision == "bf16":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    if precision == "fp32":
        return MixedPrecisionPolicy()
    raise ValueError(f"precision must be auto, bf16 or fp32, not {precision!r}")


def load_sharded(model_dir: str, device: torch.device, *, precision: str = "auto",
                 gradient_checkpointing: bool = False, reshard_after_forward: bool = True,
                 mesh=None, weights_dir: str | None = None, attn_implementation: str | None = None) -> nn.Module:
    """Builds the model of `model_dir` (any decoder transformers' AutoModelForCausalLM
    knows) on the meta device, shards it with fully_shard per decoder layer and then
    the root, allocates each rank's shard on `device` and fills it from the
    safetensors weights of `weights_dir` (a checkpoint being resumed) or of
    `model_dir`. Master weights are fp32. `attn_implementation` (e.g.
    evenkeel.attention's, for isolated documents) is passed to transformers; None: its default."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model_dir)
    with torch.device("meta"):
        extra = {"attn_implementation": attn_implementation} if attn_implementation else {}
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, **extra)
    if gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    layer_classes = decoder_layer_classes(model)
    if not layer_classes:
        raise ValueError(f"{model_dir}: {type(model).__name__} names no decoder layer class (_no_split_modules)")
    mp = precision_policy(precision, device.type == "cuda")
    units = [m for m in model.modules() if type(m).__name__ in layer_classes]
    if not units:
        raise ValueError(f"{model_dir}: no module of class {', '.join(sorted(layer_classes))}")
    kwargs = {"mp_policy": mp, "reshard_after_forward": reshard_after_forward}
    if mesh is not None:
        kwargs["mesh"] = mesh
    for m in units:
        fully_shard(m, **kwargs)
    fully_shard(model, **kwargs)
    model.to_empty(device=device)
    _init_buffers(model)
    _fill_from_safetensors(model, weights_dir or model_dir)
    model.train()
    return model


def iter_full_tensors(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, full tensor) for every parameter, gathered one at a time: a
    collective, every rank must iterate to the end. Tied parameters appear once,
    under their first name (what save_pretrained writes)."""
    for name, p in model.named_parameters():
        yield name, (p.full_tensor() if isinstance(p, DTensor) else p.detach())
