"""The cause, named (docs/launch.md "The cause, named"): the launcher reads each failed
rank's first error from its log into the decision, attempt.json and summary.json
(`causes`); a configuration refusal (the trainer's exit 2) stops after one attempt
instead of being retried."""

from __future__ import annotations

import json

from packs import HOOKED
from test_launch import launch, pack_for, run_file, session, summary_of

BAD_INPUT = 65
BUDGET_SPENT = 75


def test_a_missing_pack_directory_is_named_and_not_retried(launch_model, tmp_path):
    """A run file whose pack directory does not exist, started anyway (--accept-gate-fail):
    every rank refuses with exit 2 naming data.pack_dir; one attempt, stop 65."""
    missing = tmp_path / "no-such-pack"
    rf = run_file(tmp_path, launch_model, missing, gpus=2)
    p = launch(rf, "--accept-gate-fail")
    out = p.stdout + p.stderr
    assert p.returncode == BAD_INPUT, out
    s = summary_of(p.stdout)
    (a,) = s["attempt_records"]  # not retried
    want = f"data.pack_dir {missing}: no such directory"
    reason = a["decision"]["reason"]
    assert reason.startswith("the trainer refused the configuration (exit 2; a restart would refuse again): "), reason
    assert f"rank 0: {rf}: {want}" in reason, reason
    assert "tokenizer mismatch" not in out, out
    assert {c["rank"] for c in a["causes"]} == {0, 1} and all(want in c["cause"] for c in a["causes"]), a["causes"]
    assert [(c["attempt"], c["rank"]) for c in s["causes"]] == [(1, 0), (1, 1)], s["causes"]
    on_disk = json.loads((session(tmp_path) / "attempt-001" / "attempt.json").read_text())
    assert on_disk["causes"] == a["causes"]
    decision = json.loads((session(tmp_path) / "attempt-001" / "decision.json").read_text())
    assert decision["action"] == "stop" and decision["exit_code"] == BAD_INPUT and want in decision["reason"], decision
    assert f"launch: attempt 1: rank 0: {rf}: {want}" in p.stdout, out


def test_an_exception_in_the_trainer_is_named_with_its_phase_and_retried(launch_model, tmp_path):
    """A Python exception on every rank (the --log-blocks folder cannot be made: a file is
    in the way) is not a refusal: the decision names each rank's exception and the phase
    it hit, and the launcher would restart (here the budget is 0: stop 75)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    rf = run_file(tmp_path, launch_model, pack_for(tmp_path, [8, 8]), gpus=2, retry__max_restarts=0,
                  launch__trainer=str(HOOKED))  # the tests' hooks: --log-blocks
    p = launch(rf, "--", "--log-blocks", str(blocker / "blocks"))
    out = p.stdout + p.stderr
    assert p.returncode == BUDGET_SPENT, out
    s = summary_of(p.stdout)
    (a,) = s["attempt_records"]
    want = f"NotADirectoryError: [Errno 20] Not a directory: '{blocker / 'blocks'}' (in load)"
    assert [c["cause"] for c in a["causes"]] == [want, want], a["causes"]
    assert f"rank 0: {want}, rank 1: {want}" in a["decision"]["reason"], a["decision"]["reason"]
    assert s["causes"] == [{"attempt": 1, "rank": 0, "cause": want}, {"attempt": 1, "rank": 1, "cause": want}], s
