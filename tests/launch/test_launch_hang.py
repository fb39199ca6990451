"""Hangs named, every attempt counted (docs/launch.md "Judgement" and "Records"), on a
2-rank CPU run of the tiny Qwen3:

- a SIGSTOPped rank is named in the verdict, the decision and summary.json (its step,
  its last heartbeat, its process state, its dump), and the attempt is restarted;
- every rank's record survives, a wrapper SIGKILLed (as torchrun does after its 30 s
  grace) included: kept from the start, completed by the launcher and marked inferred;
- a launcher SIGKILLed mid-run and started again counts the dead launcher's attempt
  (its GPU time from its last records, marked inferred) in the totals and the list."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from packs import EVENKEEL, child_env
from test_launch import launch, pack_for, run_file, session, summary_of

BUDGET_SPENT = 75


def _beat(hb: Path) -> dict | None:
    try:
        return json.loads(hb.read_text())
    except (OSError, ValueError):
        return None


def _wait_until(what: str, ready, timeout: float = 300, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = ready()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the launcher exited ({proc.returncode}) before {what}:\n{proc.stdout.read()}")
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _start(rf: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([EVENKEEL, "launch", str(rf), "--json", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=child_env(), cwd=rf.parent, start_new_session=True)


def _rank_records(attempt_dir: Path, world: int) -> dict[int, dict]:
    records = {}
    for r in range(world):
        path = attempt_dir / f"rank-{r}.json"
        assert path.exists(), f"{path} is missing"
        records[r] = json.loads(path.read_text())
    return records


def test_a_sigstopped_rank_is_named_and_the_attempt_restarted(launch_model, tmp_path):
    """Rank 1's trainer SIGSTOPped after a checkpoint: rank 0's collective times out
    (30 s), torchrun stops rank 1, whose wrapper finds it in state T, records that, lets
    it take the SIGTERM and writes its end. The verdict names rank 1 at the step its
    heartbeat last showed; a hang is no desync: attempt 2 resumes and completes."""
    rf = run_file(tmp_path, launch_model, pack_for(tmp_path, [24, 24]), gpus=2,
                  distributed__watchdog_timeout_min=0.5, retry__max_restarts=1)
    hb = session(tmp_path) / "heartbeat" / "node-0" / "rank-1.json"
    proc = _start(rf)
    try:
        beat = _wait_until("rank 1 at step 4 with a checkpoint", lambda: (
            (b := _beat(hb)) and b["step"] >= 4 and list((tmp_path / "ckpt").glob("step-*")) and b), proc=proc)
        os.kill(beat["pid"], signal.SIGSTOP)
        stopped_at = time.time()
        time.sleep(1)
        step = _beat(hb)["step"]  # a stopped rank writes no more beats
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, out
    s = summary_of(out)
    first, second = s["attempt_records"]
    hang = first["hang"]
    assert hang and hang["ranks"] == [1] and hang["step"] == step, (hang, step)
    want = f"rank 1 stopped progressing at step {step} (last heartbeat "
    assert hang["summary"].startswith(want), hang
    assert "process stopped (state T: a stop signal such as SIGSTOP)" in hang["summary"], hang
    reason = first["decision"]["reason"]
    assert first["decision"]["action"] == "restart" and reason.startswith(hang["summary"] + "; "), reason
    assert f"launch: attempt 1: hang: {hang['summary']}" in out, out
    assert s["hangs"] == [{"attempt": 1, "ranks": [1], "step": step, "summary": hang["summary"]}], s["hangs"]
    assert second["outcome"] == "completed" and s["outcome"] == "completed", s
    # The seconds named are the heartbeat's: rank 1's last beat came no later than the SIGSTOP.
    seconds = float(hang["summary"][len(want):].split(" s ", 1)[0])
    ended = max(r["end"] for r in first["nodes"][0]["ranks"] if r["rank"] == 0)
    assert seconds >= ended - stopped_at - 2, (seconds, ended - stopped_at)
    # Every rank's record, rank 1's saying what happened to it.
    records = _rank_records(session(tmp_path) / "attempt-001", 2)
    r1 = records[1]
    assert r1["status"] == "exited" and not r1["inferred"], r1
    assert r1["state_at_stop"] == "T" and r1["stop_signal"] == signal.SIGTERM and r1["signal"] == signal.SIGTERM, r1
    assert records[0]["status"] == "exited" and records[0]["exit_code"] not in (0, -1), records[0]
    print(f"hang named: {hang['summary']}")


def test_a_wrapper_sigkilled_leaves_its_rank_record_completed_by_the_launcher(launch_model, tmp_path):
    """torchrun SIGKILLs a wrapper's process group 30 s after its SIGTERM; here rank 1's
    wrapper is SIGKILLed outright mid-run (its trainer dies with it). Its record, written
    at start, survives; the launcher completes it (killed by SIGKILL, marked inferred) in
    the file and in the node record, and rank 0's record says how it ended."""
    rf = run_file(tmp_path, launch_model, pack_for(tmp_path, [200, 200]), gpus=2, train__save_every=0,
                  retry__max_restarts=0)
    hb = session(tmp_path) / "heartbeat" / "node-0" / "rank-1.json"
    proc = _start(rf)
    try:
        beat = _wait_until("rank 1 at step 2", lambda: (b := _beat(hb)) and b["step"] >= 2 and b, proc=proc)
        wrapper = _parent(beat["pid"])
        assert "launch-rank" in Path(f"/proc/{wrapper}/cmdline").read_text(), wrapper
        early = json.loads((session(tmp_path) / "attempt-001" / "rank-1.json").read_text())
        assert early["status"] == "running" and early["pid"] == beat["pid"], early  # kept from the start
        os.kill(wrapper, signal.SIGKILL)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == BUDGET_SPENT, out
    records = _rank_records(session(tmp_path) / "attempt-001", 2)
    r1 = records[1]
    assert r1["inferred"] and r1["signal"] == signal.SIGKILL and r1["status"] == "running", r1
    assert "its wrapper was killed" in r1["note"] and r1["end"] > r1["start"], r1
    assert records[0]["status"] == "exited" and not records[0]["inferred"], records[0]
    assert records[0]["exit_code"] != 0 or records[0]["signal"] != 0, records[0]
    (a,) = summary_of(out)["attempt_records"]
    ranks = {r["rank"]: r for r in a["nodes"][0]["ranks"]}
    assert sorted(ranks) == [0, 1] and ranks[1]["inferred"] and ranks[1]["signal"] == signal.SIGKILL, ranks
    causes = {c["rank"]: c["cause"] for c in a["causes"]}
    assert 1 in causes, a["causes"]
    assert not _alive(beat["pid"])


