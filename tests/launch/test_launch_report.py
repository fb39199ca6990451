"""The run report shows what the launcher decided and why (docs/report.md, "Attempts and
their causes"): a real failing 2-rank launch, then `evenkeel report RUN.toml` on what it
left; the page's embedded data model carries each attempt's decision and each failed
rank's first error, in the attempts and as a launcher incident."""

from __future__ import annotations

import json
import re
import subprocess

from packs import HOOKED
from test_launch import EVENKEEL, launch, pack_for, run_file, summary_of

BUDGET_SPENT = 75


def _model_of(page: str) -> dict:
    m = re.search(r'<script id="ek-data" type="application/json">(.*?)</script>', page, re.S)
    assert m, page[:2000]
    return json.loads(m.group(1))  # '<' is written \u003c inside it (report/html.cc)


def test_the_report_of_a_failed_launch_names_each_ranks_cause_and_the_decision(launch_model, tmp_path):
    # Every rank fails in load (its --log-blocks folder cannot be made: a file is in the way);
    # no restart left: stop, exit 75.
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    rf = run_file(tmp_path, launch_model, pack_for(tmp_path, [8, 8]), gpus=2, retry__max_restarts=0,
                  launch__trainer=str(HOOKED))  # the tests' hooks: --log-blocks
    p = launch(rf, "--", "--log-blocks", str(blocker / "blocks"))
    assert p.returncode == BUDGET_SPENT, p.stdout + p.stderr
    want = f"NotADirectoryError: [Errno 20] Not a directory: '{blocker / 'blocks'}' (in load)"
    (record,) = summary_of(p.stdout)["attempt_records"]
    assert [c["cause"] for c in record["causes"]] == [want, want], record["causes"]

    r = subprocess.run([EVENKEEL, "report", str(rf), "-o", str(tmp_path / "report.html")], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    model = _model_of((tmp_path / "report.html").read_text())
    (a,) = model["attempts"]
    assert a["attempt"] == 1 and a["outcome"] == "failed", a
    assert a["decision"] == "stop" and a["exit_code"] == BUDGET_SPENT, a
    assert a["causes"] == [{"rank": 0, "cause": want}, {"rank": 1, "cause": want}], a["causes"]
    assert a["reason"] == record["decision"]["reason"], a
    (inc,) = [i for i in model["incidents"] if i["source"] == "launcher"]
    assert inc["kind"] == "attempt failed" and inc["ranks"] == [0, 1], inc
    assert inc["summary"].startswith(f"attempt 1 failed: stop, exit {BUDGET_SPENT}: "), inc["summary"]
    assert inc["evidence"].split("\n")[:2] == [f"rank 0: {want}", f"rank 1: {want}"], inc["evidence"]
    assert inc["since"] == a["end"] and inc["gpu_hours"] == record["gpu_hours_lost"], (inc, record)
