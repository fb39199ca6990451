"""Document boundaries of packed blocks as the batch fields transformers takes.

A pack's ``rank-NNNNN.docs`` (docs/pack_format.md, "Document boundaries") lists, in
ascending token offset (block b, position p -> b * seq_len + p), where a segment
begins: the first token of every document placed in the rank's blocks, and, with
bit 63 set, the first pad token of a block's padding (from there to the block's end
the tokens are padding). Every block start is a segment start too, stored or not: a
document split across blocks continues as a new segment whose positions restart at 0.

:func:`isolated_fields` turns a batch of blocks and those entries into what a Hugging
Face causal LM takes to attend within documents only, the same fields
``DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_position_ids=True)``
produces for the documents one after another:

- ``position_ids`` (B, S) int64, 0 at every segment start and counting up within it;
- ``labels`` (B, S) int64: the given labels with ``-100`` at every segment start (the
  model shifts labels, so label j is predicted from token j - 1: at a segment start
  that token is another document's) and on padding;
- ``cu_seq_lens_q`` / ``cu_seq_lens_k`` int32: the cumulative segment lengths over the
  batch flattened row after row, from 0 to B * S;
- ``max_length_q`` / ``max_length_k``: the longest segment.

Vectorized over the batch: no Python loop over tokens or entries.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["IGNORE_INDEX", "PAD_FLAG", "isolated_fields", "segment_starts"]

IGNORE_INDEX = -100
PAD_FLAG = np.uint64(1 << 63)
_OFFSET = np.uint64((1 << 63) - 1)


def segment_starts(blocks, seq_len: int, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For the blocks ``blocks`` (indices into the rank's file) and the rank's docs
    entries ``docs`` (uint64, ascending by offset), two (B, S) bool arrays: where a
    segment starts (every block start included) and which tokens are padding."""
    blocks = np.asarray(blocks, dtype=np.int64).reshape(-1)
    S = int(seq_len)
    B = blocks.shape[0]
    docs = np.asarray(docs, dtype=np.uint64).reshape(-1)
    offsets = (docs & _OFFSET).astype(np.int64)
    is_pad = (docs & PAD_FLAG) != 0
    lo = np.searchsorted(offsets, blocks * S, side="left")
    hi = np.searchsorted(offsets, (blocks + 1) * S, side="left")
    counts = hi - lo
    # The entries of every block, concatenated: entry lo[b] + k for k < counts[b].
    row = np.repeat(np.arange(B), counts)
    first = np.repeat(lo - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
    entry = np.arange(row.shape[0]) + first
    pos = offsets[entry] - blocks[row] * S
    starts = np.zeros((B, S), dtype=bool)
    starts[:, 0] = True
    starts[row, pos] = True
    # Padding runs from a block's (one) bit-63 entry to the block's end.
    pad_at = np.full(B, S, dtype=np.int64)
    np.minimum.at(pad_at, row[is_pad[entry]], pos[is_pad[entry]])
    pad = np.arange(S)[None, :] >= pad_at[:, None]
    return starts, pad


def isolated_fields(blocks, seq_len: int, docs: np.ndarray, labels: torch.Tensor) -> dict:
    """The isolated batch fields for blocks ``blocks`` whose (loss-masked) labels are
    ``labels`` (B, S) int64: a dict of ``labels`` (a new tensor on labels' device),
    ``position_ids``, ``cu_seq_lens_q``/``_k`` and ``max_length_q``/``_k`` (module doc)."""
    starts, pad = segment_starts(blocks, seq_len, docs)
    B, S = starts.shape
    if tuple(labels.shape) != (B, S):
        raise ValueError(f"labels have shape {tuple(labels.shape)}, the blocks ({B}, {S})")
    index = np.arange(S, dtype=np.int64)
    last_start = np.maximum.accumulate(np.where(starts, index[None, :], 0), axis=1)
    position_ids = index[None, :] - last_start
    flat = np.flatnonzero(starts.reshape(-1))
    cu = np.append(flat, B * S).astype(np.int32)
    longest = int(np.diff(cu).max()) if B else 0
    drop = torch.from_numpy(starts | pad).to(device=labels.device)
    device = labels.device
    return {
        "labels": labels.masked_fill(drop, IGNORE_INDEX),
        "position_ids": torch.from_numpy(position_ids).to(device=device),
        "cu_seq_lens_q": torch.from_numpy(cu).to(device=device),
        "cu_seq_lens_k": torch.from_numpy(cu.copy()).to(device=device),
        "max_length_q": longest,
        "max_length_k": longest,
    }
