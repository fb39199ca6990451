"""evenkeel.heartbeat.Heartbeat: the file it writes and how often."""

import importlib.util
import json
import os
import time

import pytest

HB_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "python", "evenkeel", "heartbeat.py")


@pytest.fixture
def Heartbeat():
    spec = importlib.util.spec_from_file_location("evenkeel_heartbeat_t", HB_PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Heartbeat


def read(path):
    with open(path) as f:
        return json.load(f)


def test_beats_record_step_tokens_rates_and_pid(tmp_path, Heartbeat):
    hb = Heartbeat(dir=str(tmp_path), rank=5, local_rank=1, total_steps=100, min_interval_s=0)
    rec = read(tmp_path / "rank-5.json")
    assert rec["step"] == -1 and rec["pid"] == os.getpid() and rec["total_steps"] == 100
    for step in range(1, 6):
        time.sleep(0.02)
        hb.beat(step, step * 1000)
    rec = read(tmp_path / "rank-5.json")
    assert rec["v"] == 1 and rec["rank"] == 5 and rec["local_rank"] == 1
    assert rec["step"] == 5 and rec["tokens"] == 5000 and rec["phase"] == "train"
    assert 0.015 < rec["step_s"] < 0.2
    assert 5000 < rec["tok_s"] < 60000
    assert abs(rec["time"] - time.time()) < 2
    assert [p.name for p in tmp_path.iterdir()] == ["rank-5.json"]  # no temp file left


def test_writes_are_coalesced_and_flushed(tmp_path, Heartbeat):
    hb = Heartbeat(dir=str(tmp_path), rank=0, min_interval_s=60)
    hb.beat(1, 10)  # within min_interval of the initial write: held back
    assert read(tmp_path / "rank-0.json")["step"] == -1
    hb.close()
    assert read(tmp_path / "rank-0.json")["step"] == 1


def test_phase_and_done(tmp_path, Heartbeat):
    hb = Heartbeat(dir=str(tmp_path), rank=2, min_interval_s=0)
    hb.beat(3, 30)
    with hb.phase("checkpoint"):
        assert read(tmp_path / "rank-2.json")["phase"] == "checkpoint"
    assert read(tmp_path / "rank-2.json")["phase"] == "train"
    hb.done()
    rec = read(tmp_path / "rank-2.json")
    assert rec["phase"] == "done" and rec["step"] == 3


def test_rank_from_environment(tmp_path, Heartbeat, monkeypatch):
    monkeypatch.setenv("RANK", "11")
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setenv("EVENKEEL_HEARTBEAT_DIR", str(tmp_path))
    hb = Heartbeat()
    assert hb.rank == 11 and hb.local_rank == 3
    assert read(tmp_path / "rank-11.json")["local_rank"] == 3
