"""Goodput (docs/launch.md "Goodput"): a launch whose rank is killed after a save splits
its wall time into training, redone work, restart overhead, time blocked by saves and
other, in summary.json (per attempt and for the launch), its --json record, its final
line and goodput.json."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from packs import EVENKEEL, child_env
from test_launch import pack_for, run_file, session, summary_of

PARTS = ("training_s", "redone_s", "save_blocked_s", "other_s")
RESTART = ("detection", "stopping", "rendezvous", "startup")


def _total(g: dict) -> float:
    return sum(g[k] for k in PARTS) + sum(g["restart_s"][k] for k in RESTART)


def test_a_killed_rank_costs_redone_work_and_restart_time(qwen3_model, tmp_path):
    rf = run_file(tmp_path, qwen3_model, pack_for(tmp_path, [40, 40]), gpus=2)  # 20 steps
    proc = subprocess.Popen([EVENKEEL, "launch", str(rf), "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=child_env(), cwd=tmp_path,
                            start_new_session=True)
    hb = session(tmp_path) / "heartbeat" / "node-0" / "rank-1.json"
    killed = None
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and killed is None:
            time.sleep(0.1)
            try:
                beat = json.loads(hb.read_text())
            except (OSError, ValueError):
                continue
            # After a save and a step past it: work the next attempt does again.
            if beat["step"] >= 5 and beat["step"] % 2 == 1 and list((tmp_path / "ckpt").glob("step-*")):
                os.kill(beat["pid"], signal.SIGKILL)
                killed = beat["step"]
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert killed is not None, "rank 1 never reached step 5"
    assert proc.returncode == 0, out
    s = summary_of(out)
    g = s["goodput"]
    print(f"SIGKILL at step {killed}: {json.dumps(g)}")
    assert abs(_total(g) - g["wall_s"]) < 0.02, g  # the parts sum to the wall time (3 decimals each)
    assert g["redone_s"] > 0, g
    assert sum(g["restart_s"].values()) > 0 and g["restart_s"]["rendezvous"] > 0, g
    assert 0 < g["ratio"] < 1 and abs(g["ratio"] - g["training_s"] / g["wall_s"]) < 1e-3, g
    first, second = s["attempt_records"]
    assert first["outcome"] == "failed" and second["outcome"] == "completed", s
    for a in (first, second):
        assert abs(_total(a["goodput"]) - a["goodput"]["wall_s"]) < 0.02, a["goodput"]
    assert first["goodput"]["redone_s"] > 0 and first["goodput"]["restart_s"]["detection"] >= 0, first["goodput"]
    assert second["goodput"]["redone_s"] == 0 and second["goodput"]["restart_s"]["rendezvous"] > 0, second["goodput"]
    assert first["goodput"]["wall_s"] + second["goodput"]["wall_s"] <= g["wall_s"] + 0.01
    # The terminal line, and the running file the agent exports, as of the last attempt.
    assert "launch: goodput " in out and "% (training " in out, out
    f = json.loads((session(tmp_path) / "goodput.json").read_text())
    assert (f["v"], f["attempt"], f["running"]) == (1, 2, False), f
    assert abs(_total(f["goodput"]) - f["goodput"]["wall_s"]) < 0.02, f
    on_disk = json.loads((session(tmp_path) / "attempt-001" / "attempt.json").read_text())
    assert on_disk["goodput"] == first["goodput"]
