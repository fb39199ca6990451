"""The tests' rank zygote (tests/zygote/server.py) against a fresh interpreter: a rank it
serves must start as a fresh one would, with the same argv, working directory, sys.path
and torch's intra-op thread count (OpenMP read OMP_NUM_THREADS once, in the server: every
rank kept the server's count, whatever its own environment said)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts its own zygote: imports torch and transformers once

REPO = Path(__file__).resolve().parents[2]
ZYGOTE = REPO / "tests" / "zygote"


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    d = tmp_path_factory.mktemp("own-zygote")
    sock, ready = d / "z.sock", d / "ready"
    env = {k: v for k, v in os.environ.items() if k not in ("EK_ZYGOTE", "PYTHONPATH")}
    env["OMP_NUM_THREADS"] = "1"  # as the tests start it (packs.child_env): must not leak into a rank
    with open(d / "server.log", "w") as log:
        proc = subprocess.Popen([sys.executable, str(ZYGOTE / "server.py"), str(sock), str(ready)], env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 300
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline, (d / "server.log").read_text()
        time.sleep(0.1)
    yield sock
    proc.kill()
    proc.wait()


def probe(tmp_path: Path, omp: str | None, sock: Path | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("EK_ZYGOTE", "PYTHONPATH", "OMP_NUM_THREADS")}
    if omp is not None:
        env["OMP_NUM_THREADS"] = omp
    if sock is not None:
        env.update(EK_ZYGOTE=str(sock), PYTHONPATH=str(ZYGOTE))
    env["EK_PROBE_PARENT"] = str(os.getpid())
    # The served form: `python SCRIPT ARGS` from a working directory of the test's own.
    p = subprocess.run([sys.executable, str(ZYGOTE / "probe_trainer.py"), "a", "b c"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("omp", ["1", "2", None])
def test_a_served_rank_starts_as_a_fresh_one_does(omp, zygote, tmp_path):
    fresh = probe(tmp_path, omp, None)
    served = probe(tmp_path, omp, zygote)
    assert not fresh.pop("served") and served.pop("served"), "the zygote did not serve the probe"
    assert served == fresh
    if omp is not None:  # unset: torch's own default (cores, physical or not), whatever it is
        assert fresh["threads"] == int(omp), fresh


def served_count(sock: Path) -> int:
    p = Path(str(sock) + ".pids")
    return len(p.read_text().splitlines()) if p.exists() else 0


def torchrun_probe(tmp_path: Path, sock: Path | None, code: int) -> tuple[int, dict]:
    """torchrun (the installation's console script, as a launch starts it) with one worker:
    the probe trainer, which exits with `code`."""
    env = {k: v for k, v in os.environ.items() if k not in ("EK_ZYGOTE", "PYTHONPATH", "OMP_NUM_THREADS")}
    if sock is not None:
        env.update(EK_ZYGOTE=str(sock), PYTHONPATH=str(ZYGOTE))
    env.update(EK_PROBE_PARENT="0", EK_PROBE_EXIT=str(code))
    out = tmp_path / "probe.json"
    p = subprocess.run([str(Path(sys.executable).parent / "torchrun"), "--standalone", "--nproc-per-node", "1",
                        "--max-restarts", "0", "--no-python",
                        sys.executable, str(ZYGOTE / "probe_trainer.py"), "--out", str(out)],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    return p.returncode, json.loads(out.read_text())


@pytest.mark.parametrize("code", [0, 3])
def test_a_served_torchrun_starts_its_worker_and_ends_as_a_fresh_one_does(code, zygote, tmp_path):
    """torchrun is served too (a launch starts one per attempt): its worker sees what a fresh
    torchrun's sees, and its exit status is the same, a worker's failure included."""
    before = served_count(zygote)
    fresh = torchrun_probe(tmp_path, None, code)
    assert served_count(zygote) == before
    served = torchrun_probe(tmp_path, zygote, code)
    assert served_count(zygote) == before + 2, "the zygote did not serve torchrun and its worker"
    for _, seen in (fresh, served):
        seen.pop("served")
    assert served == fresh
    assert fresh[0] == (0 if code == 0 else 1), fresh
