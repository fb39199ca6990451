"""Shared by every pytest suite under tests/: the tiny models, and the "slow" label
(pyproject.toml registers it).

The session-scoped models (tests/trainer/packs.py: `qwen3_model`, `launch_model`,
`llama_model`, `gemma3_model`) are registered here, once: a fixture imported into each
suite's conftest.py is a separate fixture per folder, so one `pytest tests/trainer tests/launch
tests/slurm` built the same tiny Qwen3 three times.

A test is slow when it starts real PyTorch ranks: it takes one of the fixtures that hold a
real model or cluster (a launch, torchrun or a SLURM job: 10-300 s each). The label goes on
the whole module, because a module is the unit of order: test_precision's last test reads
the rows its earlier tests wrote, so a module is never split between the fast and the slow
run. scripts/test.sh runs `-m "not slow"`, then `-m slow`: every test runs, once.
"""

import os
import sys
from pathlib import Path

import pytest

# tests/ (ports.py) and tests/trainer (packs.py, the helpers every suite shares).
sys.path.insert(0, str(Path(__file__).resolve().parent / "trainer"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The venv's bin/ first on PATH, as in an activated environment: the gate's isolation probe
# runs with the trainer's python, which for a run file without launch.python is the python
# beside torchrun found on PATH (run/programs.h); without this it would be the system's
# python3, which has no torch.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

from packs import child_env  # noqa: E402
from packs import gemma3_model, launch_model, llama_model, qwen3_model  # noqa: E402,F401  (fixtures, one per session)

# The fixtures (tests/trainer/packs.py, tests/launch/test_precision.py, tests/slurm) whose
# tests start ranks.
RANK_FIXTURES = frozenset({"qwen3_model", "launch_model", "llama_model", "gemma3_model", "small_model", "slurm",
                           "background"})


def pytest_collection_modifyitems(config, items):
    slow_modules = {item.nodeid.split("::")[0] for item in items
                    if RANK_FIXTURES.intersection(getattr(item, "fixturenames", ()))}
    for item in items:
        if item.nodeid.split("::")[0] in slow_modules:
            item.add_marker(pytest.mark.slow)


# The rank zygote (tests/zygote/server.py): for a session with slow tests, one process
# imports what a rank imports, once, and forks each rank the tests start from it (a rank's
# imports were ~10 s of CPU on a 2-core machine, over half of the slow suite's). A test that
# matches a rank's heartbeat pid to its wrapper's record translates it (packs.launched_pid).
# These modules start fresh ranks instead, as a user's run does: test_launch_hang's
# assertions are about the process tree itself (the rank's parent is its launch-rank
# wrapper, whose command line it reads), and the others are the user's own seams (the
# binary copied out of the tree and torchrun found on PATH; SLURM starting the ranks).
ZYGOTE_DIR = Path(__file__).resolve().parent / "zygote"
FRESH_RANKS = frozenset({"tests/launch/test_launch_hang.py", "tests/launch/test_launch.py",
                         "tests/slurm/test_slurm.py"})


@pytest.fixture(scope="session")
def _rank_zygote_server(request, tmp_path_factory):
    import signal
    import subprocess
    import time

    # EK_ZYGOTE_OFF=1: every rank fresh (to tell whether a failure is the zygote's).
    if os.environ.get("EK_ZYGOTE_OFF") or not any(item.get_closest_marker("slow") for item in request.session.items):
        yield None
        return
    d = tmp_path_factory.mktemp("zygote")
    sock, ready = d / "zygote.sock", d / "ready"
    env = child_env()  # the environment the tests give their ranks
    env.pop("EK_ZYGOTE", None)
    with open(d / "server.log", "w") as log:
        proc = subprocess.Popen([sys.executable, str(ZYGOTE_DIR / "server.py"), str(sock), str(ready)], env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 300
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"the rank zygote did not start (exit {proc.poll()}):\n{(d / 'server.log').read_text()}")
        time.sleep(0.1)
    yield str(sock)
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # any rank left behind
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module", autouse=True)
def _rank_zygote(request, _rank_zygote_server):
    """Module-scoped and autouse, so that it comes before a module's own fixtures (a module
    that launches once for several tests)."""
    module = request.node.nodeid.split("::")[0]
    slow = any(item.nodeid.split("::")[0] == module and item.get_closest_marker("slow")
               for item in request.session.items)
    if _rank_zygote_server is None or module in FRESH_RANKS or not slow:
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EK_ZYGOTE", _rank_zygote_server)
        old = os.environ.get("PYTHONPATH")
        mp.setenv("PYTHONPATH", str(ZYGOTE_DIR) + (os.pathsep + old if old else ""))
        yield
