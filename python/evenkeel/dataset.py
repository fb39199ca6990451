"""BlockDataset: one rank's blocks of a pack (docs/pack_format.md) as tensors."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator

import numpy as np
import torch

from evenkeel import _core
from evenkeel.attention import model_inputs
from evenkeel.segments import isolated_fields, segment_starts


class BlockDataset:
    """One rank's block file, mapped read-only, iterated in a seeded per-epoch order.

    Blocks are ``torch.int32`` tensors of ``seq_len`` token ids that are views of
    the mapping: nothing is copied, and they are read-only (writing to one is a
    segmentation fault; ``.clone()`` or ``.long()`` first). A view keeps the
    mapping alive after the dataset is gone.

    ``len()`` is the number of blocks one epoch yields: the rank's own count until
    :func:`evenkeel.evenfix` (or :meth:`pin`) pins it. The order of epoch ``e`` is
    a permutation of the rank's blocks that depends only on ``(seed, e, blocks)``
    (SplitMix64-seeded Fisher-Yates, src/loader/epoch_order.h), truncated to the
    pinned count or repeated cyclically up to it.

    A pack made with ``--loss-mask assistant`` has a loss mask beside the blocks
    (``has_mask``); :meth:`labels` and :meth:`batch` turn it into the labels a
    Hugging Face causal LM takes: the token ids, with ``-100`` (ignored by the
    loss) where the mask is 0. Without a mask the labels are the ids.

    ``attention`` is the run file's ``data.attention``: with ``"isolated"``,
    :meth:`inputs` adds the document fields of the pack's boundaries
    (:attr:`doc_starts`; evenkeel.segments) and :meth:`trained_targets` counts only
    the targets they leave; ``"cross"`` (the default here) trains each block as one
    sequence.
    """

    IGNORE_INDEX = -100

    def __init__(self, pack_dir: str | os.PathLike, rank: int, *, seed: int = 0, shuffle: bool = True,
                 attention: str = "cross"):
        if attention not in ("isolated", "cross"):
            raise ValueError(f"attention must be 'isolated' or 'cross', not {attention!r}")
        self.attention = attention
        self._file = _core.BlockFile.open(os.fspath(pack_dir), int(rank))
        array = np.asarray(self._file)  # (blocks, seq_len) int32, read-only, backed by the mapping
        with warnings.catch_warnings():
            # torch warns that it cannot mark tensors read-only; the class docstring says they are.
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            self._blocks = torch.from_numpy(array)
            mask = self._file.mask_array()
            self._mask = None if mask is None else torch.from_numpy(mask)
        self._doc_starts = self._file.docs_array()  # read-only uint64, or None (an older pack)
        self._has_padding: bool | None = None
        self.seed = int(seed)
        self.shuffle = bool(shuffle)
        self._count = self._file.blocks
        self._epoch = 0
        self._start = 0
        self._order: _core.EpochOrder | None = None

    # What the pack says.
    @property
    def path(self) -> str:
        return self._file.path

    @property
    def rank(self) -> int:
        return self._file.rank

    @property
    def world(self) -> int:
        return self._file.world

    @property
    def seq_len(self) -> int:
        return self._file.seq_len

    @property
    def vocab_size(self) -> int:
        return self._file.vocab_size

    @property
    def max_id(self) -> int:
        """The largest id the pack holds (manifest tokenizer.max_id; vocab_size - 1 in a pack made before it)."""
        return self._file.max_id

    @property
    def eos_id(self) -> int:
        return self._file.eos_id

    @property
    def has_mask(self) -> bool:
        """True for a pack with assistant loss masks (``evenkeel pack --loss-mask assistant``)."""
        return self._mask is not None

    @property
    def has_docs(self) -> bool:
        """True for a pack with document boundaries (rank-NNNNN.docs beside the blocks)."""
        return self._doc_starts is not None

    @property
    def has_padding(self) -> bool:
        """True when some block ends in padding (a bit-63 entry of the docs file: bfd packing)."""
        if self._has_padding is None:
            docs = self._doc_starts
            self._has_padding = docs is not None and bool((docs >> np.uint64(63)).any())
        return self._has_padding

    @property
    def doc_starts(self) -> np.ndarray | None:
        """The rank's document boundaries as a read-only 1-D numpy uint64 view of the docs
        file (docs/pack_format.md): ascending token offsets ``block * seq_len + position``
        where a segment begins, bit 63 set where a block's padding begins; every block
        start begins a segment too. None for a pack made before them."""
        return self._doc_starts

    @property
    def mask(self) -> torch.Tensor | None:
        """The loss mask as a (local_blocks, seq_len) uint8 view (1: the token trains), or None."""
        return self._mask

    def labels(self, ids: torch.Tensor, index) -> torch.Tensor:
        """Labels for the blocks ``index`` whose ids (any integer dtype, any device) are
        ``ids``: int64 ids with ``-100`` where the mask is 0; the ids when there is no mask."""
        labels = ids.to(dtype=torch.long, copy=True)
        if self._mask is not None:
            keep = self._mask[torch.as_tensor(index)].to(device=labels.device, dtype=torch.bool)
            labels.masked_fill_(~keep, self.IGNORE_INDEX)
        return labels

    def batch(self, index, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """``(input_ids, labels)`` for the blocks ``index`` (a sequence or array of block
        indices of the file), both int64 of shape (len(index), seq_len) on ``device``."""
        index = torch.as_tensor(np.asarray(index, dtype=np.int64))
        ids = self._blocks[index].to(device=device, dtype=torch.long, non_blocking=True)
        return ids, self.labels(ids, index)

    def inputs(self, index, device: torch.device | str = "cpu", implementation: str | None = None) -> dict:
        """The forward's keyword arguments for the blocks ``index``: ``input_ids`` and
        ``labels`` (:meth:`batch`), and with ``attention = "isolated"`` the document
        fields of :func:`evenkeel.segments.isolated_fields` (position_ids restarting per
        document, labels -100 at each document's first token and on padding, the varlen
        cu_seq_lens/max_length), laid out for ``implementation``
        (:func:`evenkeel.attention.model_inputs`)."""
        ids, labels = self.batch(index, device=device)
        if self.attention == "cross":
            if self.has_padding:  # padding never trains, whatever the attention
                _, pad = segment_starts(np.asarray(index, dtype=np.int64), self.seq_len, self._docs())
                labels.masked_fill_(torch.from_numpy(pad).to(labels.device), self.IGNORE_INDEX)
            return {"input_ids": ids, "labels": labels}
        fields = isolated_fields(np.asarray(index, dtype=np.int64), self.seq_len, self._docs(), labels)
        return model_inputs(implementation or "", ids, fields)

    def trained_targets(self, index) -> int:
        """How many tokens of the blocks ``index`` the loss counts: positions 1.. of each
        block whose mask is 1 (a causal LM predicts token t from the tokens before it, so
        a block's first token is never a target), never padding (a bfd pack's), and with
        ``attention = "isolated"`` not a document's first token either."""
        index = np.asarray(index, dtype=np.int64)
        if self.attention == "isolated" or self.has_padding:
            starts, pad = segment_starts(index, self.seq_len, self._docs())
            drop = starts | pad if self.attention == "isolated" else pad
            drop[:, 0] = True
            keep = ~drop
            if self._mask is not None:
                keep &= self._mask[torch.as_tensor(index)].numpy().astype(bool)
            return int(keep.sum())
        index = torch.as_tensor(index)
        if self._mask is None:
            return int(len(index) * (self.seq_len - 1))
        return int(self._mask[index][:, 1:].sum())

    def _docs(self) -> np.ndarray:
        docs = self.doc_starts
        if docs is None:
            raise ValueError(f"{self.path}: rank {self.rank} has no document boundaries (rank-NNNNN.docs: a pack "
                             "made before they existed); repack it, or train with attention = 'cross'")
        return docs

    @property
    def local_blocks(self) -> int:
        """Blocks in this rank's file."""
        return self._file.blocks

    @property
    def tensor(self) -> torch.Tensor:
        """The whole file as a (local_blocks, seq_len) int32 tensor view."""
        return self._blocks

    # The schedule.
    def __len__(self) -> int:
        return self._count

    @property
    def epoch(self) -> int:
        return self._epoch

    def pin(self, count: int) -> None:
        """Make every epoch yield exactly ``count`` blocks (evenfix calls this)."""
        count = int(count)
        if count < 0:
            raise ValueError(f"pin: count {count} is negative")
        _core.EpochOrder.make(self.seed, 0, self.local_blocks, count, self.shuffle)  # raises if impossible
        self._count = count
        self._order = None

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch the next iteration yields, from its first block."""
        self._epoch = int(epoch)
        self._start = 0

    def order(self, epoch: int) -> _core.EpochOrder:
        if self._order is None or self._order.epoch != epoch or self._order.count != self._count:
            self._order = _core.EpochOrder.make(self.seed, epoch, self.local_blocks, self._count, self.shuffle)
        return self._order

    def blocks_for(self, epoch: int) -> np.ndarray:
        """The block indices epoch ``epoch`` yields, in order (int64, ``len(self)`` of them)."""
        return self.order(int(epoch)).blocks()

    def start_at(self, epoch: int, step: int, micro_batch: int, grad_accum: int) -> int:
        """Resume: the next iteration yields epoch ``epoch`` from the block after
        ``step`` optimizer steps of ``micro_batch * grad_accum`` blocks. Returns that
        position in the epoch's order (``len(self)`` when the epoch is used up)."""
        position, _, _ = _core.resume(self.order(int(epoch)), int(step), int(micro_batch), int(grad_accum))
        self._epoch = int(epoch)
        self._start = position
        return position

    def step_blocks(self, epoch: int, step_in_epoch: int, micro_batch: int, grad_accum: int) -> np.ndarray:
        """The block indices (of the file) that optimizer step ``step_in_epoch`` (1-based)
        of epoch ``epoch`` trains on: ``micro_batch * grad_accum`` of them in micro-batch
        order, from the resume position after the step before it (fewer when the epoch's
        order runs out first). The trainer takes each step's window from here, so a run
        resumed at any step trains the same blocks as one that was never stopped."""
        order = self.order(int(epoch))
        position, _, _ = _core.resume(order, int(step_in_epoch) - 1, int(micro_batch), int(grad_accum))
        end = min(order.count, position + int(micro_batch) * int(grad_accum))
        return np.array([order.at(p) for p in range(position, end)], dtype=np.int64)

    def __getitem__(self, index: int) -> torch.Tensor:
        """Block ``index`` of the file (not of the epoch's order)."""
        return self._blocks[index]

    def __iter__(self) -> Iterator[torch.Tensor]:
        order = self.order(self._epoch)
        start, self._start = self._start, 0
        for position in range(start, order.count):
            yield self._blocks[order.at(position)]

    def __repr__(self) -> str:
        return (f"BlockDataset({self.path!r}, rank={self.rank}, blocks={self.local_blocks}, "
                f"pinned={self._count}, seq_len={self.seq_len}, seed={self.seed}, shuffle={self.shuffle})")
