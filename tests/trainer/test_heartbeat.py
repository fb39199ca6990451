"""The heartbeat's goodput fields (docs/heartbeat_format.md): when the rank's process
started, when its first training step began, the seconds saves blocked it and the saves;
and that the C++ reader (the agent's and the launcher's) reads them back."""

from __future__ import annotations

import json
import os
import time

import pytest

from evenkeel import _core  # noqa: F401  (the package imports; the reader is tested in C++)
from evenkeel.heartbeat import Heartbeat, process_start_time


def _beat(tmp_path, rank=0) -> dict:
    return json.loads((tmp_path / "hb" / f"rank-{rank}.json").read_text())


def test_started_is_this_processes_start_time_by_default(tmp_path):
    before = time.time()
    hb = Heartbeat(str(tmp_path / "hb"), rank=0, min_interval_s=0)
    beat = _beat(tmp_path)
    hb.close()
    # /proc/self/stat: the interpreter started before this test did, and not long before
    # (this pytest run's own start), and never after the import.
    started = beat["started"]
    assert started <= before + 0.001, (started, before)
    with open("/proc/self/stat") as f:
        assert f.read()  # Linux: the start time came from /proc, not the import fallback
    assert abs(started - process_start_time()) < 0.01
    assert before - started < 3600, (started, before)
    assert "train_start" not in beat  # not yet
    assert (beat["save_blocked_s"], beat["saves"]) == (0, 0)


def test_started_can_be_given_and_training_started_and_saves_are_written_at_once(tmp_path):
    hb = Heartbeat(str(tmp_path / "hb"), rank=2, min_interval_s=60, started=1234.5)
    assert _beat(tmp_path, 2)["started"] == 1234.5
    t0 = time.time()
    hb.training_started()  # written at once despite min_interval_s
    beat = _beat(tmp_path, 2)
    assert t0 - 0.001 <= beat["train_start"] <= time.time() + 0.001, beat  # 3 decimals
    hb.beat(0, 10)
    hb.add_save_blocked(1.25)
    hb.add_save_blocked(0.5)
    beat = _beat(tmp_path, 2)
    assert (beat["save_blocked_s"], beat["saves"]) == (1.75, 2), beat
    assert beat["time"] >= beat["train_start"]
    with pytest.raises(ValueError, match="must be >= 0"):
        hb.add_save_blocked(-1)
    with pytest.raises(ValueError, match="must be >= 0"):
        hb.add_save_blocked(float("nan"))
    assert _beat(tmp_path, 2)["saves"] == 2  # a refused amount is not counted
    hb.close()


def test_a_process_start_time_without_proc_is_the_import_time(monkeypatch):
    import evenkeel.heartbeat as h

    real_open = open

    def no_proc(path, *a, **k):
        if str(path).startswith("/proc/"):
            raise FileNotFoundError(path)
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", no_proc)
    assert h.process_start_time() == h._IMPORTED_AT
    assert os.getpid() > 0
