"""Packed blocks with document boundaries built in Python from documents, in the
boundary format of docs/pack_format.md ("Document boundaries"), so the batch fields
and the attention can be tested against the documents themselves.

`sequential` fills blocks end to end (a document longer than the room left continues
in the next block; the stream's tail that fills no block is dropped); `padded` puts
whole documents (each at most seq_len) into blocks in the given order and pads each
block's rest with `pad_id`, marking the first pad token with bit 63. Both return the
blocks (n, seq_len) int64, the docs entries (uint64) and the pieces: per block, the
(start, end) of each segment, the pieces run alone.
"""

from __future__ import annotations

import numpy as np

PAD_FLAG = 1 << 63


def documents(rng: np.random.Generator, lengths, vocab: int) -> list[np.ndarray]:
    return [rng.integers(1, vocab, size=int(n)).astype(np.int64) for n in lengths]


def sequential(docs: list[np.ndarray], seq_len: int):
    stream = np.concatenate(docs)
    starts = np.cumsum([0] + [len(d) for d in docs[:-1]])
    n = len(stream) // seq_len
    blocks = stream[:n * seq_len].reshape(n, seq_len)
    entries = np.array([s for s in starts if s < n * seq_len], dtype=np.uint64)
    return blocks, entries, pieces_of(entries, n, seq_len)


def padded(docs: list[np.ndarray], seq_len: int, pad_id: int):
    rows, entries, room = [], [], 0
    for d in docs:
        assert len(d) <= seq_len
        if not rows or len(d) > room:
            if rows and room:
                entries.append(((len(rows) - 1) * seq_len + seq_len - room) | PAD_FLAG)
                rows[-1][seq_len - room:] = pad_id
            rows.append(np.zeros(seq_len, dtype=np.int64))
            room = seq_len
        at = seq_len - room
        rows[-1][at:at + len(d)] = d
        entries.append((len(rows) - 1) * seq_len + at)
        room -= len(d)
    if room:
        entries.append(((len(rows) - 1) * seq_len + seq_len - room) | PAD_FLAG)
        rows[-1][seq_len - room:] = pad_id
    entries = np.array(entries, dtype=np.uint64)
    return np.stack(rows), entries, pieces_of(entries, len(rows), seq_len)


def pieces_of(entries: np.ndarray, n_blocks: int, seq_len: int):
    """Per block, [(start, end, is_pad)] of its segments, by a plain loop (the reference)."""
    out = []
    offsets = [int(e) & (PAD_FLAG - 1) for e in entries]
    pads = [bool(int(e) & PAD_FLAG) for e in entries]
    for b in range(n_blocks):
        cuts = {0: False}
        for o, p in zip(offsets, pads):
            if b * seq_len <= o < (b + 1) * seq_len:
                cuts[o - b * seq_len] = p
        keys = sorted(cuts)
        out.append([(s, e, cuts[s]) for s, e in zip(keys, keys[1:] + [seq_len])])
    return out
