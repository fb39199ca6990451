"""evenkeel launch under a real SLURM: Debian's slurmctld, two slurmd on this machine
(tests/slurm/cluster.sh), munge. examples/slurm/evenkeel.sbatch is submitted as a
user would: a 2-node job, one launcher per node under srun, 2 CPU ranks per node,
which must gate, rendezvous and train to completion. Needs root (the daemons) and
the packages scripts/setup.sh installs; without them it fails, it never skips."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from packs import EVENKEEL, REPO, TOKENIZER_DIRS, free_port, make_pack, write_run_file

CLUSTER = REPO / "tests" / "slurm" / "cluster.sh"
SBATCH = REPO / "examples" / "slurm" / "evenkeel.sbatch"


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    d = tmp_path_factory.mktemp("slurm")
    start = subprocess.run(["bash", str(CLUSTER), "start", str(d)], capture_output=True, text=True, timeout=120)
    assert start.returncode == 0, start.stdout + start.stderr
    env = dict(os.environ, SLURM_CONF=start.stdout.strip().splitlines()[-1])
    yield env
    subprocess.run(["bash", str(CLUSTER), "stop", str(d)], capture_output=True, timeout=60)


def test_a_two_node_sbatch_job_trains_to_completion(slurm, launch_model, tmp_path):
    pack = make_pack(tmp_path / "pack", [8, 8, 8, 8], seq_len=32, vocab=512,
                     tokenizer=TOKENIZER_DIRS["qwen3"] / "tokenizer.json")
    rf = write_run_file(tmp_path / "run.toml", {
        "run": {"name": "slurm-test"},
        "cluster": {"nodes": 2, "gpus_per_node": 2},
        "data": {"pack_dir": str(pack)},
        "model": {"path": str(launch_model)},
        "train": {"seq_len": 32, "micro_batch": 1, "grad_accum": 2, "save_every": 2, "lr": 3e-3},
        "checkpoint": {"dir": str(tmp_path / "ckpt"), "shard_size_gb": 0.01},
        "distributed": {"backend": "gloo", "watchdog_timeout_min": 2, "watchdog_floor_min": 0.1},
        "launch": {"torchrun": str(Path(sys.executable).parent / "torchrun"), "rdzv_port": free_port()},
    })
    out = tmp_path / "job.out"
    env = dict(slurm, RUN=str(rf), EVENKEEL=EVENKEEL, OMP_NUM_THREADS="1")
    job = subprocess.run(["sbatch", "--wait", "--parsable", "-o", str(out), str(SBATCH)], capture_output=True,
                         text=True, timeout=900, env=env, cwd=tmp_path)
    text = out.read_text() if out.exists() else ""
    assert job.returncode == 0, job.stdout + job.stderr + text
    job_id = job.stdout.strip().split(";")[0]
    assert "evenkeel: completed" in text, text
    session = tmp_path / "ckpt" / "launch" / f"slurm-{job_id}"
    s = json.loads((session / "summary.json").read_text())
    assert s["outcome"] == "completed" and s["steps"] == s["planned_steps"] == 4, s
    assert s["run_id"] == f"slurm-{job_id}"
    nodes = s["attempt_records"][0]["nodes"]
    assert [n["node"] for n in nodes] == [0, 1]
    assert sorted(r["rank"] for n in nodes for r in n["ranks"]) == [0, 1, 2, 3]
    assert text.count("SLURM job " + job_id) >= 2, "both launchers took their place from SLURM"
