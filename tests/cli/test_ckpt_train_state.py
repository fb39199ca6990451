"""Checkpoint format 2 through the binding and the real binary: a checkpoint with a
training state (a fake DCP directory: C++ lists and hashes its files, never parses
them) finalizes, `ckpt list` says which checkpoints resume fully, `ckpt verify` gives
the state's verdict apart from the weights', and newest_resumable_checkpoint picks
what the launcher picks."""
import json
import os
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))

import safetensors.torch as safetensors_torch  # a missing peer fails the suite, never skips it
import torch

from evenkeel import _core


def ckpt(*args):
    assert os.path.exists(EVENKEEL), f"missing {EVENKEEL}: build first"
    return subprocess.run([EVENKEEL, "ckpt", *args], capture_output=True, text=True)


def manifest(step, with_state):
    m = {
        "format_version": 2, "step": step, "epoch": 0, "step_in_epoch": step, "epoch_complete": False,
        "final": False, "tokens_seen": step * 16,
        "run": {"name": "t", "path": "/runs/t/run.toml", "xxh3": "0123456789abcdef"},
        "pack": {"dir": "/data/pack", "manifest_xxh3": "fedcba9876543210", "world": 2, "seq_len": 16},
        "dtype": "bfloat16", "created": "", "evenkeel_version": "", "extra": {}, "files": [],
    }
    if with_state:
        m["train_state"] = {"format": "torch.distributed.checkpoint", "dir": "train_state", "world": 2,
                            "precision": "fp32", "contents": ["model", "optimizer", "scheduler", "rng", "data"]}
    return json.dumps(m)


def save(ckpt_dir, step, with_state=True):
    temp = ckpt_dir / f".step-{step:08d}.tmp-{os.getpid()}"
    temp.mkdir(parents=True)
    safetensors_torch.save_file({"w": torch.ones(4, 4, dtype=torch.bfloat16)}, temp / "model.safetensors",
                                metadata={"format": "pt"})
    (temp / "config.json").write_text("{}")
    if with_state:
        (temp / "train_state").mkdir()
        (temp / "train_state" / ".metadata").write_bytes(b"\x80\x04pickled-by-torch")
        for r in range(2):
            (temp / "train_state" / f"__{r}_0.distcp").write_bytes(bytes([r]) * 4096)
    final = ckpt_dir / f"step-{step:08d}"
    _core.finalize_checkpoint(str(temp), str(final), manifest(step, with_state))
    return final


def test_a_full_checkpoint_lists_verifies_and_resumes_fully(tmp_path):
    d = save(tmp_path, 10)
    m = json.loads((d / "evenkeel-checkpoint.json").read_text())
    assert m["format_version"] == 2 and m["train_state"]["world"] == 2
    assert [f["name"] for f in m["files"]] == [
        "config.json", "model.safetensors", "train_state/.metadata", "train_state/__0_0.distcp",
        "train_state/__1_0.distcp"]
    p = ckpt("verify", "--json", str(d))
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(p.stdout)
    assert r["ok"] and r["weights_ok"] and r["has_train_state"] and r["train_state_ok"]
    assert r["train_state_world"] == 2 and r["train_state_problems"] == []
    text = ckpt("verify", str(d))
    assert "train state: ok (world 2): resumes fully" in text.stdout, text.stdout
    v = _core.verify_checkpoint(str(d), True)
    assert v["ok"] and v["train_state_ok"] and v["train_state_world"] == 2
    text, path, level, warnings = _core.newest_resumable_checkpoint(str(tmp_path), True, "full")
    assert path == str(d) and level == "full" and warnings == []
    assert json.loads(text)["train_state"]["precision"] == "fp32"


def test_a_bad_state_fails_the_state_and_resume_falls_back(tmp_path):
    save(tmp_path, 10, with_state=False)
    bad = save(tmp_path, 20)
    with open(bad / "train_state" / "__1_0.distcp", "r+b") as f:
        f.seek(100)
        f.write(b"\x00")
    p = ckpt("verify", "--json", str(bad))
    assert p.returncode == 1
    r = json.loads(p.stdout)
    assert not r["ok"] and r["weights_ok"] and r["has_train_state"] and not r["train_state_ok"]
    assert r["train_state_problems"] == ["train_state/__1_0.distcp: checksum mismatch in bytes 0-4095"]
    assert r["train_state_problems"][0] in r["problems"]
    text = ckpt("verify", str(bad))
    assert "train state: FAILED (world 2): train_state/__1_0.distcp: checksum mismatch" in text.stdout
    listing = ckpt("list", "--json", str(tmp_path))
    assert listing.returncode == 0, listing.stderr
    assert [(e["step"], e["resume"]) for e in json.loads(listing.stdout)] == [(10, "weights"), (20, "weights")]
    table = ckpt("list", str(tmp_path))
    assert table.stdout.splitlines()[0].split() == ["STEP", "SIZE", "AGE", "RESUME", "VERDICT"]
    # A full resume finds no verified state: the newest verified weights, with why.
    _, path, level, warnings = _core.newest_resumable_checkpoint(str(tmp_path), True, "full")
    assert path == str(bad) and level == "weights"
    assert warnings[-1].startswith(
        "no checkpoint has a verified training state; resuming weights only from step-00000020: "
        "its training state does not verify: train_state/__1_0.distcp: checksum mismatch"), warnings
    # The old entry point still answers: the newest whose weights and state all verify.
    _, path, warnings = _core.newest_verified_checkpoint(str(tmp_path), True)
    assert path == str(tmp_path / "step-00000010")
    # The state deleted: the state's problem names its directory.
    shutil.rmtree(bad / "train_state")
    r = json.loads(ckpt("verify", "--quick", "--json", str(bad)).stdout)
    assert r["train_state_problems"] == ["train_state: missing (evenkeel-checkpoint.json's train_state names it)"]
    with pytest.raises(_core.Error, match="wanted 'optimizer'"):
        _core.newest_resumable_checkpoint(str(tmp_path), True, "optimizer")


def test_finalize_refuses_a_state_directory_the_manifest_does_not_name(tmp_path):
    temp = tmp_path / f".step-00000005.tmp-{os.getpid()}"
    (temp / "train_state").mkdir(parents=True)
    safetensors_torch.save_file({"w": torch.ones(2, dtype=torch.bfloat16)}, temp / "model.safetensors")
    (temp / "train_state" / ".metadata").write_bytes(b"m")
    with pytest.raises(Exception, match="train_state: a subdirectory, and the manifest has no train_state"):
        _core.finalize_checkpoint(str(temp), str(tmp_path / "step-00000005"), manifest(5, False))
    assert not (tmp_path / "step-00000005").exists()


def test_the_run_files_resume_level_reaches_python(tmp_path):
    from evenkeel.runfile import RunFile

    run = tmp_path / "run.toml"
    run.write_text("[checkpoint]\nkeep = 2\n")
    assert RunFile(run).checkpoint.resume == "full"
    run.write_text("[checkpoint]\nresume = \"weights\"\n")
    assert RunFile(run).checkpoint.resume == "weights"
    assert RunFile(run, ["checkpoint.resume=full"]).checkpoint.resume == "full"
    run.write_text("[checkpoint]\nresume = \"optimizer\"\n")
    with pytest.raises(_core.Error, match=r"checkpoint.resume 'optimizer' \(full, weights\)"):
        RunFile(run)
