"""The reference trainer's parts, one at a time, in this process (real torch, the real
C++ core through the binding): the run file with --set overrides, the plan's walk of
the loop, each step's blocks, the metrics file, the flight-recorder dump, the progress
and heartbeat phase, the input checks, a model loaded under FSDP2 and the resume
start. The whole trainer runs end to end in test_trainer.py."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import evenkeel
from evenkeel import BlockDataset, Heartbeat, Plan, RunFile, flight_recorder
from evenkeel.inputs import check_inputs, open_pack
from evenkeel.metrics import Metrics
from evenkeel.progress import Progress, Refused
from evenkeel.resume import handed_resume, layout_changes, start_of
from packs import TOKENIZER_DIRS, child_env, make_pack, write_run_file

SEQ = 16


def run_file(tmp: Path, pack: Path, *, world: int = 2, model: Path | None = None, **train) -> Path:
    sections = {
        "cluster": {"nodes": 1, "gpus_per_node": world},
        "data": {"pack_dir": str(pack)},
        "model": {"path": str(model or tmp / "model")},
        "train": {"seq_len": SEQ, "micro_batch": 1, "grad_accum": 2, "epochs": 2, "save_every": 3, **train},
        "checkpoint": {"dir": str(tmp / "ckpt")},
        "distributed": {"backend": "gloo"},
    }
    return write_run_file(tmp / "run.toml", sections)


# --- RunFile and Plan with overrides --------------------------------------------------------


def test_an_override_is_applied_by_the_cpp_parser_and_planned_with(tmp_path):
    pack = make_pack(tmp_path / "pack", [12, 12], seq_len=SEQ)
    rf = run_file(tmp_path, pack)
    plain = RunFile(rf)
    over = RunFile(rf, ["train.grad_accum=3", "train.lr=2e-5", "checkpoint.dir=elsewhere"])
    assert (plain.train.grad_accum, over.train.grad_accum, over.train.lr) == (2, 3, 2e-5)
    assert over.checkpoint.dir == str(tmp_path / "elsewhere"), "a path is resolved against the run file"
    assert over.overrides == ["train.grad_accum=3", "train.lr=2e-5", "checkpoint.dir=elsewhere"]
    assert plain.overrides == [] and over.xxh3 == plain.xxh3
    assert (Plan(plain).steps_per_epoch, Plan(over).steps_per_epoch) == (6, 4)
    with pytest.raises(evenkeel.Error, match=r"run.toml: unknown key train.grad_acum \(--set train.grad_acum=3\)$"):
        RunFile(rf, ["train.grad_acum=3"])
    with pytest.raises(evenkeel.Error, match=r"train.epochs \(--set train.epochs=2.5\) must be an integer$"):
        Plan(RunFile(rf, ["train.epochs=2.5"]))


# --- Plan.walk: the loop's control flow -----------------------------------------------------


def test_a_ranks_start_up_runs_without_the_cyclic_collector_and_training_with_it():
    """`python -m evenkeel.train` turns the collector off before its imports; importing the
    module as a library leaves it alone; start_up_done() freezes what the start-up made and
    turns it back on (docs/trainer.md, Goodput)."""
    probe = ("import gc, runpy, sys\n"
             "sys.argv = ['evenkeel.train']\n"  # no run file: argparse exits before anything starts
             "try:\n    runpy.run_module('evenkeel.train', run_name='__main__')\n"
             "except SystemExit:\n    pass\n"
             "print(gc.isenabled())\n")
    as_rank = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=child_env())
    assert as_rank.returncode == 0 and as_rank.stdout.split() == ["False"], as_rank.stdout + as_rank.stderr
    as_library = subprocess.run([sys.executable, "-c", "import gc, evenkeel.train; print(gc.isenabled())"],
                                capture_output=True, text=True, env=child_env())
    assert as_library.returncode == 0 and as_library.stdout.split() == ["True"], as_library.stderr
    from evenkeel.train import start_up_done

    import gc
    gc.disable()
    try:
        start_up_done()
        assert gc.isenabled() and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.enable()


def test_the_walk_is_the_plans_steps_and_saves_from_any_start(tmp_path):
    pack = make_pack(tmp_path / "pack", [12, 12], seq_len=SEQ)
    plan = Plan(RunFile(run_file(tmp_path, pack)))  # 6 steps per epoch, 2 epochs, a save every 3
    walk = list(plan.walk(0))
    assert [(s.epoch, s.step_in_epoch, s.step) for s in walk] == \
        [(0, i, i) for i in range(1, 7)] + [(1, i, 6 + i) for i in range(1, 7)]
    assert [s.step for s in walk if s.save] == plan.save_steps == [3, 6, 9, 12]
    # Resumed after step 4 (epoch 0, 4 done): steps 5.. exactly as the straight walk has them.
    assert list(plan.walk(0, (0, 4, 4))) == walk[4:]
    # A checkpoint at an epoch's end continues with the next epoch's first step.
    assert list(plan.walk(0, (0, 6, 6))) == walk[6:]
    assert list(plan.walk(0, (1, 6, 12))) == []


def test_the_walk_is_each_ranks_own_without_evenfix(tmp_path):
    pack = make_pack(tmp_path / "pack", [12, 8], seq_len=SEQ)
    path = run_file(tmp_path, pack, epochs=1)
    text = path.read_text() + '\n[evenfix]\nmode = "off"\n'
    path.write_text(text)
    plan = Plan(RunFile(path))
    assert [s.step for s in plan.walk(0)] == list(range(1, 7))
    assert [s.step for s in plan.walk(1)] == list(range(1, 5))
    assert [s.step for s in plan.walk(1) if s.save] == [3, 4]


# --- BlockDataset.step_blocks: each step's window -------------------------------------------


def test_each_steps_blocks_are_the_epoch_orders_consecutive_windows(tmp_path):
    pack = make_pack(tmp_path / "pack", [13, 7], seq_len=SEQ)
    ds = BlockDataset(pack, 0, seed=5)
    ds.pin(11)
    for epoch in (0, 1):
        order = ds.blocks_for(epoch)
        windows = [ds.step_blocks(epoch, s, 2, 3) for s in (1, 2)]
        assert [list(w) for w in windows] == [list(order[0:6]), list(order[6:11])], "the last one runs out"
        with pytest.raises(evenkeel.Error, match=f"step 2 of epoch {epoch} at 6 blocks/step is past the epoch's 11"):
            ds.step_blocks(epoch, 3, 2, 3)  # the plan never asks: 11 blocks hold one step of 6
    assert ds.step_blocks(1, 1, 2, 3).dtype == np.int64
    assert list(ds.step_blocks(0, 1, 2, 3)) != list(ds.step_blocks(1, 1, 2, 3)), "another epoch, another order"


# --- Metrics --------------------------------------------------------------------------------


def test_metrics_log_every_nth_and_the_final_step_with_the_rate_since_the_last(tmp_path, monkeypatch):
    monkeypatch.setenv("EVENKEEL_ATTEMPT", "3")
    m = Metrics(str(tmp_path / "ckpt"), tokens_per_step=100, log_every=3, total_steps=7, start_step=1)
    lines = {s: m.record(s, 0, 1.0 / s, 1e-5 * s, 100 * s) for s in range(2, 8)}
    m.close()
    assert [s for s, line in lines.items() if line] == [3, 6, 7]
    assert lines[3].startswith("step 3 epoch 0 loss 0.3333 lr 3e-05 tok/s "), lines[3]
    rows = [json.loads(x) for x in (tmp_path / "ckpt" / "train-metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["tokens"], r["attempt"], r["loss"]) for r in rows] == \
        [(3, 300, 3, 0.333333), (6, 600, 3, 0.166667), (7, 700, 3, 0.142857)]
    assert set(rows[0]) == {"time", "step", "epoch", "loss", "lr", "tok_s", "tokens", "attempt"}
    assert all(r["tok_s"] > 0 for r in rows)
    # A second attempt appends.
    again = Metrics(str(tmp_path / "ckpt"), tokens_per_step=100, log_every=1, total_steps=7, start_step=7)
    again.record(7, 0, 0.5, 1e-5, 700)
    again.close()
    assert len((tmp_path / "ckpt" / "train-metrics.jsonl").read_text().splitlines()) == 4


# --- The flight-recorder dump ---------------------------------------------------------------

DUMP = """
import datetime, os, sys, torch, torch.distributed as dist
from evenkeel import flight_recorder
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=30))
dist.all_reduce(torch.ones(4))
dist.barrier()
print("->", flight_recorder.dump(0, "gloo", lambda line: print(line)))
"""


def test_a_gloo_rank_dumps_its_flight_recorder_where_torch_would(tmp_path):
    env = child_env(TORCH_FR_BUFFER_SIZE="100", TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / "fr" / "rank_"))
    p = subprocess.run([sys.executable, "-c", DUMP, str(tmp_path / "store")], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    path = tmp_path / "fr" / "rank_0"
    assert f"-> {path}" in p.stdout, p.stdout
    entries = pickle.loads(path.read_bytes())["entries"]
    names = [e["profiling_name"] for e in entries]
    assert names[-2:] == ["gloo:all_reduce", "gloo:barrier"], names
    assert f"flight recorder: last collective gloo:barrier seq {entries[-1]['collective_seq_id']}" in p.stdout
    assert not list((tmp_path / "fr").glob("*.tmp.*"))


def test_no_dump_when_the_recorder_is_off_on_nccl_or_without_the_private_function(monkeypatch):
    said = []
    monkeypatch.setenv("TORCH_FR_BUFFER_SIZE", "0")
    assert flight_recorder.dump(0, "gloo", said.append) is None
    monkeypatch.setenv("TORCH_FR_BUFFER_SIZE", "100")
    assert flight_recorder.dump(0, "nccl", said.append) is None  # the public path: NCCL's watchdog dumps
    assert said == []
    monkeypatch.delattr(torch._C._distributed_c10d, "_dump_fr_trace", raising=True)
    assert flight_recorder.dump(0, "gloo", said.append) is None
    assert said == ["flight recorder: no dump: this torch has no _dump_fr_trace and gloo no dump of its own"]


# --- Progress and the heartbeat's phase -----------------------------------------------------


def test_progress_names_the_phase_and_carries_it_to_the_heartbeat(tmp_path, capsys):
    hb = Heartbeat(str(tmp_path / "hb"), rank=3, total_steps=10, min_interval_s=0)
    p = Progress(3, hb)
    p.enter("save_barrier", "after step 4", 4)
    assert p.phase == "save_barrier (after step 4)"
    beat = json.loads((tmp_path / "hb" / "rank-3.json").read_text())  # min_interval_s 0: written at once
    assert (beat["phase"], beat["phase_step"]) == ("save_barrier", 4), beat
    hb.close()
    p.log("saved x")
    assert capsys.readouterr().out == "[rank 3] saved x\n"


# --- The input checks -----------------------------------------------------------------------


def test_inputs_that_cannot_train_are_refused_naming_the_key(qwen3_model, tmp_path):
    pack = make_pack(tmp_path / "pack", [8, 8], seq_len=SEQ, vocab=512,
                     tokenizer=TOKENIZER_DIRS["qwen3"] / "tokenizer.json")
    rf = run_file(tmp_path, pack, model=qwen3_model)
    check_inputs(RunFile(rf), 2)  # all good
    with pytest.raises(Refused, match=r"cluster is 1 x 2 = world 2, but 4 ranks were started"):
        check_inputs(RunFile(rf), 4)
    with pytest.raises(Refused, match=rf"data.pack_dir {tmp_path}/nowhere: no such directory"):
        check_inputs(RunFile(rf, ["data.pack_dir=nowhere"]), 2)
    with pytest.raises(Refused, match=rf"model.path {tmp_path}/nomodel: no such directory"):
        check_inputs(RunFile(rf, ["model.path=nomodel"]), 2)
    llama = make_pack(tmp_path / "llama-pack", [8, 8], seq_len=SEQ, vocab=512,
                      tokenizer=TOKENIZER_DIRS["llama"] / "tokenizer.json")
    with pytest.raises(Refused, match="^tokenizer mismatch: .*differs from the pack's tokenizer"):
        check_inputs(RunFile(rf, [f"data.pack_dir={llama}"]), 2)
    # The pack's own shape, before any collective: its world and sequence length.
    with pytest.raises(Refused, match=r"the pack has seq_len 16, .* train.seq_len = 32$"):
        open_pack(RunFile(rf, ["train.seq_len=32"]), 0, 2)
    wide = make_pack(tmp_path / "wide", [8, 8, 8], seq_len=SEQ, vocab=512,
                     tokenizer=TOKENIZER_DIRS["qwen3"] / "tokenizer.json")
    with pytest.raises(Refused, match=r"the pack is for world 3, this run has 2 ranks"):
        open_pack(RunFile(rf, [f"data.pack_dir={wide}"]), 0, 2)


def test_isolated_attention_refuses_a_pack_without_boundaries_and_a_linear_attention_model(qwen3_model, tmp_path):
    import shutil

    from transformers import Qwen3NextConfig

    from evenkeel.train import attention_for
    pack = make_pack(tmp_path / "pack", [8, 8], seq_len=SEQ, vocab=512,
                     tokenizer=TOKENIZER_DIRS["qwen3"] / "tokenizer.json")
    rf = run_file(tmp_path, pack, model=qwen3_model)
    assert RunFile(rf).data.attention == "isolated"  # the default
    assert attention_for(RunFile(rf), torch.device("cpu")) == "evenkeel_document"
    assert attention_for(RunFile(rf, ["data.attention=\"cross\""]), torch.device("cpu")) is None
    # An older pack: no docs files, no docs fields in the manifest.
    old = tmp_path / "old-pack"
    shutil.copytree(pack, old)
    manifest = json.loads((old / "manifest.json").read_text())
    for r in manifest["ranks"]:
        (old / r.pop("docs_file")).unlink()
        r.pop("docs_xxh3"), r.pop("documents")
    (old / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(Refused, match=r"the pack has no document boundaries .* repack it .*data.attention = \"cross\""):
        open_pack(RunFile(rf, [f"data.pack_dir={old}"]), 0, 2)
    # A model whose layers include linear attention, refused before any weight is read.
    nxt = tmp_path / "next"
    shutil.copytree(qwen3_model, nxt)
    Qwen3NextConfig(vocab_size=151936, num_hidden_layers=4).to_json_file(str(nxt / "config.json"))
    with pytest.raises(Refused, match=r"data.attention = 'isolated': qwen3_next: layer 0 is 'linear_attention'"):
        attention_for(RunFile(rf, [f"model.path={nxt}"]), torch.device("cpu"))


# --- Loading a model under FSDP2 ------------------------------------------------------------

LOAD = """
import datetime, sys, torch, torch.distributed as dist
from transformers import AutoModelForCausalLM
from evenkeel.hf import load_sharded
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=30))
ids = torch.arange(24)[None] % 97
for d in sys.argv[2:]:
    ref = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    model = load_sharded(d, torch.device("cpu"), precision="fp32").eval()
    buffers = dict(ref.named_buffers())
    wrong = [n for n, b in model.named_buffers() if not torch.equal(b, buffers[n])]
    with torch.no_grad():
        diff = (model(input_ids=ids).logits - ref(input_ids=ids).logits).abs().max().item()
    print(d, "buffers differ:", wrong, "logits differ by", diff)
