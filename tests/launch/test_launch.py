"""evenkeel launch end to end on CPU (gloo, the tiny Qwen3 of the trainer tests):
the gate in front of every node, torchrun underneath, restarts with judgement,
the report's deadlock named from the ranks and from the flight recorder.
Each test asserts the launcher's records and its exit code (docs/launch.md)."""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from packs import EVENKEEL, REPO, TOKENIZER_DIRS, child_env, free_port, make_pack, write_run_file

SEQ = 32
TORCHRUN = str(Path(sys.executable).parent / "torchrun")
DO_NOT_REQUEUE = 93
GATE_REFUSED = 1
BUDGET_SPENT = 75
CANCELLED = 130


def run_file(tmp: Path, model: Path, pack: Path, *, nodes: int = 1, gpus: int = 4, **over) -> Path:
    sections = {
        "run": {"name": "launch-test"},
        "cluster": {"nodes": nodes, "gpus_per_node": gpus},
        "data": {"pack_dir": str(pack)},
        "model": {"path": str(model)},
        "train": {"seq_len": SEQ, "micro_batch": 1, "grad_accum": 2, "epochs": 1, "warmup_steps": 2,
                  "save_every": 2, "lr": 3e-3, "seed": 1, "log_every": 5},
        "checkpoint": {"dir": str(tmp / "ckpt"), "keep": 2, "shard_size_gb": 0.01},
        "evenfix": {"mode": "min"},
        "distributed": {"backend": "gloo", "watchdog_timeout_min": 2, "watchdog_floor_min": 0.1},
        "launch": {"torchrun": TORCHRUN, "gate_timeout_s": 60, "stop_grace_s": 10},
        "retry": {"max_restarts": 3, "max_no_progress": 2, "backoff_s": 0},
    }
    for key, value in over.items():
        section, k = key.split("__")
        if value is None:  # the key left out: its default
            sections.get(section, {}).pop(k, None)
        else:
            sections.setdefault(section, {})[k] = value
    return write_run_file(tmp / "run.toml", sections)


def pack_for(tmp: Path, blocks: list[int]) -> Path:
    return make_pack(tmp / "pack", blocks, seq_len=SEQ, vocab=512, tokenizer=TOKENIZER_DIRS["qwen3"] / "tokenizer.json")


def summary_of(stdout: str) -> dict:
    for line in reversed(stdout.splitlines()):
        if line.startswith("{") and '"attempt_records"' in line:
            return json.loads(line)
    raise AssertionError(f"no --json summary in:\n{stdout}")


