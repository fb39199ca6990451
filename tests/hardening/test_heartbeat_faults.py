"""evenkeel.heartbeat.Heartbeat when its writes fail: os.open, os.write,
os.close and os.replace raise OSError (ENOSPC, EIO) or os.write comes up
short. The heartbeat must never raise into the trainer, must keep the last
good beat whole under the final name, must say so once on stderr, and must
write again once the disk is healthy.
"""
import errno
import importlib.util
import json
import os
import time
import types

import pytest

HB_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "python", "evenkeel", "heartbeat.py")


@pytest.fixture
def hbmod():
    spec = importlib.util.spec_from_file_location("evenkeel_heartbeat_faults", HB_PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class FaultyOs(types.SimpleNamespace):
    """The os module as the heartbeat sees it, with one call made to fail.

    `fault` is (function name, errno) or None; `short` makes os.write write
    only half of what it is asked (really, to the file) and return that.
    """

    def __init__(self):
        super().__init__(**{k: getattr(os, k) for k in dir(os) if not k.startswith("__")})
        self.fault = None
        self.short = False
        self.calls = {}
        for name in ("open", "write", "close", "replace", "makedirs"):
            setattr(self, name, self._wrap(name, getattr(os, name)))

    def _wrap(self, name, real):
        def call(*args, **kwargs):
            self.calls[name] = self.calls.get(name, 0) + 1
            if self.fault and self.fault[0] == name:
                raise OSError(self.fault[1], os.strerror(self.fault[1]))
            if name == "write" and self.short:
                fd, data = args
                data = bytes(data)
                if len(data) > 1:
                    return real(fd, data[: len(data) // 2])
            return real(*args, **kwargs)
        return call


@pytest.fixture
def fos(hbmod, monkeypatch):
    f = FaultyOs()
    monkeypatch.setattr(hbmod, "os", f)
    return f


def read(path):
    with open(path) as f:
        return json.load(f)


def listing(d):
    return sorted(p.name for p in d.iterdir())


FAULTS = [("open", errno.ENOSPC), ("write", errno.ENOSPC), ("write", errno.EIO),
          ("close", errno.EIO), ("replace", errno.EIO)]


@pytest.mark.parametrize("call,err", FAULTS, ids=[f"{c}-{errno.errorcode[e]}" for c, e in FAULTS])
def test_failed_write_keeps_last_beat_logs_once_and_recovers(tmp_path, hbmod, fos, capsys, call, err):
    hb = hbmod.Heartbeat(dir=str(tmp_path), rank=3, min_interval_s=0)
    hb.beat(1, 100)
    assert read(tmp_path / "rank-3.json")["step"] == 1
    capsys.readouterr()

    fos.fault = (call, err)
    for step in range(2, 6):
        hb.beat(step, step * 100)  # must not raise
    hb.set_phase("save", 5)
    rec = read(tmp_path / "rank-3.json")  # whole JSON, the last good beat
    assert rec["step"] == 1 and rec["phase"] == "train"
    assert listing(tmp_path) == ["rank-3.json"]  # no temp file left
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines  # once, not once per beat
    path = str(tmp_path / "rank-3.json")
    assert lines[0].startswith("evenkeel: warning: heartbeat of rank 3: "), lines[0]
    assert path in lines[0] and os.strerror(err) in lines[0], lines[0]
    op = {"open": "open", "write": "write", "close": "close", "replace": "rename to"}[call]
    assert f": {op}" in lines[0] or f" {op} " in lines[0], lines[0]

    fos.fault = None
    hb.beat(6, 600)
    rec = read(tmp_path / "rank-3.json")
    assert rec["step"] == 6 and rec["phase"] == "save"
    assert listing(tmp_path) == ["rank-3.json"]
    # A later outage is reported again, once.
    fos.fault = (call, err)
    hb.beat(7, 700)
    hb.beat(8, 800)
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    fos.fault = None
    hb.close()
    assert read(tmp_path / "rank-3.json")["step"] == 8


def test_short_write_then_enospc_never_leaves_half_a_beat(tmp_path, hbmod, fos, capsys):
    hb = hbmod.Heartbeat(dir=str(tmp_path), rank=0, min_interval_s=0)
    hb.beat(1, 10)
    good = (tmp_path / "rank-0.json").read_bytes()

    # The first write lands half the bytes; the next, for the rest, finds the disk full.
    real_write = os.write
    calls = []

    def short_then_full(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    fos.write = short_then_full
    hb.beat(2, 20)
    assert len(calls) == 2  # the rest was attempted, not dropped
    assert (tmp_path / "rank-0.json").read_bytes() == good
    assert listing(tmp_path) == ["rank-0.json"]
    err = capsys.readouterr().err
    assert "write" in err and "No space left on device" in err, err
    fos.write = real_write
    hb.beat(3, 30)
    assert read(tmp_path / "rank-0.json")["step"] == 3


def test_short_writes_that_succeed_write_the_whole_beat(tmp_path, hbmod, fos, capsys):
    fos.short = True  # every os.write writes half of what it is given
    hb = hbmod.Heartbeat(dir=str(tmp_path), rank=1, min_interval_s=0)
    hb.beat(4, 40)
    rec = read(tmp_path / "rank-1.json")  # parses: all the bytes went out
    assert rec["step"] == 4 and rec["tokens"] == 40
    assert fos.calls["write"] > 2
    assert capsys.readouterr().err == ""


def test_a_disk_full_from_the_start_does_not_stop_the_trainer(tmp_path, hbmod, fos, capsys):
    fos.fault = ("makedirs", errno.ENOSPC)
    hb = hbmod.Heartbeat(dir=str(tmp_path / "hb"), rank=2, min_interval_s=0)  # must not raise
    hb.beat(1, 1)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and str(tmp_path / "hb") in lines[0] and "No space left" in lines[0], lines
    fos.fault = None
    hb.beat(2, 2)  # the directory is still missing: the open fails, already reported
    assert not (tmp_path / "hb").exists()
    assert capsys.readouterr().err == ""
    os.makedirs(tmp_path / "hb")
    hb.beat(3, 3)
    assert read(tmp_path / "hb" / "rank-2.json")["step"] == 3


def test_background_flush_survives_a_failing_disk(tmp_path, hbmod, fos, capsys):
    hb = hbmod.Heartbeat(dir=str(tmp_path), rank=5, min_interval_s=0.05)
    time.sleep(0.06)
    hb.beat(1, 1)
    fos.fault = ("write", errno.EIO)
    hb.set_phase("forward", 2)  # held back, then written by the flusher: which fails
    time.sleep(0.3)
    assert hb._flusher.is_alive()
    assert read(tmp_path / "rank-5.json")["phase"] != "forward"
    fos.fault = None
    time.sleep(0.1)
    hb.set_phase("backward", 2)
    time.sleep(0.3)
    assert read(tmp_path / "rank-5.json")["phase"] == "backward"
    hb.close()
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
