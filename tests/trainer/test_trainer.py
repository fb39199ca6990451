"""The field report's deadlock and evenfix, end to end: trainer/train.py with FSDP2
(fully_shard) on 4 CPU processes over gloo.

The pack gives ranks 0-2 twelve blocks and rank 3 eight; at one micro-batch of one
block and two micro-batches per step that is 6 steps on ranks 0-2 and 4 on rank 3.
"""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from packs import TRAIN, child_env, free_port, launch, make_pack

BLOCKS = [12, 12, 12, 8]
COMMON = ["--grad-accum", "2", "--micro-batch", "1", "--d-model", "32", "--layers", "2", "--heads", "2",
          "--warmup", "2", "--lr", "1e-3"]
HANG_TIMEOUT = 15  # seconds: the collective timeout of the deadlock run


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    return make_pack(tmp_path / "pack", BLOCKS, seq_len=16, vocab=64)


def done_steps(output: str) -> int:
    m = re.search(r"\] done steps=(\d+) checkpoint=(\S+)", output)
    assert m, f"no 'done' line in:\n{output}"
    return int(m.group(1))


def last_entries_by_seq(dump: Path) -> dict[int, str]:
    """collective_seq_id -> profiling_name of one rank's flight-recorder dump."""
    entries = pickle.loads(dump.read_bytes())["entries"]
    return {e["collective_seq_id"]: e["profiling_name"] for e in entries}


def test_uneven_blocks_without_evenfix_deadlock_at_the_save_barrier(pack: Path, tmp_path: Path):
    """Rank 3 runs out of blocks after step 4 and enters the save barrier's collective
    while ranks 0-2 go on to step 5 and wait in FSDP's collective: every rank blocks
    until the collective timeout, as in the report (there: 3 hours until the NCCL
    watchdog). The flight recorder shows different collectives at the same sequence
    number: the barrier on rank 3, FSDP's parameter all-gather on the others (on
    gloo the CPU waits at the first unmatched collective, the forward all_gather of
    step 5; on NCCL the host runs ahead into backward, so the newest entries there are
    the reduce_scatters the report names)."""
    fr = tmp_path / "fr"
    fr.mkdir()
    results, wall = launch(4, ["--pack", str(pack), "--ckpt-dir", str(tmp_path / "ckpt"), "--evenfix", "off",
                               "--timeout", str(HANG_TIMEOUT), *COMMON], tmp_path, timeout=150,
                           env={"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_FR_DUMP_TEMP_FILE": str(fr / "rank_")})
    logs = "\n".join(f"--- rank {r.rank} (exit {r.returncode}) ---\n{r.output}" for r in results)
    for r in results:
        assert r.returncode not in (None, 0), f"rank {r.rank} should have failed on its own\n{logs}"
        m = re.search(r"\] error in (.+?) after ([\d.]+)s at step (\d+): (.*)", r.output)
        assert m, f"rank {r.rank} did not report where it failed\n{logs}"
        phase, waited, step, error = m.group(1), float(m.group(2)), int(m.group(3)), m.group(4)
        assert waited >= HANG_TIMEOUT - 1, f"rank {r.rank} failed after {waited}s, before the timeout\n{logs}"
        if r.rank == 3:
            assert phase == "save_barrier" and step == 4, logs
            assert "save barrier at step 4" in r.output
        else:
            assert phase.startswith("forward (step 5") or phase.startswith("backward (step 5"), logs
            assert step == 4, logs
    # At least the first rank to give up did so on its own timeout (the others may see it leave).
    assert any("Timed out" in r.output for r in results), logs
    assert not list((tmp_path / "ckpt").glob("step-*.pt")), "no rank may get past the barrier to a save"

    by_rank = {r: last_entries_by_seq(fr / f"rank_{r}") for r in range(4)}
    seq = max(by_rank[3])
    assert by_rank[3][seq] == "gloo:barrier", by_rank[3][seq]
    for r in range(3):
        assert max(by_rank[r]) == seq, f"rank {r} is at collective {max(by_rank[r])}, rank 3 at {seq}"
        assert by_rank[r][seq] in ("gloo:all_gather", "gloo:all_reduce", "gloo:reduce_scatter"), by_rank[r][seq]
    # Before that slot, every rank issued the same collectives.
    for s in range(1, seq):
        assert len({by_rank[r].get(s) for r in range(4)}) == 1, f"ranks disagree at collective {s}"
    print(f"deadlock run: {wall:.1f}s wall; rank 3 {by_rank[3][seq]} vs ranks 0-2 {by_rank[0][seq]} at seq {seq}")


