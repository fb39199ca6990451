"""One launcher per run (docs/launch.md "One launcher per run"): a second `evenkeel
launch` of a running run refuses within seconds naming the first's host and PID
(exit 75), and the first's steps are the only ones; a launcher killed with SIGKILL
leaves a stale lock that the next launcher takes over, naming the dead PID."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from pathlib import Path

from packs import EVENKEEL, child_env
from test_launch import launch, pack_for, run_file, session, summary_of, _wait_for_step

RUN_BUSY = 75


def _start(rf: Path) -> subprocess.Popen:
    return subprocess.Popen([EVENKEEL, "launch", str(rf), "--json"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=child_env(), cwd=rf.parent, start_new_session=True)


def _wait_for_holder(lock: Path, pid: int, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            holder = json.loads(lock.read_text())
            if holder["pid"] == pid:
                return holder
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"{lock} never named pid {pid}")


def test_a_second_launch_of_a_running_run_refuses_within_seconds_naming_the_first(launch_model, tmp_path):
    rf = run_file(tmp_path, launch_model, pack_for(tmp_path, [8, 8]), gpus=2, train__log_every=1)  # 4 steps
    first = _start(rf)
    try:
        _wait_for_holder(session(tmp_path) / "launch.lock", first.pid)
        t0 = time.monotonic()
        second = launch(rf, timeout=60)
        took = time.monotonic() - t0
        out, _ = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
    assert second.returncode == RUN_BUSY, second.stdout + second.stderr
    assert took < 10, f"the second launcher took {took:.1f}s to refuse"
    assert (f"launch.lock is held by pid {first.pid} on host {socket.gethostname()}"
            in second.stderr), second.stderr
    assert second.stderr.startswith("evenkeel: error: launch: "), second.stderr
    assert "launch: run launch-test" not in second.stdout, "the second launcher must start nothing"
    assert first.returncode == 0, out
    s = summary_of(out)
    assert s["outcome"] == "completed" and len(s["attempt_records"]) == 1, s
    steps = [json.loads(line)["step"] for line in (tmp_path / "ckpt" / "train-metrics.jsonl").read_text().splitlines()]
    assert sorted(steps) == sorted(set(steps)) and max(steps) == s["planned_steps"] == 4, steps
    assert (session(tmp_path) / "launch.lock").read_text() == "", "a clean exit empties the lock's record"
    print(f"second launcher refused in {took:.1f}s")


def test_a_launcher_killed_with_sigkill_leaves_a_stale_lock_the_next_one_takes_over(launch_model, tmp_path):
    rf = run_file(tmp_path, launch_model, pack_for(tmp_path, [12, 12]), gpus=2)  # 6 steps
    dead = _start(rf)
    try:
        _wait_for_step(session(tmp_path) / "heartbeat" / "node-0" / "rank-0.json", 1)
        dead.send_signal(signal.SIGKILL)
        dead.wait(timeout=30)
    finally:
        if dead.poll() is None:
            dead.kill()
    holder = json.loads((session(tmp_path) / "launch.lock").read_text())
    assert holder["pid"] == dead.pid, holder
    p = launch(rf)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert (f"taking over the stale lock {session(tmp_path)}/launch.lock: its holder, pid {dead.pid} on host "
            f"{socket.gethostname()}") in p.stdout, out
    s = summary_of(p.stdout)
    assert s["outcome"] == "completed" and s["steps"] == s["planned_steps"] == 6, s