def launch(rf: Path, *args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([EVENKEEL, "launch", str(rf), "--json", *args], capture_output=True, text=True,
                          timeout=timeout, env=child_env(**(env or {})), cwd=rf.parent, start_new_session=True)


def session(tmp: Path, run_id: str = "launch-test") -> Path:
    return tmp / "ckpt" / "launch" / run_id


def test_a_trainer_that_fails_at_start_up_stops_after_max_no_progress(launch_model, tmp_path):
    """Truncated model weights pass the gate (the file is there) but kill every attempt at
    load: no attempt makes a checkpoint, so after retry.max_no_progress = 2 the launcher
    stops with the do-not-requeue code instead of restarting forever."""
    import shutil
    model = tmp_path / "model"
    shutil.copytree(launch_model, model)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    rf = run_file(tmp_path, model, pack_for(tmp_path, [8, 8, 8, 8]))
    p = launch(rf)
    assert p.returncode == DO_NOT_REQUEUE, p.stdout + p.stderr
    s = summary_of(p.stdout)
    assert [a["outcome"] for a in s["attempt_records"]] == ["failed", "failed"], s
    assert "2 attempt(s) in a row without a new verified checkpoint" in s["attempt_records"][-1]["decision"]["reason"]
    assert s["outcome"] == "stopped: do not requeue"
    logs = "".join(p.read_text() for p in (session(tmp_path) / "attempt-002").glob("rank-*.log"))
    assert "error in load" in logs, logs


def test_the_reports_deadlock_is_named_by_the_watcher_and_the_flight_recorder_and_not_retried(launch_model, tmp_path):
    """An uneven pack with evenfix off (the gate FAILs it; --accept-gate-fail overrides,
    loudly): rank 3 runs out of blocks and enters the end-of-epoch save barrier while
    ranks 0-2 wait in step 5's collective. An evenkeel watch beside the run names the
    short rank within 15 s, before the collective timeout; when the timeout fires, the
    launcher reads the dumps, names the desync and stops without retrying (exit 93)."""
    pack = pack_for(tmp_path, [12, 12, 12, 8])
    agent_port = free_port()
    rf = run_file(tmp_path, launch_model, pack, evenfix__mode="off", train__save_every=0,
                  distributed__watchdog_timeout_min=0.75, watch__poll_s=1, watch__hang_floor_s=300)
    watch_log = tmp_path / "watch.jsonl"
    watcher = subprocess.Popen([EVENKEEL, "watch", str(rf), "--agents", f"127.0.0.1:{agent_port}",
                                "--state-dir", str(tmp_path / "watch-state"), "--log", str(watch_log)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=child_env(),
                               start_new_session=True)
    try:
        p = launch(rf, "--accept-gate-fail", "--agent", "--agent-listen", f"127.0.0.1:{agent_port}")
    finally:
        time.sleep(1)
        watcher.send_signal(signal.SIGTERM)
        watcher.wait(timeout=30)
    out = p.stdout + p.stderr
    assert p.returncode == DO_NOT_REQUEUE, out
    assert "gate FAIL accepted (--accept-gate-fail)" in out and "evenfix is off" in out, out
    s = summary_of(p.stdout)
    assert len(s["attempt_records"]) == 1, "a deterministic deadlock must not be retried"
    a = s["attempt_records"][0]
    fr = a["flight_recorder"]
    assert fr["conclusive"], fr
    assert re.search(r"rank 3 in .*barrier", fr["verdict"]) and "ranks 0-2" in fr["verdict"], fr["verdict"]
    assert "deterministic collective desync" in a["decision"]["reason"]
    assert len(list((session(tmp_path) / "attempt-001" / "fr").glob("rank_*"))) == 4
    # The watcher: DEADLOCK naming rank 3 from the ranks' own phases, within 15 s of rank 3
    # entering the barrier, and before the collective timeout (45 s) fired.
    beat = json.loads((session(tmp_path) / "heartbeat" / "node-0" / "rank-3.json").read_text())
    assert beat["phase"] == "save_barrier" and beat["phase_step"] == 4, beat
    entered = beat["phase_time"]
    opened = [json.loads(line) for line in watch_log.read_text().splitlines()
              if '"incident_opened"' in line and '"deadlock"' in line]
    assert opened, watch_log.read_text()
    inc = opened[0]["incident"]
    at = datetime.datetime.fromisoformat(opened[0]["time"].replace("Z", "+00:00")).timestamp()
    assert inc["ranks"] == [3], inc
    assert "rank 3 in save_barrier after step 4" in inc["summary"] and "ranks 0-2 in forward of step 5" in inc["summary"], inc
    assert at - entered <= 15, f"DEADLOCK alert {at - entered:.1f}s after rank 3 entered the barrier"
    assert at - entered < 45
    print(f"watcher DEADLOCK {at - entered:.1f}s after rank 3 entered the save barrier; fr: {fr['verdict']}")


def test_a_gate_fail_on_one_node_starts_nothing_on_any_node(launch_model, tmp_path):
    pack = pack_for(tmp_path, [8, 8, 8, 8])
    (pack / "rank-00003.i32").unlink()  # node 1's ranks are 2 and 3
    rf = run_file(tmp_path, launch_model, pack, nodes=2, gpus=2)
    env = {"EVENKEEL_RDZV_ENDPOINT": f"127.0.0.1:{free_port()}"}
    procs = [subprocess.Popen([EVENKEEL, "launch", str(rf), "--node-rank", str(n), "--json"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=child_env(**env), cwd=tmp_path,
                              start_new_session=True) for n in (1, 0)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == GATE_REFUSED, out
        assert "refused the run on every node" in out and "rank-00003.i32" in out, out
    assert not list(session(tmp_path).glob("attempt-*")), "nothing may start"
    verdict = json.loads((session(tmp_path) / "gate" / "verdict.json").read_text())
    assert verdict["overall"] == "FAIL" and set(verdict["parts"]) == {"0", "1"}, verdict


def test_two_nodes_on_one_machine_rendezvous_and_complete(launch_model, tmp_path):
    pack = pack_for(tmp_path, [8, 8, 8, 8])
    # Two launchers start side by side; on a loaded 2-core host node 1's part once took
    # longer than the default 60 s to arrive, so the wait is generous (it ends early).
    rf = run_file(tmp_path, launch_model, pack, nodes=2, gpus=2, launch__gate_timeout_s=240)
    env = {"EVENKEEL_RDZV_ENDPOINT": f"127.0.0.1:{free_port()}"}
    procs = [subprocess.Popen([EVENKEEL, "launch", str(rf), "--node-rank", str(n), "--json"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=child_env(**env), cwd=tmp_path,
                              start_new_session=True) for n in (0, 1)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, "\n\n".join(f"--- node {n} (exit {q.returncode}) ---\n{o}"
                                               for n, (q, o) in enumerate(zip(procs, outs)))
    s = summary_of(outs[0])
    assert s["outcome"] == "completed" and s["steps"] == s["planned_steps"] == 4, s
    nodes = s["attempt_records"][0]["nodes"]
    assert [n["node"] for n in nodes] == [0, 1]
    assert sorted(r["rank"] for n in nodes for r in n["ranks"]) == [0, 1, 2, 3]
    for n in nodes:  # node-local ranks: node_rank x 2 + local_rank
        assert sorted(r["rank"] for r in n["ranks"]) == [2 * n["node"], 2 * n["node"] + 1], n


def _wait_for_step(hb: Path, step: int, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            beat = json.loads(hb.read_text())
            if beat["step"] >= step:
                return beat
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"{hb} never reached step {step}")


def _live(pids) -> list[int]:
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    out.append(pid)
        except OSError:
            pass
    return out


def test_sigterm_cancels_and_sigkill_leaves_no_rank_behind(launch_model, tmp_path):
    """SIGTERM to the launcher is forwarded to every rank and the attempt is recorded as
    cancelled (exit 130); a launcher killed with SIGKILL takes torchrun, the wrappers and
    every trainer with it (parent-death signals)."""
    pack = pack_for(tmp_path, [200, 200, 200, 200])
    rf = run_file(tmp_path, launch_model, pack, train__save_every=0)
    hb_dir = session(tmp_path) / "heartbeat" / "node-0"
    for sig, want in ((signal.SIGTERM, CANCELLED), (signal.SIGKILL, -signal.SIGKILL)):
        for old in hb_dir.glob("rank-*.json"):
            old.unlink()  # the first launch's beats
        proc = subprocess.Popen([EVENKEEL, "launch", str(rf), "--json"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=child_env(), cwd=tmp_path)
        try:
            _wait_for_step(hb_dir / "rank-0.json", 2)
            pids = [json.loads((hb_dir / f"rank-{r}.json").read_text())["pid"] for r in range(4)]
            assert len(_live(pids)) == 4
            proc.send_signal(sig)
            out, _ = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == want, out
        deadline = time.monotonic() + 30
        while _live(pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _live(pids), f"ranks left running after {sig.name}: {_live(pids)}"
        if sig == signal.SIGTERM:
            s = summary_of(out)
            assert s["outcome"] == "cancelled" and s["attempt_records"][-1]["outcome"] == "cancelled", s
            assert "SIGTERM received: stopping the ranks" in out


def test_a_copied_binary_finds_torchrun_on_path_and_the_trainer_through_the_runs_python(launch_model, tmp_path):
    """The binary copied to a folder outside the source tree, torchrun only on PATH (the run
    file's default launch.torchrun = "torchrun"), launched from a third folder: the launcher
    looks torchrun up on PATH, takes the python beside it and runs the trainer as
    `python -m evenkeel.train RUN.toml` through that python. One attempt, completed."""
    opt = tmp_path / "opt" / "bin"
    opt.mkdir(parents=True)
    exe = opt / "evenkeel"
    shutil.copy2(EVENKEEL, exe)
    assert REPO not in exe.resolve().parents
    venv_bin = Path(sys.executable).parent
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    rf = run_file(work, launch_model, pack_for(work, [8, 8, 8, 8]), launch__torchrun=None)
    assert "torchrun" not in rf.read_text()
    env = child_env(PATH=f"{opt}:{venv_bin}:/usr/bin:/bin")
    for var in ("PYTHONPATH", "EVENKEEL", "VIRTUAL_ENV"):
        env.pop(var, None)
    p = subprocess.run([str(exe), "launch", str(rf), "--json"], capture_output=True, text=True, timeout=600, env=env,
                       cwd=elsewhere, start_new_session=True)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    s = summary_of(p.stdout)
    assert s["outcome"] == "completed" and len(s["attempt_records"]) == 1, s
    assert s["steps"] == s["planned_steps"] == 4, s
    command = (session(work) / "attempt-001" / "command-node-0.txt").read_text()
    assert command.startswith(f"{venv_bin}/torchrun "), command
    assert f" -- {venv_bin}/python -m evenkeel.train {rf}" in command, command
    assert f"--no-python {exe} launch-rank" in command, command


def test_a_python_without_the_trainer_module_starts_nothing_and_names_it(tmp_path):
    """A run's python that cannot import evenkeel.train: exit 65 before the gate, naming that
    python and what to install."""
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "torchrun").write_text("#!/bin/sh\nexit 0\n")
    (venv / "python").symlink_to("/usr/bin/python3")  # a python without evenkeel
    (venv / "torchrun").chmod(0o755)
    rf = write_run_file(tmp_path / "run.toml", {"run": {"name": "t"}, "cluster": {"nodes": 1, "gpus_per_node": 1},
                                                "checkpoint": {"dir": str(tmp_path / "ckpt")}})
    env = child_env(PATH=f"{venv}:/usr/bin:/bin")
    env.pop("PYTHONPATH", None)
    p = subprocess.run([EVENKEEL, "launch", str(rf)], capture_output=True, text=True, timeout=120, env=env,
                       cwd=tmp_path)
    assert p.returncode == 65, p.stdout + p.stderr
    assert (f"the Python module evenkeel.train, cannot be imported by {venv}/python (the python beside {venv}/torchrun): "
            "ModuleNotFoundError: No module named 'evenkeel'") in p.stderr, p.stderr
    assert "install evenkeel's Python package" in p.stderr
    assert not (tmp_path / "ckpt" / "launch" / "t" / "gate").exists(), "the gate must not have run"
