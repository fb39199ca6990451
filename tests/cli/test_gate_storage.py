"""The gate's storage check plans the checkpoint as the trainer writes it.

A real checkpoint of the tiny Qwen3 (Qwen3's real 151,936-row vocabulary, tied
embeddings, the real 11 MB tokenizer.json) is written by the trainer's own saver
(evenkeel.saver, weights and training state), in this process (one rank, no process
group), and `evenkeel plan` and `evenkeel gate` must have planned it: the same files,
and a size within 10% of the directory's. The field's run planned 2 B/param alone
(8.26 MB) for checkpoints that were 17.4 MB on disk.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EVENKEEL = os.environ.get("EVENKEEL", str(ROOT / "build" / "src" / "cli" / "evenkeel"))
sys.path.insert(0, str(ROOT / "tests" / "trainer"))

from packs import make_tiny_model, write_run_file  # noqa: E402

OK = 0
# Optional files the writer copies when a model directory has them; the tiny model has
# none of these, so the test adds them (small) to see every name planned and copied.
OPTIONAL = {"vocab.json": "{}\n", "merges.txt": "#version: 0.2\n", "chat_template.jinja": "{{ messages }}\n",
            "chat_template.json": "{\"chat_template\": \"x\"}\n", "added_tokens.json": "{}\n",
            "special_tokens_map.json": "{}\n", "tokenizer.model": "\x0a\x05piece\n"}


def ek(*args):
    assert os.path.exists(EVENKEEL), f"missing {EVENKEEL}: build first"
    env = dict(os.environ, TORCH_FR_BUFFER_SIZE="2000")
    return subprocess.run([EVENKEEL, *map(str, args)], capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("storage")
    model_dir = make_tiny_model("qwen3", tmp / "tiny-qwen3")
    for name, text in OPTIONAL.items():
        (model_dir / name).write_text(text)
    (model_dir / "README.md").write_text("not copied\n" * 1000)  # a file the writer leaves behind
    corpus = tmp / "in.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"record {i} " + "word " * (1 + i % 9)}) + "\n" for i in range(40)))
    pack_dir = tmp / "pack"
    p = ek("pack", "--tokenizer", model_dir / "tokenizer.json", "--eos", "<|endoftext|>", "--world", 1,
           "--seq-len", 16, "--out", pack_dir, corpus)
    assert p.returncode == OK, p.stdout + p.stderr
    ckpt = tmp / "ckpt"
    run = write_run_file(tmp / "run.toml", {
        "run": {"name": "storage"},
        "cluster": {"nodes": 1, "gpus_per_node": 1},
        "data": {"pack_dir": str(pack_dir)},
        "model": {"path": str(model_dir)},
        "train": {"seq_len": 16, "grad_accum": 1, "save_every": 2},
        "checkpoint": {"dir": str(ckpt), "keep": 2},
        "gpu": {"memory_gb": 80},
    })
    return model_dir, pack_dir, ckpt, run


def write_checkpoint(model_dir: Path, pack_dir: Path, ckpt: Path, run: Path, step: int) -> Path:
    """One save by the trainer's writer, with the manifest fields the trainer passes."""
    import torch
    from transformers import AutoModelForCausalLM

    from evenkeel import _core
    from evenkeel.saver import Saver

    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters())
    for p in model.parameters():  # AdamW's moments exist once it has stepped
        p.grad = torch.zeros_like(p)
    opt.step()
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    saver = Saver(str(ckpt), str(model_dir), keep=2, blocking=True)
    manifest = {
        "step": step, "epoch": 0, "step_in_epoch": step, "epoch_complete": False, "final": False,
        "tokens_seen": step * 16,
        "run": {"name": "storage", "path": str(run), "xxh3": _core.xxh3_file(str(run))},
        "pack": {"dir": str(pack_dir), "manifest_xxh3": _core.xxh3_file(str(pack_dir / "manifest.json")),
                 "world": 1, "seq_len": 16},
        "extra": {"pinned_blocks": 12, "micro_batch": 1, "grad_accum": 1, "seed": 0, "shuffle": True,
                  "total_steps": 12, "blocks_consumed_per_rank": step},
    }
    data = {"epoch": 0, "step_in_epoch": step, "step": step, "tokens_seen": step * 16}
    path = saver.save(step, model, opt, sched, data, manifest)
    saver.close()
    return Path(path)


