"""evenkeel ckpt verify / list on checkpoints written by the real peers (transformers'
save_pretrained, the safetensors package), through the real binary."""
import json
import os
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))

import safetensors.torch as safetensors_torch  # a missing peer fails the suite, never skips it
import torch
import transformers


def run(*args):
    assert os.path.exists(EVENKEEL), f"missing {EVENKEEL}: build first"
    return subprocess.run([EVENKEEL, "ckpt", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    """A tiny bf16 Llama saved by transformers in three shards with an index."""
    out = tmp_path_factory.mktemp("ckpt") / "step-00000010"
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, tie_word_embeddings=False)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(out, max_shard_size="100KB")
    assert (out / "model.safetensors.index.json").exists()
    return out


def test_transformers_checkpoint_verifies_without_a_manifest(hf_dir):
    p = run("verify", "--no-manifest", "--json", str(hf_dir))
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["ok"] and report["shard_count"] >= 2 and report["tensor_count"] == 21
    assert not report["has_manifest"] and report["step"] == 10


def test_missing_manifest_fails_with_the_headline(hf_dir):
    p = run("verify", "--quick", str(hf_dir))
    assert p.returncode == 1
    assert "evenkeel: error:" in p.stderr
    assert "no evenkeel-checkpoint.json: incomplete or not an evenkeel checkpoint" in p.stderr


def test_every_dtype_the_safetensors_package_writes_is_read(tmp_path):
    tensors = {
        "bool": torch.tensor([True, False, True]),
        "u8": torch.zeros(5, dtype=torch.uint8),
        "i8": torch.zeros(5, dtype=torch.int8),
        "i16": torch.zeros(3, dtype=torch.int16),
        "i32": torch.zeros(3, dtype=torch.int32),
        "i64": torch.arange(4),
        "f16": torch.ones(2, 2, dtype=torch.float16),
        "bf16": torch.ones(2, 3, dtype=torch.bfloat16),
        "f32": torch.ones(3),
        "f64": torch.ones(3, dtype=torch.float64),
        "f8e4m3": torch.zeros(3, dtype=torch.float8_e4m3fn),
        "f8e5m2": torch.zeros(3, dtype=torch.float8_e5m2),
        "empty": torch.zeros(0, 4),
    }
    safetensors_torch.save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    p = run("verify", "--no-manifest", "--json", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads(p.stdout)["tensor_count"] == len(tensors)


def test_truncated_shard_names_file_and_bytes(hf_dir, tmp_path):
    bad = tmp_path / "step-00000020"
    bad.mkdir()
    for f in hf_dir.iterdir():
        (bad / f.name).write_bytes(f.read_bytes())
    shard = sorted(bad.glob("model-*.safetensors"))[1]
    size = shard.stat().st_size
    with open(shard, "r+b") as fh:
        fh.truncate(size - 100)
    p = run("verify", "--no-manifest", str(bad))
    assert p.returncode == 1
    expect = f"{shard.name}: truncated: header declares data up to byte {size}, file ends at byte {size - 100}"
    assert expect in p.stderr, p.stderr
    assert expect in p.stdout

    listing = run("list", "--quick", "--json", str(tmp_path))
    assert listing.returncode == 0, listing.stderr
    entries = json.loads(listing.stdout)
    assert [e["step"] for e in entries] == [20]
    assert entries[0]["verdict"] == "no evenkeel-checkpoint.json: incomplete or not an evenkeel checkpoint"


def test_usage_errors(tmp_path):
    assert run().returncode != 0
    p = run("verify", str(tmp_path / "absent"))
    assert p.returncode == 65 and "no such directory" in p.stderr