def test_evenfix_min_every_rank_runs_the_minimum_and_resumes(pack: Path, tmp_path: Path):
    """evenfix min pins every rank to 8 blocks = 4 steps. A first run stops at step 2
    (--max-steps, with a save every 2 steps); the second resumes its weights and data
    position from that checkpoint and every rank reaches the end-of-epoch save at 4."""
    ckpt = tmp_path / "ckpt"
    args = ["--pack", str(pack), "--ckpt-dir", str(ckpt), "--evenfix", "min", "--timeout", "60",
            "--save-every", "2", *COMMON]
    first, wall1 = launch(4, [*args, "--max-steps", "2"], tmp_path, timeout=150)
    logs = "\n".join(f"--- rank {r.rank} (exit {r.returncode}) ---\n{r.output}" for r in first)
    assert [r.returncode for r in first] == [0, 0, 0, 0], logs
    for r in first:
        local = BLOCKS[r.rank]
        assert f"[evenfix] local={local:,} -> min=8" in r.output, logs
        assert done_steps(r.output) == 2, logs
        assert "save barrier at step 2" in r.output
    assert sorted(p.name for p in ckpt.glob("step-*.pt")) == ["step-00000002.pt"]

    second, wall2 = launch(4, args, tmp_path, timeout=150)
    logs = "\n".join(f"--- rank {r.rank} (exit {r.returncode}) ---\n{r.output}" for r in second)
    assert [r.returncode for r in second] == [0, 0, 0, 0], logs
    for r in second:
        assert "resumed weights from " + str(ckpt / "step-00000002.pt") + ": epoch 0 step 2 (global 2)" in r.output
        assert done_steps(r.output) == 4, logs
        assert "save barrier at step 4" in r.output and "save barrier at step 3" not in r.output
    saved = torch.load(ckpt / "step-00000004.pt", weights_only=True)
    assert (saved["global_step"], saved["epoch"], saved["step_in_epoch"], saved["pinned_blocks"]) == (4, 0, 4, 8)
    assert saved["model"]["embed.weight"].shape == (64, 32)  # the full (unsharded) weights
    print(f"evenfix min: {wall1:.1f}s + resumed {wall2:.1f}s wall")


def test_evenfix_pad_every_rank_runs_the_maximum_under_torchrun(pack: Path, tmp_path: Path):
    """evenfix pad pins every rank to 12 blocks = 6 steps (rank 3 repeats 4 of its
    blocks); launched by torchrun, checkpoints at steps 3 and 6 (epoch end)."""
    ckpt = tmp_path / "ckpt"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "4",
           "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", str(TRAIN),
           "--pack", str(pack), "--ckpt-dir", str(ckpt), "--evenfix", "pad", "--timeout", "60",
           "--save-every", "3", *COMMON]
    proc = subprocess.run(cmd, env=child_env(), cwd=tmp_path, capture_output=True, text=True, timeout=150,
                          start_new_session=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    evenfix_lines = sorted(re.findall(r"\[evenfix\] local=[\d,]+ -> max=[\d,]+", out))
    assert evenfix_lines == ["[evenfix] local=12 -> max=12"] * 3 + ["[evenfix] local=8 -> max=12"], out
    steps = {int(r): int(s) for r, s in re.findall(r"\[rank (\d)\] done steps=(\d+)", out)}
    assert steps == {0: 6, 1: 6, 2: 6, 3: 6}, out
    for r in range(4):
        assert f"[rank {r}] blocks={BLOCKS[r]} pinned=12 steps_per_epoch=6" in out
    assert sorted(p.name for p in ckpt.glob("step-*.pt")) == ["step-00000003.pt", "step-00000006.pt"]
    assert torch.load(ckpt / "step-00000006.pt", weights_only=True)["global_step"] == 6