def test_the_planned_checkpoint_is_the_written_one(setup):
    model_dir, pack_dir, ckpt, run = setup
    plan = ek("plan", run, "--json")
    assert plan.returncode == OK, plan.stdout + plan.stderr
    p = json.loads(plan.stdout)
    written = write_checkpoint(model_dir, pack_dir, ckpt, run, step=2)
    real = {f.name: f.stat().st_size for f in written.iterdir() if f.is_file()}
    # The training state (checkpoint format 2), as the trainer's saver writes it: DCP's files.
    state_dir = written / "train_state"
    assert state_dir.is_dir()
    state_files = {f"train_state/{f.name}": f.stat().st_size for f in state_dir.iterdir()}
    state_real = sum(state_files.values())
    assert {"train_state/.metadata", "train_state/__0_0.distcp"} == set(state_files), state_files
    # The plan lists the files beside the state; the state is its checkpoint_state_bytes (below).
    planned = {f["name"]: f["bytes"] for f in p["checkpoint_files"]}
    # The same files: the shards, the index, the manifest and every model file the writer
    # copies (README.md is not one); a name copied but not planned is a drift between
    # run::kCheckpointCopiedFiles and checkpoint.py's list.
    assert sorted(planned) == sorted(real), (sorted(planned), sorted(real))
    from evenkeel.checkpoint import TOKENIZER_FILES
    copied = set(OPTIONAL) | {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"}
    assert copied == set(TOKENIZER_FILES) | {"config.json", "generation_config.json"}
    total = sum(real.values())
    beside_state = p["checkpoint_bytes"] - p["checkpoint_state_bytes"]
    assert abs(beside_state - total) <= 0.10 * total, (beside_state, total, planned, real)
    assert p["checkpoint_bytes"] == p["checkpoint_weight_bytes"] + p["checkpoint_extra_bytes"] + p["checkpoint_state_bytes"]
    # The training state: fp32 parameters and AdamW's two moments, 12 B/param.
    assert p["checkpoint_state_bytes"] == 12 * p["params"], (p["checkpoint_state_bytes"], state_real)
    assert abs(p["checkpoint_state_bytes"] - state_real) <= 0.10 * state_real, (p["checkpoint_state_bytes"], state_real)
    assert p["checkpoint_copies_measured"] is True
    # The weights are exact up to the headers' few bytes; the copied files are the model's.
    shards = [n for n in real if n.endswith(".safetensors")]
    assert p["checkpoint_shards"] == len(shards) == 1
    assert abs(planned[shards[0]] - real[shards[0]]) <= 256, (planned[shards[0]], real[shards[0]])
    assert planned["tokenizer.json"] == real["tokenizer.json"] == (model_dir / "tokenizer.json").stat().st_size
    # The old plan's 2 B/param alone is not within 10% here: the tokenizer is a third of it.
    assert 2 * p["params"] < 0.8 * total
    text = ek("plan", run)
    assert text.returncode == OK, text.stderr
    assert "checkpoint as written: " in text.stdout and "tokenizer.json 11.4 MB" in text.stdout, text.stdout

    # The gate plans the same size, and room for keep + 1 copies less the verified one
    # already there (pruned as saves land): max(2 x S, 3 x S - that one's size).
    gate = ek("gate", run, "--json")
    assert gate.returncode == OK, gate.stdout + gate.stderr
    storage = next(c for c in json.loads(gate.stdout)["checks"] if c["name"] == "storage")
    n = storage["numbers"]
    assert n["checkpoint_bytes"] == p["checkpoint_bytes"]
    assert n["checkpoints_existing"] == 1 and n["checkpoint_existing_bytes"] == total + state_real
    size = p["checkpoint_bytes"]
    assert n["checkpoint_need_bytes"] == pytest.approx(max(2 * size, 3 * size - total - state_real))
    assert "needs 3 x " in storage["reason"] and "(keep 2 + 1 during a save)" in storage["reason"], storage["reason"]
    assert "less the 1 verified checkpoint(s) already there (step-00000002" in storage["reason"], storage["reason"]
    assert storage["verdict"] == "PASS", storage


def test_a_corrupt_checkpoint_already_there_is_not_counted(setup, tmp_path):
    """Only verified checkpoints are pruned as the saves land: one whose shard is cut
    short frees nothing the plan can count on."""
    model_dir, pack_dir, _, run = setup
    ckpt = tmp_path / "ckpt"
    text = run.read_text().replace(str(setup[2]), str(ckpt))
    run2 = tmp_path / "run.toml"
    run2.write_text(text)
    written = write_checkpoint(model_dir, pack_dir, ckpt, run2, step=4)
    shard = next(written.glob("*.safetensors"))
    with open(shard, "r+b") as f:
        f.truncate(shard.stat().st_size - 100)
    gate = ek("gate", run2, "--json")
    storage = next(c for c in json.loads(gate.stdout)["checks"] if c["name"] == "storage")
    n = storage["numbers"]
    assert n["checkpoints_existing"] == 0, storage
    assert n["checkpoint_need_bytes"] == pytest.approx(3 * n["checkpoint_bytes"])
    assert "needs 3 x " in storage["reason"] and "already there" not in storage["reason"], storage["reason"]
