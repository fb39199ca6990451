#!/usr/bin/env python3
"""The reference trainer with one fault injected per attempt, for the precision
table (tests/launch/test_precision.py). `evenkeel launch` runs it as the run
file's `launch.trainer`: it patches functions of evenkeel.train (as
tools/fr/record_gloo_dumps.py does), then calls evenkeel.train.main(). The
product carries no test hook.

The faults come from the JSON file named by EK_PRECISION_PLAN, keyed by the
attempt (EVENKEEL_ATTEMPT, which the launcher sets):

    {"1": {"kind": "raise", "rank": 1, "phase": "forward", "step": 1}, "2": {...}}

A fault's `step` counts from the checkpoint the attempt resumes from (the
launcher's EVENKEEL_RESUME_FROM): step 1 is the attempt's first step. With
`abs_step` it is the run's global step instead. Kinds:

  raise     an exception in `phase` on `rank`: load (before the weights are read),
            forward, backward, optimizer, save_stage (staging the save's state,
            on the training thread), save_write (safetensors' save_file of the
            bf16 export, on the save's background thread: raised at the rank's
            next step), barrier (on the way into the save barrier)
  signal    `signal` (SIGKILL, SIGINT, SIGTERM, SIGSTOP) to `rank` at `point`:
            before_save (the forward of `step`), during_save (rank 0 in the save's
            background write, another rank staging its state), after_save (the forward of the
            step after `step`'s save, once that save is in place). The signal is sent from outside, by the
            test: this rank writes a request naming its pid into EK_PRECISION_SIGNALS
            and waits; the test checks that pid against the rank's heartbeat file
            and sends it.
  act       `actions` on `rank` when it enters `when` (save, forward) of `step`,
            then training goes on: the model or pack directory disappears under
            the running attempt, the launcher's folders become immutable
  none      nothing (the `before` actions only)

`before` (any kind): actions rank `before_rank` (default 0) runs before main().
Actions: ["chattr", "+i" or "-i", PATH], ["rename_away", PATH] (to PATH.gone),
["restore", PATH] (PATH.gone back). A fault whose moment never comes makes the
rank fail, so a case that missed its point fails instead of passing unseen.
"""
from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time

if __name__ == "__main__":
    gc.disable()  # as evenkeel.train's own __main__: no collection during the start-up


class InjectedFault(RuntimeError):
    pass


def _resumed_step() -> int:
    handed = os.environ.get("EVENKEEL_RESUME_FROM", "none")
    if handed in ("", "none"):
        return 0
    return int(os.path.basename(handed.rstrip("/")).split("-")[-1])


def _act(actions: list) -> None:
    for action in actions:
        if action[0] == "chattr":
            subprocess.run(["chattr", action[1], action[2]], check=True, capture_output=True)
        elif action[0] == "rename_away":
            os.rename(action[1], action[1] + ".gone")
        elif action[0] == "restore":
            if os.path.exists(action[1] + ".gone"):
                os.rename(action[1] + ".gone", action[1])
        else:
            raise SystemExit(f"precision_trainer: unknown action {action!r}")


def _ask_for_signal(rank: int, name: str, where: str) -> None:
    """Asks the test to send `name` to this process and waits for it."""
    folder = os.environ["EK_PRECISION_SIGNALS"]
    req = os.path.join(folder, f"rank-{rank}.json")
    tmp = f"{req}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"pid": os.getpid(), "signal": name, "where": where}, f)
    os.replace(tmp, req)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # a stop signal freezes us here; the others end us here
        time.sleep(0.05)
    raise InjectedFault(f"precision_trainer: {name} was asked for at {where} and never came")


