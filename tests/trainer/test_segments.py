"""evenkeel.segments: the isolated batch fields from packed blocks and their docs
entries, against transformers' DataCollatorWithFlattening on the same documents."""

import numpy as np
import pytest
import torch
from docpacks import documents, padded, sequential
from transformers import DataCollatorWithFlattening

from evenkeel.segments import isolated_fields

SEQ = 16


def collate(pieces_by_block, blocks, order):
    """DataCollatorWithFlattening over the pieces of blocks `order`, in that order."""
    features = [{"input_ids": blocks[b, s:e].tolist()} for b in order for s, e, _ in pieces_by_block[b]]
    return DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_position_ids=True)(features)


@pytest.mark.parametrize("order", [[0, 1, 2, 3, 4], [3, 0, 4, 1], [2]])
def test_sequential_fields_equal_data_collator_with_flattening(order):
    rng = np.random.default_rng(1)
    docs = documents(rng, [5, 9, 16, 3, 23, 1, 7, 11, 4, 8, 13], vocab=50)  # 64: a block start; 33-56 spans two
    blocks, entries, pieces = sequential(docs, SEQ)
    assert len(blocks) >= 5 and 64 in entries.tolist()
    ids = torch.from_numpy(blocks[order])
    got = isolated_fields(order, SEQ, entries, ids.clone())
    want = collate(pieces, blocks, order)
    assert torch.equal(ids.reshape(1, -1), want["input_ids"])
    assert torch.equal(got["position_ids"].reshape(1, -1), want["position_ids"])
    assert torch.equal(got["labels"].reshape(1, -1), want["labels"])
    for k in ("cu_seq_lens_q", "cu_seq_lens_k"):
        assert got[k].dtype == torch.int32 and torch.equal(got[k], want[k]), k
    assert got["max_length_q"] == got["max_length_k"] == want["max_length_q"] == want["max_length_k"]
    assert got["position_ids"].max() < SEQ and got["position_ids"].dtype == torch.int64


def test_a_document_starting_at_a_block_start_is_one_segment_there():
    docs = [np.arange(1, 17), np.arange(1, 9), np.arange(1, 9)]
    blocks, entries, _ = sequential(docs, SEQ)
    assert list(entries) == [0, 16, 24]
    got = isolated_fields([1], SEQ, entries, torch.from_numpy(blocks[[1]]))
    assert got["cu_seq_lens_q"].tolist() == [0, 8, 16]
    assert got["position_ids"][0].tolist() == list(range(8)) * 2


def test_padding_is_its_own_segment_and_never_a_target():
    rng = np.random.default_rng(2)
    docs = documents(rng, [7, 6, 12, 16, 2, 9], vocab=50)
    blocks, entries, pieces = padded(docs, SEQ, pad_id=0)
    assert any(int(e) >> 63 for e in entries)
    order = list(range(len(blocks)))
    got = isolated_fields(order, SEQ, entries, torch.from_numpy(blocks).clone())
    want = collate(pieces, blocks, order)
    assert torch.equal(got["position_ids"].reshape(1, -1), want["position_ids"])
    assert torch.equal(got["cu_seq_lens_q"], want["cu_seq_lens_q"])
    labels = got["labels"].reshape(-1)
    pad = torch.zeros(len(order) * SEQ, dtype=torch.bool)
    for b in order:
        for s, e, is_pad in pieces[b]:
            if is_pad:
                pad[b * SEQ + s:b * SEQ + e] = True
    assert pad.any() and (labels[pad] == -100).all()
    keep = ~pad
    assert torch.equal(labels[keep], want["labels"].reshape(-1)[keep])
    # What the loss counts: one target per document token but its first.
    assert int((labels != -100).sum()) == sum(len(d) - 1 for d in docs)


def test_the_loss_mask_stays_and_the_boundaries_are_added():
    rng = np.random.default_rng(3)
    blocks, entries, pieces = sequential(documents(rng, [10, 14, 9, 20], vocab=50), SEQ)
    order = [1, 0, 2]
    ids = torch.from_numpy(blocks[order])
    mask = torch.from_numpy(rng.integers(0, 2, size=ids.shape).astype(bool))
    labels = ids.masked_fill(~mask, -100)
    got = isolated_fields(order, SEQ, entries, labels)
    want = collate(pieces, blocks, order)["labels"].reshape(ids.shape)
    ours = got["labels"]
    assert (ours[~mask] == -100).all()
    assert torch.equal(ours[mask & (ours != -100)], want[mask & (ours != -100)])
    assert torch.equal((ours != -100), mask & (want != -100))


def test_labels_of_the_wrong_shape_are_refused():
    blocks, entries, _ = sequential([np.arange(1, 40)], SEQ)
    with pytest.raises(ValueError, match="labels have shape"):
        isolated_fields([0, 1], SEQ, entries, torch.zeros(1, SEQ, dtype=torch.long))


def test_block_dataset_gives_the_isolated_fields_of_its_docs_file_and_counts_their_targets(tmp_path):
    """Over a real pack read by the C++ loader: a docs file with documents inside blocks,
    one spanning blocks and a block's padding; BlockDataset.inputs is isolated_fields of
    the mapped entries, and trained_targets counts exactly the labels the loss keeps."""
    import json

    from packs import make_pack, xxh3_file

    from evenkeel import BlockDataset
    pack = make_pack(tmp_path / "pack", [6, 6], seq_len=SEQ, vocab=64)
    entries = np.array([0, 5, 20, 40, 41, (3 * SEQ + 9) | (1 << 63), 4 * SEQ + 2, 70], dtype="<u8")
    (pack / "rank-00001.docs").write_bytes(entries.tobytes())
    manifest = json.loads((pack / "manifest.json").read_text())
    manifest["ranks"][1].update(docs_xxh3=xxh3_file(pack / "rank-00001.docs"), documents=7)
    (pack / "manifest.json").write_text(json.dumps(manifest))
    ds = BlockDataset(pack, 1, attention="isolated")
    assert np.array_equal(ds.doc_starts, entries)
    index = [3, 0, 4, 1]
    got = ds.inputs(index)
    ids, labels = ds.batch(index)
    want = isolated_fields(index, SEQ, entries, labels)
    assert torch.equal(got["input_ids"], ids)
    for k in ("labels", "position_ids", "cu_seq_lens_q", "cu_seq_lens_k"):
        assert torch.equal(got[k], want[k]), k
    assert got["max_length_q"] == want["max_length_q"]
    assert ds.trained_targets(index) == int((got["labels"] != -100).sum())
    assert (got["labels"][0, 9:] == -100).all()  # block 3's padding
    assert ds.trained_targets(index) < len(index) * (SEQ - 1)
    cross = BlockDataset(pack, 1)  # attention "cross": the blocks as sequences, but padding never trains
    got = cross.inputs(index)
    assert set(got) == {"input_ids", "labels"} and cross.has_padding
    assert (got["labels"][0, 9:] == -100).all() and int((got["labels"] == -100).sum()) == SEQ - 9
    assert cross.trained_targets(index) == len(index) * (SEQ - 1) - (SEQ - 9)
    plain = BlockDataset(pack, 0)  # one document a block, no padding: today's batch
    assert not plain.has_padding and plain.trained_targets(index) == len(index) * (SEQ - 1)
    assert torch.equal(plain.inputs(index)["labels"], plain.batch(index)[1])