"""


def test_a_sharded_model_is_the_one_transformers_loads_buffers_included(tmp_path):
    """load_sharded builds on the meta device and fills the weights from safetensors; the
    buffers no file holds are recomputed: rotary frequencies, and Gemma 3's embedding scale
    (sqrt(hidden), a buffer of a module that has a weight too). Its logits are
    from_pretrained's."""
    from transformers import AutoModelForCausalLM, Gemma3TextConfig, LlamaConfig, Qwen3Config

    common = dict(vocab_size=101, hidden_size=32, intermediate_size=64, num_attention_heads=4,
                  num_key_value_heads=2, num_hidden_layers=2, max_position_embeddings=64)
    configs = {"qwen3": Qwen3Config(**common, head_dim=16), "llama": LlamaConfig(**common),
               "gemma3": Gemma3TextConfig(**common, head_dim=16, sliding_window=8,
                                          layer_types=["sliding_attention", "full_attention"])}
    dirs = []
    for name, config in configs.items():
        torch.manual_seed(0)
        AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(tmp_path / name)
        dirs.append(str(tmp_path / name))
    p = subprocess.run([sys.executable, "-c", LOAD, str(tmp_path / "store"), *dirs], env=child_env(),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [line for line in p.stdout.splitlines() if "buffers differ" in line]
    assert len(lines) == 3, p.stdout + p.stderr
    for line in lines:
        assert "buffers differ: [] " in line and float(line.split()[-1]) < 1e-6, line


# --- Resume ---------------------------------------------------------------------------------


def test_the_resume_start_and_the_layout_it_was_saved_with():
    assert start_of(None) == ((0, 0, 0), 0)
    meta = {"epoch": 1, "step_in_epoch": 2, "step": 8, "tokens_seen": 4096, "path": "/c/step-00000008",
            "extra": {"pinned_blocks": 12, "micro_batch": 1, "grad_accum": 2, "seed": 1, "shuffle": True}}
    assert start_of(meta) == ((1, 2, 8), 4096)
    layout = {"pinned_blocks": 12, "micro_batch": 1, "grad_accum": 2, "seed": 1, "shuffle": True}
    assert layout_changes(meta, layout) == {}
    assert layout_changes(meta, {**layout, "grad_accum": 4, "seed": 2}) == {"grad_accum": (2, 4), "seed": (1, 2)}


def test_a_handed_checkpoint_that_is_not_there_is_a_reason_not_a_pick(tmp_path):
    assert handed_resume("none") == (None, None, "")
    meta, reason, _ = handed_resume(str(tmp_path / "step-00000004"))
    assert meta is None and reason.startswith(f"EVENKEEL_RESUME_FROM={tmp_path}/step-00000004: "), reason
