"""evenkeel.state: the full training state saved by 4 ranks resumes, bit-identical to an
unbroken run, in 4, 2 and 8 ranks (DCP's resharding). The asynchronous path (evenkeel.saver)
is tested through the trainer: test_saver.py."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow  # real PyTorch ranks (gloo), 2-8 at a time

HERE = Path(__file__).resolve().parent


def ranks(*args):
    p = subprocess.run([sys.executable, str(HERE / "state_ranks.py"), *map(str, args)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    out = tmp_path_factory.mktemp("state")
    ranks("train", 4, out, 6, 3)  # saves the state after step 3, runs on to 6
    assert (out / "state" / ".metadata").is_file()
    assert sorted(p.name for p in (out / "state").glob("*.distcp")) == [f"__{r}_0.distcp" for r in range(4)]
    return out


def same(a, b):
    """Which of parameters and AdamW moments differ (empty: bit-identical)."""
    out = [n for n, p in a["params"].items() if not torch.equal(p, b["params"][n])]
    for n, st in a["moments"].items():
        out += [f"{n}.{k}" for k, v in st.items() if not torch.equal(v, b["moments"][n][k])]
    return out


@pytest.mark.parametrize("world", [2, 4, 8])
def test_a_state_saved_by_4_ranks_loads_exactly_into(saved, world):
    ranks("resume", world, saved, 3)  # loaded, no step taken
    at_save = torch.load(saved / "train-4-3.pt")
    loaded = torch.load(saved / f"resume-{world}-3.pt")
    assert same(at_save, loaded) == []
    assert loaded["last_epoch"] == at_save["last_epoch"] == 3 and loaded["lr"] == at_save["lr"]


def test_a_resumed_run_ends_bit_identical_to_the_unbroken_one(saved):
    ranks("resume", 4, saved, 6)
    clean, resumed = torch.load(saved / "train-4-6.pt"), torch.load(saved / "resume-4-6.pt")
    assert same(clean, resumed) == []
    assert clean["last_epoch"] == resumed["last_epoch"] == 6


def test_a_weights_only_resume_does_not(saved):
    """The check can fail: without the optimizer's moments the run ends elsewhere."""
    ranks("weights", 4, saved, 6)
    clean, weights = torch.load(saved / "train-4-6.pt"), torch.load(saved / "weights-4-6.pt")
    assert same(clean, weights) != []