def test_a_launcher_killed_and_started_again_counts_the_dead_launchers_attempt(launch_model, tmp_path):
    """The launcher SIGKILLed mid-run (its ranks go with it, leaving attempt-001 without
    attempt.json); `evenkeel launch` again resumes as attempt 2 and completes. Its summary
    lists attempt 1 as an earlier launch's, inferred, with the GPU time its records span,
    and the totals are the sum of both attempts."""
    rf = run_file(tmp_path, launch_model, pack_for(tmp_path, [40, 40]), gpus=2)
    hb = session(tmp_path) / "heartbeat" / "node-0" / "rank-0.json"
    proc = _start(rf)
    try:
        beat = _wait_until("rank 0 at step 6 with a checkpoint", lambda: (
            (b := _beat(hb)) and b["step"] >= 6 and list((tmp_path / "ckpt").glob("step-*")) and b), proc=proc)
        pids = [beat["pid"], _beat(hb.with_name("rank-1.json"))["pid"]]
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    _wait_until("the ranks to die with the launcher", lambda: not any(_alive(p) for p in pids), timeout=60)
    first = session(tmp_path) / "attempt-001"
    assert not (first / "attempt.json").exists()
    # The wrappers outlive torchrun long enough to write their trainers' ends.
    _wait_until("attempt 1's rank records", lambda: all(
        (r := _beat(first / f"rank-{n}.json")) and r["status"] == "exited" for n in range(2)), timeout=30)
    records = _rank_records(first, 2)
    # What the records say attempt 1 spanned: the rank records' times and the files the
    # attempt wrote (the command line before torchrun started, the logs to the last line).
    times = [t for r in records.values() for t in (r["start"], r["end"], r["stop_time"]) if t > 0]
    times += [f.stat().st_mtime for f in first.iterdir() if f.suffix == ".log" or f.name.startswith("command-node-")]
    times += [f.stat().st_mtime for f in (first / "fr").iterdir()]
    span = max(times) - min(times)

    p = launch(rf)
    assert p.returncode == 0, p.stdout + p.stderr
    s = summary_of(p.stdout)
    earlier, this = s["attempt_records"]
    assert earlier["attempt"] == 1 and earlier["earlier_launch"] and earlier["inferred"], earlier
    assert earlier["outcome"] == "interrupted" and "no attempt.json" in earlier["note"], earlier
    assert this["attempt"] == 2 and not this["earlier_launch"] and this["outcome"] == "completed", this
    assert s["attempts"] == 2 and s["attempts_this_launch"] == 1 and s["attempts_inferred"] == 1, s
    # Attempt 1's GPU time is what its records span, world 2.
    assert abs(earlier["seconds"] - span) < 0.2 and span > 5, (earlier["seconds"], span)
    assert abs(earlier["gpu_hours"] - 2 * earlier["seconds"] / 3600) < 1e-3, earlier
    total = sum(a["gpu_hours"] for a in s["attempt_records"])
    assert abs(s["gpu_hours_used"] - total) < 1e-3 and s["gpu_hours_used"] > this["gpu_hours"], s
    lost = sum(a["gpu_hours_lost"] for a in s["attempt_records"])
    assert abs(s["gpu_hours_lost"] - lost) < 1e-3 and earlier["gpu_hours_lost"] > 0, s
    assert "of an earlier launch has no attempt.json (its launcher died)" in p.stdout + p.stderr
    on_disk = json.loads((session(tmp_path) / "summary.json").read_text())
    assert on_disk["gpu_hours_used"] == s["gpu_hours_used"] and on_disk["attempts"] == 2, on_disk
