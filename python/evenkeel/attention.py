"""Attention within documents: the implementation a packed batch runs through, and the
refusal of a model whose attention would ignore the boundaries (docs/trainer.md,
"Document isolation").

    from evenkeel.attention import check_isolation, isolated_implementation
    check_isolation(config)                       # raises IsolationRefused, naming the layer
    impl = isolated_implementation(config, device)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=impl)
    model(input_ids=ids, **fields)                # fields: evenkeel.segments.isolated_fields

On CPU (and on CUDA without flash-attention) the implementation is
``evenkeel_document``, registered through transformers' ``AttentionInterface`` and
``AttentionMaskInterface``: transformers builds the model's own mask (causal, the
sliding window of Gemma 3 / Mistral layers) as it does for SDPA, and this function
intersects it with a block-diagonal mask from the segment boundaries
(``cu_seq_lens_q``; a forward without them is an error), then runs SDPA. On CUDA
with flash-attention installed it is transformers' own ``flash_attention_2`` /
``flash_attention_3``, whose varlen path takes ``cu_seq_lens_q/k`` and
``max_length_q/k`` over the batch flattened to one row (:func:`model_inputs`).
"""

from __future__ import annotations

import torch

__all__ = ["ATTENTION_NAME", "IsolationRefused", "check_isolation", "document_attention",
           "isolated_implementation", "model_inputs", "register"]

ATTENTION_NAME = "evenkeel_document"
# Layer types whose attention runs through the attention interface with a mask that the
# document mask can be intersected with. Anything else (linear_attention, mamba,
# conv, chunked_attention...) either carries state across tokens that no mask reaches
# or is untested here: refused.
SUPPORTED_LAYER_TYPES = ("full_attention", "sliding_attention")
FLASH_IMPLEMENTATIONS = ("flash_attention_2", "flash_attention_3")


class IsolationRefused(ValueError):
    """The model's attention would ignore document boundaries; the message says where and what to do."""

    def __init__(self, message: str, model_type: str = "", layer: str = ""):
        super().__init__(message)
        self.model_type = model_type
        self.layer = layer


def _segment_ids(kwargs: dict, batch: int, length: int, device) -> torch.Tensor:
    """(B, S) segment numbers, equal exactly for tokens of one segment."""
    cu = kwargs.get("cu_seq_lens_q")
    if cu is None:
        # Not position_ids: the model makes them 0..S-1 when none are given, which reads as one
        # document and would leak in silence.
        raise ValueError(f"{ATTENTION_NAME}: the model was given no document boundaries (cu_seq_lens_q); pass "
                         "evenkeel.segments.isolated_fields' fields to the forward")
    cu = cu.to(device=device, dtype=torch.int64)
    if int(cu[-1]) != batch * length:
        raise ValueError(f"{ATTENTION_NAME}: cu_seq_lens_q ends at {int(cu[-1])}, the batch has "
                         f"{batch} x {length} tokens")
    flat = torch.arange(batch * length, device=device)
    return torch.searchsorted(cu[1:], flat, right=True).view(batch, length)


def document_attention(module, query, key, value, attention_mask, **kwargs):
    """SDPA over ``attention_mask`` (the model's, or causal when transformers skipped it)
    intersected with the block-diagonal mask of the batch's segments."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    batch, _, length, _ = query.shape
    if key.shape[2] != length:
        raise ValueError(f"{ATTENTION_NAME}: {key.shape[2]} keys for {length} queries (no cache in packed training)")
    seg = _segment_ids(kwargs, batch, length, query.device)
    same = seg[:, None, :, None] == seg[:, None, None, :]
    if attention_mask is None:
        q = torch.arange(length, device=query.device)
        allowed = q[:, None] >= q[None, :]
        window = kwargs.get("sliding_window") or getattr(module, "sliding_window", None)
        if window:
            allowed &= (q[:, None] - q[None, :]) < int(window)
        mask = same & allowed[None, None]
    elif attention_mask.dtype == torch.bool:
        mask = attention_mask[..., :length, :length] & same
    else:
        mask = attention_mask[..., :length, :length].masked_fill(~same, torch.finfo(attention_mask.dtype).min)
    rest = {k: v for k, v in kwargs.items() if k not in ("is_causal",)}
    return sdpa_attention_forward(module, query, key, value, mask, is_causal=False, **rest)


_registered = False


def register() -> str:
    """Registers ``evenkeel_document`` with transformers (idempotent); returns the name."""
    global _registered
    if not _registered:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(ATTENTION_NAME, document_attention)
        AttentionMaskInterface.register(ATTENTION_NAME, sdpa_mask)
        _registered = True
    return ATTENTION_NAME


def _text_config(config):
    return getattr(config, "text_config", None) or config


def _model_class(config):
    from transformers import AutoModelForCausalLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    try:
        return MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    except KeyError:
        raise IsolationRefused(f"{config.model_type}: transformers has no causal LM class for this config "
                               f"({AutoModelForCausalLM.__name__} does not know it)", config.model_type) from None


def check_isolation(config) -> None:
    """Raises :class:`IsolationRefused` when the model's attention would ignore document
    boundaries: a layer type other than full or sliding-window attention (linear
    attention keeps a state across every token of the block, which no mask reaches),
    or a model whose attention does not go through transformers' attention interface."""
    text = _text_config(config)
    model_type = getattr(text, "model_type", "") or getattr(config, "model_type", "")
    remedy = ("set data.attention = \"cross\" in the run file to train with documents attending across "
              "boundaries, or fine-tune a model whose layers are all full or sliding-window attention")
    layer_types = getattr(text, "layer_types", None) or []
    for i, layer_type in enumerate(layer_types):
        if layer_type not in SUPPORTED_LAYER_TYPES:
            raise IsolationRefused(
                f"{model_type}: layer {i} is {layer_type!r}, whose state crosses document boundaries (evenkeel "
                f"isolates documents in {', '.join(SUPPORTED_LAYER_TYPES)} layers only); {remedy}",
                model_type, layer_type)
    cls = _model_class(config)
    if not getattr(cls, "_supports_attention_backend", False):
        raise IsolationRefused(
            f"{model_type}: {cls.__name__}'s attention does not go through transformers' attention interface, so "
            f"no document mask reaches it; {remedy}", model_type, "attention")


def isolated_implementation(config, device: torch.device | str) -> str:
    """The attention implementation an isolated run uses on ``device``: flash-attention
    (varlen) on CUDA when it is installed and the model supports it, else
    ``evenkeel_document`` (registered here)."""
    device = torch.device(device)
    if device.type == "cuda":
        from transformers.utils import is_flash_attn_2_available, is_flash_attn_3_available

        cls = _model_class(config)
        if getattr(cls, "_supports_flash_attn", False):
            if is_flash_attn_3_available():
                return "flash_attention_3"
            if is_flash_attn_2_available():
                return "flash_attention_2"
    return register()


def model_inputs(implementation: str, ids: torch.Tensor, fields: dict) -> dict:
    """The forward's keyword arguments for ``ids`` and :func:`~evenkeel.segments.isolated_fields`'
    ``fields`` under ``implementation``. Flash-attention's varlen path reads the batch as
    one row (``cu_seq_lens`` index it flattened), so the batch is flattened there; no
    target crosses a row, since every block start is a segment start (label -100)."""
    if implementation in FLASH_IMPLEMENTATIONS:
        flat = {k: (v.reshape(1, -1) if k in ("labels", "position_ids") else v) for k, v in fields.items()}
        return {"input_ids": ids.reshape(1, -1), **flat}
    return {"input_ids": ids, **fields}
