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

sys.path.insert(0, str(Path(__file__).resolve().parent / "trainer"))

# The venv's bin/ first on PATH, as in an activated environment: the gate's isolation probe
# runs with the trainer's python, which for a run file without launch.python is the python
# beside torchrun found on PATH (run/programs.h); without this it would be the system's
# python3, which has no torch.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

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
