"""One plan across the parts: for hundreds of random valid run files with packs, the
plan (`evenkeel plan --json`), the gate's schedule check (`evenkeel gate --json`), the
trainer's dry run (`python -m evenkeel.train RUN --dry-run`: the loop walked without a
model) and the launcher's completion rule (`evenkeel launch RUN --dry-run --json`: the
step and saves it judges attempts by) agree exactly. Then a sample is trained for real
on CPU with a tiny model through `evenkeel launch`: each ends with exit 0, one attempt,
and the final checkpoint at the plan's last step.

The generator draws world 1-8, epochs 1-3, max_steps 0 / inside the first epoch /
past an epoch / past the run, save_every 0, 1 and odd values, micro-batch 1-2,
grad_accum 1-8, evenfix min and pad, keep 1-3, and packs with zero and non-zero
spread. The seed is fixed (EVENKEEL_PROPERTY_SEED to change it) so a failure
reproduces; the failing case's run file is named in the assertion."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from packs import EVENKEEL, REPO, TOKENIZER_DIRS, child_env, make_pack, write_run_file

SEED = int(os.environ.get("EVENKEEL_PROPERTY_SEED", "20261201"))
N_RUNS = 300
N_TRAINED = 20
SEQ = 16
TORCHRUN = str(Path(sys.executable).parent / "torchrun")
# Trained launches in flight at once (the last test); 1 runs them one after another.
LAUNCHES_AT_ONCE = int(os.environ.get("EVENKEEL_TEST_LAUNCHES", "2"))


def draw_blocks(rng: random.Random, world: int, per_step: int) -> list[int]:
    base = rng.randint(per_step, max(per_step, 48))
    if rng.random() < 0.4:
        return [base] * world
    return [base + rng.randint(0, 5) for _ in range(world)]


def draw_max_steps(rng: random.Random, steps_per_epoch: int, epochs: int) -> int:
    choice = rng.randrange(4)
    if choice == 0 or steps_per_epoch < 1:
        return 0
    if choice == 1:
        return rng.randint(1, max(1, steps_per_epoch - 1))  # inside the first epoch
    if choice == 2:
        return rng.randint(steps_per_epoch, steps_per_epoch * epochs + 1)  # past an epoch
    return steps_per_epoch * epochs + rng.randint(1, 50)  # past the whole run: no cap


def draw_run(rng: random.Random, i: int, tmp: Path, packs: dict, *, trained: bool, model: Path | None) -> Path:
    if trained:
        world, mb, ga = rng.randint(1, 2), 1, rng.randint(1, 3)
    else:
        world, mb, ga = rng.randint(1, 8), rng.randint(1, 2), rng.randint(1, 8)
    per_step = mb * ga
    blocks = draw_blocks(rng, world, per_step)
    if trained:
        blocks = [min(b, 3 * per_step + 4) for b in blocks]  # a few steps per epoch: CPU time
    key = tuple(blocks)
    if key not in packs:
        packs[key] = make_pack(tmp / f"pack-{len(packs):03d}", blocks, seq_len=SEQ, vocab=512,
                               tokenizer=TOKENIZER_DIRS["qwen3"] / "tokenizer.json")
    evenfix = rng.choice(["min", "pad"])
    target = max(blocks) if evenfix == "pad" else min(blocks)
    epochs = rng.randint(1, 3)
    steps_per_epoch = target // per_step
    max_steps = draw_max_steps(rng, steps_per_epoch, epochs)
    save_every = rng.choice([0, 1, 1, 2, 3, 5, 7, 9])
    folder = tmp / f"run-{i:03d}"
    folder.mkdir()
    model_section = {"path": str(model)} if model else {"params": 1_000_000}
    sections = {
        "run": {"name": f"prop-{i:03d}"},
        "cluster": {"nodes": 1, "gpus_per_node": world},
        "data": {"pack_dir": str(packs[key])},
        "model": model_section,
        "train": {"seq_len": SEQ, "micro_batch": mb, "grad_accum": ga, "epochs": epochs, "max_steps": max_steps,
                  "warmup_steps": 0, "save_every": save_every, "lr": 3e-3, "seed": i, "log_every": 1000},
        "checkpoint": {"dir": str(folder / "ckpt"), "keep": rng.randint(1, 3), "shard_size_gb": 0.01},
        "evenfix": {"mode": evenfix},
        "distributed": {"backend": "gloo", "watchdog_timeout_min": 2, "watchdog_floor_min": 0.1},
        "launch": {"torchrun": TORCHRUN, "gate_timeout_s": 60, "stop_grace_s": 10},
        "retry": {"max_restarts": 0, "max_no_progress": 1, "backoff_s": 0},
    }
    return write_run_file(folder / "run.toml", sections)


def cli_json(*args: str, ok_codes=(0,)) -> dict:
    p = subprocess.run([EVENKEEL, *args], capture_output=True, text=True, timeout=120, env=child_env())
    assert p.returncode in ok_codes, f"evenkeel {' '.join(args)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return json.loads(p.stdout)


def gate_schedule(rf: Path) -> dict:
    log = cli_json("gate", str(rf), "--json", ok_codes=(0, 1))  # 1: another check said no; the schedule stands
    for check in log["checks"]:
        if check["name"] == "schedule":
            return check
    raise AssertionError(f"{rf}: no schedule check in the gate log")


def check_agreement(rf: Path, train_dry) -> dict:
    plan = cli_json("plan", str(rf), "--json")
    s = plan["schedule"]
    where = f"{rf}:\n{rf.read_text()}\nschedule: {json.dumps(s)}"
    # The plan's summary fields are the schedule's.
    assert plan["total_steps"] == s["total_steps"] and plan["steps_per_epoch"] == s["steps_per_epoch"], where
    assert plan["save_count"] == len(s["save_steps"]), where
    # The gate's schedule check.
    g = gate_schedule(rf)
    numbers = g.get("numbers", {})
    assert numbers.get("total_steps") == s["total_steps"], (where, g)
    assert numbers.get("steps_per_epoch") == s["steps_per_epoch"], (where, g)
    assert numbers.get("checkpoints") == len(s["save_steps"]), (where, g)
    # The trainer's loop, walked without a model.
    dry = train_dry(rf)
    assert dry["plan"] == s, where
    assert dry["final_step"] == s["total_steps"], (where, dry["final_step"])
    assert dry["save_steps"] == s["save_steps"], (where, dry["save_steps"])
    if dry["saves"]:
        assert dry["saves"][-1]["final"] and all(not x["final"] for x in dry["saves"][:-1]), (where, dry["saves"])
    # The launcher: the step it judges completion by, and the saves it expects.
    launch = cli_json("launch", str(rf), "--dry-run", "--json")
    assert launch["final_step"] == s["total_steps"], (where, launch)
    assert launch["save_steps"] == s["save_steps"], (where, launch)
    return s


@pytest.fixture(scope="module")
def train_dry():
    """evenkeel.train's --dry-run in this process (importing torch once, not 300 times);
    a few cases also go through the real command line below."""
    from evenkeel import RunFile
    from evenkeel.train import dry_run
    return lambda rf: dry_run(RunFile(str(rf)))


def test_plan_gate_trainer_and_launcher_agree_on_300_random_runs(tmp_path, train_dry):
    rng = random.Random(SEED)
    packs: dict = {}
    seen = {"capped": 0, "uncapped": 0, "spread": 0, "pad": 0, "save_every_0": 0, "multi_epoch": 0}
    for i in range(N_RUNS):
        rf = draw_run(rng, i, tmp_path, packs, trained=False, model=None)
        s = check_agreement(rf, train_dry)
        full = s["steps_per_epoch"] * s["epochs"]
        seen["capped" if s["total_steps"] < full else "uncapped"] += 1
        seen["spread"] += s["global_max_blocks"] != s["global_min_blocks"]
        seen["pad"] += s["evenfix"] == "pad"
        seen["save_every_0"] += "save_every = 0" in rf.read_text()
        seen["multi_epoch"] += s["epochs"] > 1
    # The generator covered what it claims to.
    assert all(v >= 20 for v in seen.values()), seen
    print(f"{N_RUNS} run files over {len(packs)} packs agree: {seen}")


def test_the_trainers_dry_run_command_prints_the_plans_schedule(tmp_path, train_dry):
    rng = random.Random(SEED + 1)
    packs: dict = {}
    for i in range(4):
        rf = draw_run(rng, i, tmp_path, packs, trained=False, model=None)
        p = subprocess.run([sys.executable, "-m", "evenkeel.train", str(rf), "--dry-run"], capture_output=True,
                           text=True, timeout=120, env=child_env(), cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout) == train_dry(rf), rf


def test_twenty_random_runs_train_through_launch_and_end_at_the_plans_last_step(launch_model, tmp_path):
    # The runs are drawn first, in the generator's order, then launched LAUNCHES_AT_ONCE at a
    # time: a launch spends most of its wall time waiting on its ranks' start (torch's
    # import), the gate exchange and checkpoint writes, so two overlap on two cores. Each
    # run has its own folder, pack and checkpoint dir, and a one-node launch is torchrun
    # --standalone (a free port), so concurrent launches share nothing.
    rng = random.Random(SEED + 2)
    packs: dict = {}
    runs = [draw_run(rng, i, tmp_path, packs, trained=True, model=launch_model) for i in range(N_TRAINED)]

    def launch(rf: Path):
        return subprocess.run([EVENKEEL, "launch", str(rf), "--json"], capture_output=True, text=True, timeout=600,
                              env=child_env(), cwd=rf.parent, start_new_session=True)

    with ThreadPoolExecutor(max_workers=LAUNCHES_AT_ONCE) as pool:
        launched = list(pool.map(launch, runs))
    for rf, p in zip(runs, launched):
        plan = cli_json("plan", str(rf), "--json")["schedule"]
        where = f"{rf}:\n{rf.read_text()}\nplan: {json.dumps(plan)}\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
        assert p.returncode == 0, where
        summary = json.loads([ln for ln in p.stdout.splitlines() if '"attempt_records"' in ln][-1])
        assert summary["attempts"] == 1, where
        assert summary["steps"] == summary["planned_steps"] == plan["total_steps"], where
        final = Path(summary["final_checkpoint"])
        assert final.name == f"step-{plan['total_steps']:08d}", where
        meta = json.loads((final / "evenkeel-checkpoint.json").read_text())
        assert meta["final"] and meta["step"] == plan["total_steps"], where
        kept = sorted(d.name for d in (rf.parent / "ckpt").glob("step-*"))
        keep = int([ln for ln in rf.read_text().splitlines() if ln.startswith("keep = ")][0].split("=")[1])
        expected = [f"step-{s:08d}" for s in plan["save_steps"]][-keep:]
        assert kept == expected, (where, kept, expected)
