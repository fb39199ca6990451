"""`evenkeel fr` next to PyTorch's own analyzer (fr_trace, torch.distributed.flight_recorder)
on the real gloo dumps of testdata/fr/gloo/ (tools/fr/record_gloo_dumps.py: the FSDP2
trainer on 2 CPU ranks, one rank raising in each phase, and the uneven-data deadlock).

fr_trace is a reference, not an oracle. This records, case by case, what it does:
  - on the dumps as written it stops with KeyError: ('0', 0): gloo's pg_config names
    the PG "" while the entries name it "0";
  - with that one key renamed (a copy; what it would read if gloo agreed with itself)
    it runs: it agrees with evenkeel on the deadlock (COLLECTIVE_TYPE_MISMATCH, the
    barrier against FSDP's all_gather), and on every case with a save before the fault
    it stops at the first save's first gather with its per-rank element-count rule
    (SIZE_OR_SYNTAX_MISMATCH "Found input numel 'N * pg size 2' does not match output
    numel 'N'"), which evenkeel reports as a note and not as a mismatch (docs/fr.md).
The table in docs/fr.md is this test's outcome.
"""
from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EVENKEEL = os.environ.get("EVENKEEL", str(ROOT / "build" / "src" / "cli" / "evenkeel"))
GLOO = ROOT / "testdata" / "fr" / "gloo"

# case -> (rank that raised, its last seq); None: the deadlock, no rank raised
CASES = {
    "forward": (1, 65),
    "backward": (0, 68),
    "optimizer": (1, 78),
    "save_gather": (0, 98),
    "save_write": (0, 96),
    "barrier": (1, 94),
    "deadlock": None,
}


