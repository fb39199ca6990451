"""One resume decision (docs/launch.md "Resume"): node 0's launcher picks the checkpoint
with the trainer's verification (checksums), writes it to attempt-NNN/resume.json, and
every node's launcher hands it over in EVENKEEL_RESUME_FROM with the digest of the
manifest it verified (EVENKEEL_RESUME_MANIFEST_XXH3); the trainer resumes from exactly
it, so the launcher's line and every trainer's log agree, and a checkpoint skipped for a
checksum mismatch is named in both the line and the decision. A handed checkpoint that
does not verify, or ranks whose views disagree, are the trainer's refusal (exit 2)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from packs import HOOKED, child_env, free_port
from packs import launch as launch_ranks
from test_launch import EVENKEEL, launch, pack_for, run_file, session, summary_of

RESUME, DIGEST = "EVENKEEL_RESUME_FROM", "EVENKEEL_RESUME_MANIFEST_XXH3"


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # tensor data, past the header: the structure still verifies, the checksum does not
    path.write_bytes(bytes(data))


def _refusals(ranks) -> str:
    for r in ranks:
        assert r.returncode == 2, r.output
    return ranks[0].output


def test_a_corrupt_newest_checkpoint_is_skipped_by_the_launcher_and_the_trainer_alike(launch_model, tmp_path):
    # 6 steps, a checkpoint every 2, both kept; no restarts: each launch is one attempt.
    rf = run_file(tmp_path, launch_model, pack_for(tmp_path, [12, 12]), gpus=2, retry__max_restarts=0,
                  launch__trainer=str(HOOKED))  # the tests' hooks: --stop-after
    first = launch(rf, "--", "--stop-after", "4")
    assert first.returncode == 75, first.stdout + first.stderr  # exited 0 short of the final step, no restart left
    none = json.loads((session(tmp_path) / "attempt-001" / "resume.json").read_text())
    assert none == {"attempt": 1, "resume_from": "none", "step": -1, "manifest_xxh3": "", "where": "from the start",
                    "resume_level": None}
    ckpt = tmp_path / "ckpt"
    assert sorted(p.name for p in ckpt.glob("step-*")) == ["step-00000002", "step-00000004"]
    shard = sorted((ckpt / "step-00000004").glob("model-*.safetensors"))[0]
    _flip_last_byte(shard)
    copy = tmp_path / "copy" / "step-00000002"
    shutil.copytree(ckpt / "step-00000002", copy)

    # The trainer run by hand with that checkpoint handed over refuses, naming why (exit 2 on every rank).
    step4 = ckpt / "step-00000004"
    why = f"{RESUME}={step4}: the checkpoint the launcher chose does not verify: "
    ranks, _ = launch_ranks(2, [str(rf)], tmp_path, timeout=300, env={RESUME: str(step4)})
    out = _refusals(ranks)
    assert why in out and "checksum" in out, out
    # A digest that is not the manifest's (the checkpoint changed since the launcher verified it):
    # every byte is rehashed, and the flipped byte is found.
    ranks, _ = launch_ranks(2, [str(rf)], tmp_path, timeout=300, env={RESUME: str(step4), DIGEST: "0" * 16})
    out = _refusals(ranks)
    assert why in out and "checksum" in out, out
    # Ranks handed different checkpoints (launchers that disagree): every rank refuses, naming both.
    ranks, _ = launch_ranks(2, [str(rf)], tmp_path, timeout=300, env={RESUME: str(ckpt / "step-00000002")},
                            rank_env={1: {RESUME: str(step4)}})
    out = _refusals(ranks)
    assert (f"rank 1 on {os.uname().nodename} was handed {RESUME}={step4}, but rank 0 on {os.uname().nodename} "
            f"was handed {RESUME}={ckpt}/step-00000002: the launchers disagree") in out, out
    assert "the launchers disagree" in ranks[1].output, ranks[1].output

    p = launch(rf)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    line = re.search(r"launch: attempt 2 \(resuming from checkpoint step (\d+) \(step-00000004: skipped: ([^)]*)\)",
                     p.stdout)
    assert line, out
    assert line.group(1) == "2" and "checksum" in line.group(2), line.group(0)
    assert "restarting from checkpoint step 4" not in out and "resuming from checkpoint step 4" not in out, out
    handed = json.loads((session(tmp_path) / "attempt-002" / "resume.json").read_text())
    assert handed["resume_from"] == f"{ckpt}/step-00000002" and handed["step"] == 2, handed
    assert re.fullmatch(r"[0-9a-f]{16}", handed["manifest_xxh3"]), handed
    log = (session(tmp_path) / "attempt-002" / "rank-0.log").read_text()
    # The launcher verified it with checksums; the trainer checks the digest and the sizes.
    # Its training state verifies too (the trainer writes one with every checkpoint): the full level.
    assert (f"resume: {ckpt}/step-00000002 (step 2, full level), as the launcher chose; its manifest is the one the launcher "
            f"verified with checksums (xxh3 {handed['manifest_xxh3']}): sizes and headers checked in ") in log, log
    assert f"resumed weights from {ckpt}/step-00000002" in log, log
    assert f"resume: full training state from {ckpt}/step-00000002/train_state (saved by 2 ranks, loaded by 2)" in log, log
    assert "skipped" not in log, "the trainer must not pick a checkpoint of its own"
    s = summary_of(p.stdout)
    earlier, a = s["attempt_records"]  # the first launch's attempt counts in this summary too
    assert earlier["attempt"] == 1 and earlier["earlier_launch"] and not earlier["inferred"], earlier
    assert a["attempt"] == 2 and a["checkpoint_before"] == 2 and a["outcome"] == "completed", a
    assert s["steps"] == s["planned_steps"] == 6, s

    # The quick check still reads the sizes: a shard one byte short, its manifest the one verified, is refused.
    shard = sorted(copy.glob("model-*.safetensors"))[0]
    with open(shard, "r+b") as f:
        f.truncate(shard.stat().st_size - 1)
    ranks, _ = launch_ranks(2, [str(rf)], tmp_path, timeout=300,
                            env={RESUME: str(copy), DIGEST: handed["manifest_xxh3"]})
    out = _refusals(ranks)
    assert f"{RESUME}={copy}: the checkpoint the launcher chose does not verify: " in out, out


def _beat(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def test_two_nodes_resume_from_the_checkpoint_node_0_chose(launch_model, tmp_path):
    """Two launchers on one machine (nodes 0 and 1, 2 ranks each). A rank of node 1 is
    killed after a save: node 0 restarts the run, and both nodes' launchers print the same
    checkpoint, both nodes' ranks resume at that step, the one resume.json records."""
    pack = pack_for(tmp_path, [40, 40, 40, 40])  # 20 steps, a checkpoint every 2
    rf = run_file(tmp_path, launch_model, pack, nodes=2, gpus=2, launch__gate_timeout_s=240)
    env = {"EVENKEEL_RDZV_ENDPOINT": f"127.0.0.1:{free_port()}"}
    procs = [subprocess.Popen([EVENKEEL, "launch", str(rf), "--node-rank", str(n), "--json"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=child_env(**env), cwd=tmp_path,
                              start_new_session=True) for n in (0, 1)]
    hb = session(tmp_path) / "heartbeat" / "node-1" / "rank-3.json"
    killed = None
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and killed is None and all(p.poll() is None for p in procs):
            time.sleep(0.2)
            beat = _beat(hb)
            if beat and beat["step"] >= 3 and list((tmp_path / "ckpt").glob("step-*")):
                os.kill(beat["pid"], signal.SIGKILL)
                killed = beat["step"]
        outs = [p.communicate(timeout=600)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    both = "\n\n".join(f"--- node {n} (exit {q.returncode}) ---\n{o}" for n, (q, o) in enumerate(zip(procs, outs)))
    assert killed is not None, "rank 3 never reached step 3 after a save\n" + both
    assert [p.returncode for p in procs] == [0, 0], both
    s = summary_of(outs[0])
    assert s["steps"] == s["planned_steps"] == 20, s
    first, second = s["attempt_records"][:2]
    assert first["outcome"] == "failed" and first["decision"]["action"] == "restart", first
    handed = json.loads((session(tmp_path) / "attempt-002" / "resume.json").read_text())
    step = handed["step"]
    assert step >= 2 and second["checkpoint_before"] == step, (handed, second)
    ckpt = f"{tmp_path / 'ckpt'}/step-{step:08d}"
    assert handed["resume_from"] == ckpt, handed
    # What each launcher printed is the checkpoint node 0 chose ...
    printed = [re.search(r"launch: attempt 2 \(resuming from checkpoint step (\d+)([^\n]*)", o) for o in outs]
    assert all(printed), both
    assert [int(m.group(1)) for m in printed] == [step, step], both
    assert "node 0's choice" in printed[1].group(2), printed[1].group(0)
    # ... and what every rank of both nodes resumed at.
    attempt = session(tmp_path) / "attempt-002"
    for r in range(4):
        log = (attempt / f"rank-{r}.log").read_text()
        assert f"resumed weights from {ckpt}: " in log and f"(global {step})" in log, f"rank {r}:\n{log}"
    node1 = (attempt / "rank-2.log").read_text()
    assert (f"resume: {ckpt} (step {step}), rank 0's choice and the one this node's launcher handed over; its "
            f"manifest here has the same xxh3 {handed['manifest_xxh3']}") in node1, node1
