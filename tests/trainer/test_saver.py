"""evenkeel.saver in one process (no process group; the multi-rank path runs in the
trainer's tests and the chaos test): a save returns once the state is staged, training
may change the weights at once, and the checkpoint that lands holds the staged values:
the bf16 export (equal to the gather-based CheckpointWriter's) and the training state,
listed, hashed and verified; a full disk during the background write is an error at
the next check, naming the checkpoint, with nothing left in place."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import torch

from packs import EVENKEEL, make_tiny_model

SHARD_BYTES = 8_000_000  # the tiny Qwen3's bf16 export in 2 files: the 19 MB embedding alone, the rest


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_tiny_model("qwen3", tmp_path_factory.mktemp("saver") / "tiny-qwen3")


def trained(model_dir: Path):
    """The tiny model after one AdamW step on random tokens: weights, moments, scheduler."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    ids = torch.randint(0, 512, (2, 16))
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    return model, opt, sched


def manifest(step: int) -> dict:
    return {"epoch": 0, "step_in_epoch": step, "epoch_complete": False, "final": False, "tokens_seen": 32 * step,
            "run": {"name": "saver", "path": "/dev/null", "xxh3": "0" * 16},
            "pack": {"dir": "/dev/null", "manifest_xxh3": "0" * 16, "world": 1, "seq_len": 16}, "extra": {}}


def position(step: int) -> dict:
    return {"epoch": 0, "step_in_epoch": step, "step": step, "tokens_seen": 32 * step}


def verify(path: Path) -> dict:
    p = subprocess.run([EVENKEEL, "ckpt", "verify", str(path), "--json"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout)


def test_a_save_returns_once_staged_and_lands_what_was_staged(model_dir, tmp_path):
    from safetensors.torch import load_file

    from evenkeel import state
    from evenkeel.checkpoint import CheckpointWriter
    from evenkeel.saver import Saver

    model, opt, sched = trained(model_dir)
    staged = {n: p.detach().clone() for n, p in model.named_parameters()}
    moments = {n: {k: v.clone() for k, v in opt.state[p].items()} for n, p in model.named_parameters()}
    # The gather-based writer of weights-only checkpoints, on the same weights: the reference export.
    CheckpointWriter(str(tmp_path / "reference"), str(model_dir), shard_bytes=SHARD_BYTES).save(model, 1, manifest(1))
    saver = Saver(str(tmp_path / "ckpt"), str(model_dir), shard_bytes=SHARD_BYTES, keep=2)
    path = Path(saver.save(1, model, opt, sched, position(1), manifest(1)))
    # Training goes on at once: the weights change while the checkpoint is written.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    result = saver.close()
    assert result is not None and Path(result.path) == path and result.step == 1
    report = verify(path)
    assert report["ok"] and report["has_train_state"] and report["train_state_ok"], report
    assert report["train_state_world"] == 1
    meta = json.loads((path / "evenkeel-checkpoint.json").read_text())
    assert meta["format_version"] == 2 and meta["train_state"]["contents"] == state.CONTENTS
    names = {f["name"] for f in meta["files"]}
    assert {"train_state/.metadata", "train_state/__0_0.distcp"} <= names, names
    assert not list(path.glob(".part-*")), "the ranks' markers are removed before the manifest is written"
    # The bf16 export: the staged weights, in the files the gather-based writer makes.
    reference = tmp_path / "reference" / "step-00000001"
    shards = sorted(p.name for p in path.glob("*.safetensors"))
    assert shards == sorted(p.name for p in reference.glob("*.safetensors")) and len(shards) == 2, shards
    for name in shards:
        got, want = load_file(str(path / name)), load_file(str(reference / name))
        assert sorted(got) == sorted(want)
        for k in got:
            assert torch.equal(got[k], want[k]) and torch.equal(got[k], staged[k].to(torch.bfloat16)), k
    assert json.loads((path / "model.safetensors.index.json").read_text()) == \
        json.loads((reference / "model.safetensors.index.json").read_text())
    # The training state: what was staged, loaded into a model whose weights moved on.
    opt2 = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched2 = torch.optim.lr_scheduler.LambdaLR(opt2, lambda s: 1.0 / (1 + s))
    assert state.load(str(path / "train_state"), model, opt2, sched2, saved_world=1) == position(1)
    for n, p in model.named_parameters():
        assert torch.equal(p, staged[n]), n
        assert all(torch.equal(opt2.state[p][k], v) for k, v in moments[n].items()), n
    assert sched2.last_epoch == sched.last_epoch == 1


def test_the_synchronous_save_writes_the_same_checkpoint(model_dir, tmp_path):
    from safetensors.torch import load_file

    from evenkeel.saver import Saver

    model, opt, sched = trained(model_dir)
    paths = []
    for blocking in (False, True):
        saver = Saver(str(tmp_path / f"ckpt-{blocking}"), str(model_dir), shard_bytes=SHARD_BYTES, blocking=blocking)
        paths.append(Path(saver.save(3, model, opt, sched, position(3), manifest(3))))
        saver.close()
    a, b = paths
    assert verify(b)["ok"]
    files = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    for name in files:
        if name.endswith(".safetensors"):
            got, want = load_file(str(a / name)), load_file(str(b / name))
            assert all(torch.equal(got[k], want[k]) for k in want), name


def test_a_full_disk_during_the_background_write_is_an_error_at_the_next_check(model_dir, tmp_path):
    """A real full disk: the checkpoint directory on a 2 MB tmpfs (the state is ~117 MB)."""
    from evenkeel.saver import Saver

    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(small)], check=True)
    try:
        model, opt, sched = trained(model_dir)
        saver = Saver(str(small / "ckpt"), str(model_dir), shard_bytes=SHARD_BYTES)
        saver.save(2, model, opt, sched, position(2), manifest(2))  # staged: returns
        deadline = time.monotonic() + 120
        while saver.in_flight() and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(RuntimeError) as e:
            saver.check()
        message = str(e.value)
        print(message)
        assert message.startswith("checkpoint step-00000002: the background save failed on rank 0: "), message
        # torch.save's zip writer reports the short write as "unexpected pos"; the free space says why.
        assert "rank 0: " in message and f"{small / 'ckpt'} has 0.0 MB free of 2.1 MB: No space left on device" in message, message
        assert not (small / "ckpt" / "step-00000002").exists()
        saver.check()  # said once: nothing in flight any more
        saver.close()
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)