def evenkeel_fr(path: Path) -> dict:
    assert os.path.exists(EVENKEEL), f"missing {EVENKEEL}: build first"
    p = subprocess.run([EVENKEEL, "fr", "--json", str(path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


# Runs fr_trace's main() on each folder in one process (torch imports once), with
# what it logs and the exception it ends with, if any, per folder.
DRIVER = r"""
import io, json, logging, sys, traceback
from torch.distributed.flight_recorder.fr_trace import main
logger = logging.getLogger("Flight Recorder")
out = {}
for d in sys.argv[1:]:
    buf = io.StringIO()
    h = logging.StreamHandler(buf)
    logger.addHandler(h)
    exc = ""
    try:
        main([d])
    except BaseException as e:
        exc = "".join(traceback.format_exception_only(type(e), e)).strip()
    logger.removeHandler(h)
    out[d] = {"log": buf.getvalue(), "exception": exc}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def fr_trace(tmp_path_factory) -> dict:
    """{case: {"as_written": {log, exception}, "renamed": {log, exception}}}."""
    try:
        import torch.distributed.flight_recorder.fr_trace  # noqa: F401
    except ImportError as e:  # the reference is part of this suite: no torch is a failure, not a skip
        pytest.fail(f"PyTorch's fr_trace is not importable in {sys.executable}: {e}")
    tmp = tmp_path_factory.mktemp("fr_renamed")
    dirs = {case: (str(GLOO / case), str(renamed_pg_copy(case, tmp / case))) for case in CASES}
    p = subprocess.run([sys.executable, "-c", DRIVER, *[d for pair in dirs.values() for d in pair]],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    runs = json.loads(p.stdout.strip().splitlines()[-1])
    return {case: {"as_written": runs[a], "renamed": runs[b]} for case, (a, b) in dirs.items()}


def renamed_pg_copy(case: str, dest: Path) -> Path:
    """The dumps with gloo's pg_config key "" renamed to the "0"/"default_pg" the entries use."""
    dest.mkdir()
    for r in (0, 1):
        top = pickle.loads((GLOO / case / f"rank_{r}").read_bytes())
        cfg = top["pg_config"].pop("")
        top["pg_config"]["0"] = dict(cfg, name="0", desc="default_pg")
        (dest / f"rank_{r}").write_bytes(pickle.dumps(top))
    return dest


def first_block(stderr: str) -> dict:
    """fr_trace's first logged mismatch: header sequence number, collective, error msg."""
    m = re.search(r"^(Collective sequence number: (\d+) has errors|Not all ranks joining collective, sequence "
                  r"number: (\d+))$", stderr, re.M)
    assert m, f"fr_trace logged no mismatch:\n{stderr[-3000:]}"
    rest = stderr[m.end():]
    seq = int(m.group(2) or m.group(3))
    collective = re.search(r"^collective: (.+)$", rest, re.M).group(1)
    err = re.search(r"^error msg: (.+)$", rest, re.M)
    return {"seq": seq, "collective": collective, "error": err.group(1) if err else "",
            "kind": "errors" if m.group(2) else "missing_ranks"}


@pytest.mark.parametrize("case", list(CASES))
def test_fr_trace_stops_on_gloo_dumps_as_written_with_the_documented_key_error(case, fr_trace):
    run = fr_trace[case]["as_written"]
    assert run["exception"] == "KeyError: ('0', 0)", run
    # evenkeel reads the same files.
    assert evenkeel_fr(GLOO / case)["ranks_read"] == [0, 1]


@pytest.mark.parametrize("case", list(CASES))
def test_evenkeel_and_fr_trace_on_each_phase(case, fr_trace):
    ours = evenkeel_fr(GLOO / case)
    run = fr_trace[case]["renamed"]
    assert run["exception"] == "", run["exception"]  # with the PG renamed it runs to the end
    theirs = first_block(run["log"])
    if CASES[case] is None:
        # The deadlock: both name the same slot and the same mismatch; ours is conclusive.
        assert ours["conclusive"] is True, ours["verdict"]
        assert ours["desync"] is True
        head = ours["findings"][0]
        assert head["culprits"][0]["error_type"] == "COLLECTIVE_TYPE_MISMATCH"
        assert theirs["seq"] == head["collective_seq_id"] == 69
        assert "COLLECTIVE_TYPE_MISMATCH" in theirs["error"]
        assert "'all_gather' does not match found collective type: 'barrier'" in theirs["error"]
        assert "rank 0 in all_gather" in ours["verdict"] and "rank 1 in barrier" in ours["verdict"]
        return
    rank, seq = CASES[case]
    # A rank raised: ours names it and is not conclusive (a restart may get past it).
    assert ours["conclusive"] is False, ours["verdict"]
    assert ours["desync"] is False
    assert ours["verdict"].startswith(f"rank {rank} stopped issuing collectives at pg 0 (default_pg) seq {seq} "), \
        ours["verdict"]
    assert f"rank {1 - rank} waits in seq {seq + 1} " in ours["verdict"], ours["verdict"]
    head = ours["findings"][0]
    assert head["kind"] == "missing_ranks" and head["rank_stopped"] is True, head
    assert [(s["rank"], s["last_seq"]) for s in head["stopped"]] == [(rank, seq)], head["stopped"]
    # fr_trace stops earlier: at the first checkpoint's first DTensor gather, which both
    # ranks recorded alike ([[N, 64]] -> [[1, N, 64]]) and which completed in the run.
    assert theirs["kind"] == "errors"
    assert theirs["collective"] == "gloo:all_gather"
    assert theirs["seq"] < seq, theirs
    assert re.search(r"SIZE_OR_SYNTAX_MISMATCH, Found input numel '(\d+) \* pg size 2' does not match output "
                     r"numel '\1'", theirs["error"]), theirs["error"]
    # evenkeel saw the same entry and says why it is no mismatch.
    assert any(n.startswith(f"pg 0 seq {theirs['seq']} gloo:all_gather") and "on every rank alike" in n
               for n in ours["notes"]), ours["notes"]
    assert all(f["culprits"] == [] for f in ours["findings"]), ours["findings"]
