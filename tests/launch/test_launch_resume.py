"""One resume decision (docs/launch.md "Resume"): the launcher picks the checkpoint with
the trainer's verification (checksums) and hands it over in EVENKEEL_RESUME_FROM; the
trainer resumes from exactly it, so the launcher's line and the trainer's log agree,
and a checkpoint skipped for a checksum mismatch is named in both the line and the
decision. A handed checkpoint that does not verify is the trainer's refusal (exit 2)."""

from __future__ import annotations

import re
from pathlib import Path

from packs import launch as launch_ranks
from test_launch import launch, pack_for, run_file, session, summary_of


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # tensor data, past the header: the structure still verifies, the checksum does not
    path.write_bytes(bytes(data))


def test_a_corrupt_newest_checkpoint_is_skipped_by_the_launcher_and_the_trainer_alike(qwen3_model, tmp_path):
    # 6 steps, a checkpoint every 2, both kept; no restarts: each launch is one attempt.
    rf = run_file(tmp_path, qwen3_model, pack_for(tmp_path, [12, 12]), gpus=2, retry__max_restarts=0)
    first = launch(rf, "--", "--stop-after", "4")
    assert first.returncode == 75, first.stdout + first.stderr  # exited 0 short of the final step, no restart left
    ckpt = tmp_path / "ckpt"
    assert sorted(p.name for p in ckpt.glob("step-*")) == ["step-00000002", "step-00000004"]
    shard = sorted((ckpt / "step-00000004").glob("model-*.safetensors"))[0]
    _flip_last_byte(shard)

    # The trainer run by hand with that checkpoint handed over refuses, naming why (exit 2 on every rank).
    ranks, _ = launch_ranks(2, [str(rf)], tmp_path, timeout=300,
                            env={"EVENKEEL_RESUME_FROM": str(ckpt / "step-00000004")})
    for r in ranks:
        assert r.returncode == 2, r.output
    assert (f"EVENKEEL_RESUME_FROM={ckpt}/step-00000004: the checkpoint the launcher chose does not verify: "
            in ranks[0].output), ranks[0].output
    assert "checksum" in ranks[0].output, ranks[0].output

    p = launch(rf)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    line = re.search(r"launch: attempt 2 \(resuming from checkpoint step (\d+) \(step-00000004: skipped: ([^)]*)\)",
                     p.stdout)
    assert line, out
    assert line.group(1) == "2" and "checksum" in line.group(2), line.group(0)
    assert "restarting from checkpoint step 4" not in out and "resuming from checkpoint step 4" not in out, out
    log = (session(tmp_path) / "attempt-002" / "rank-0.log").read_text()
    assert f"resume: {ckpt}/step-00000002 (step 2), as the launcher chose; verified with checksums" in log, log
    assert f"resumed weights from {ckpt}/step-00000002" in log, log
    assert "skipped" not in log, "the trainer must not pick a checkpoint of its own"
    s = summary_of(p.stdout)
    earlier, a = s["attempt_records"]  # the first launch's attempt counts in this summary too
    assert earlier["attempt"] == 1 and earlier["earlier_launch"] and not earlier["inferred"], earlier
    assert a["attempt"] == 2 and a["checkpoint_before"] == 2 and a["outcome"] == "completed", a
    assert s["steps"] == s["planned_steps"] == 6, s