def main() -> int:
    import torch
    import evenkeel.train as train
    from evenkeel import RunFile

    plan = {}
    if os.environ.get("EK_PRECISION_PLAN"):
        with open(os.environ["EK_PRECISION_PLAN"], encoding="utf-8") as f:
            plan = json.load(f)
    fault = plan.get(os.environ.get("EVENKEEL_ATTEMPT", "0"), {"kind": "none"})
    rank = int(os.environ["RANK"])
    if rank == fault.get("before_rank", 0):
        _act(fault.get("before", []))
    kind = fault["kind"]
    armed = kind != "none" and rank == fault.get("rank", 0)
    base = _resumed_step()
    at = fault["abs_step"] if "abs_step" in fault else base + fault.get("step", 1)
    where = {"phase": "init", "step": -1}
    fired = {"done": False}

    def fire(description: str) -> None:
        fired["done"] = True
        if kind == "raise":
            raise InjectedFault(f"injected fault on rank {rank} {description}")
        _ask_for_signal(rank, fault["signal"], description)

    real_enter = train.Progress.enter

    def enter(self, phase, detail="", step=None):
        real_enter(self, phase, detail, step)
        where["phase"], where["step"] = phase, step
        if not armed or fired["done"]:
            return
        if kind == "act" and phase == fault["when"] and step == at:
            fired["done"] = True
            _act(fault["actions"])
        if kind == "raise" and fault["phase"] == "barrier" and phase == "save_barrier" and step == at:
            fire(f"on its way into the save barrier of step {step}")
        if kind == "signal" and phase == "forward":
            if fault["point"] == "before_save" and step == at:
                fire(f"in the forward of step {step}")
            if fault["point"] == "after_save" and step == at + 1:
                # After the save has landed: it is written in the background, and a signal
                # before it is in place is a signal during the save.
                landed = os.path.join(RunFile(sys.argv[1]).checkpoint.dir, f"step-{at:08d}")
                deadline = time.monotonic() + 60
                while not os.path.isdir(landed) and time.monotonic() < deadline:
                    time.sleep(0.02)
                fire(f"in the forward of step {step}, after the save of step {at}")

    train.Progress.enter = enter

    def hit(phase: str) -> bool:
        return armed and not fired["done"] and where["phase"] == phase and where["step"] == at

    real_load = train.load_sharded

    def load_sharded(*args, **kwargs):
        if armed and kind == "raise" and fault["phase"] == "load":
            fire("while loading the model")
        model = real_load(*args, **kwargs)
        layers = model.model.layers
        if kind == "raise" and fault["phase"] == "forward":
            def pre(_module, _inputs):
                if hit("forward"):
                    fire(f"in the forward of step {at}")
            layers[-1].register_forward_pre_hook(pre)
        if kind == "raise" and fault["phase"] == "backward":
            def post(_module, _inputs, output):
                if hit("forward"):  # hooks the output now; it fires during this step's backward
                    out = output[0] if isinstance(output, tuple) else output

                    def grad_hook(_g):
                        if not fired["done"]:
                            fire(f"in the backward of step {at}")
                    out.register_hook(grad_hook)
            layers[0].register_forward_hook(post)
        return model

    train.load_sharded = load_sharded

    if kind == "raise" and fault["phase"] == "optimizer":
        real_step = torch.optim.AdamW.step

        def step(self, *args, **kwargs):
            if hit("optimizer"):
                fire(f"in the optimizer step {at}")
            return real_step(self, *args, **kwargs)
        torch.optim.AdamW.step = step

    import evenkeel.state as state
    real_state_dict = state.state_dict

    def state_dict(*args, **kwargs):  # the save's staging, on the training thread
        if hit("save"):
            if kind == "raise" and fault["phase"] == "save_stage":
                fire(f"staging the save's state (step {at})")
            if kind == "signal" and fault["point"] == "during_save" and rank != 0:
                fire(f"staging the save's state (step {at})")
        return real_state_dict(*args, **kwargs)
    state.state_dict = state_dict

    import safetensors.torch as st
    real_save = st.save_file

    def save_file(tensors, filename, *args, **kwargs):  # the bf16 export, on the save's background thread
        if armed and not fired["done"] and f".step-{at:08d}.tmp-" in filename:
            if kind == "raise" and fault["phase"] == "save_write":
                fire(f"writing {os.path.basename(filename)} (step {at})")
            if kind == "signal" and fault["point"] == "during_save" and rank == 0:
                fire(f"writing {os.path.basename(filename)} (step {at})")
        return real_save(tensors, filename, *args, **kwargs)
    st.save_file = save_file

    code = train.main([sys.argv[1], *sys.argv[2:]])
    if armed and not fired["done"]:
        sys.stdout.write(f"[rank {rank}] precision_trainer: the fault {fault} never fired\n")
        code = code or 3
    return code


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as evenkeel.train's own __main__: skip torch's slow teardown
