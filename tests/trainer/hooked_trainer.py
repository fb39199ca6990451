#!/usr/bin/env python3
"""The reference trainer with the tests' hooks, as callbacks on its loop
(evenkeel.callbacks): the product carries none of them.

    hooked_trainer.py RUN.toml [--stop-after N] [--log-blocks DIR] [--save-fp32 PATH] [trainer flags...]

  --stop-after N    end the attempt after step N (and its save), exit 0, as an
                    interruption would: for tests of resume
  --log-blocks DIR  append `step S: b0 b1 ...` (the block indices of the file this rank
                    trained on) to DIR/rank-R.txt after each step; DIR is made at the
                    start of training, in the load phase
  --save-fp32 PATH  when the run completes, rank 0 writes the full weights in fp32
                    (torch.save of {name: tensor}) to PATH

Everything else goes to evenkeel.train.main. Tests run it with tests/trainer/packs.py's
launch(..., trainer=HOOKED), or as the run file's launch.trainer under evenkeel launch.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys

if __name__ == "__main__":
    gc.disable()  # as evenkeel.train's own __main__: no collection during the start-up

from evenkeel.callbacks import Callback


class StopAfter(Callback):
    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, state, step):
        if step.step >= self.step and step.step < state.total_steps:
            state.progress.log(f"stopping after step {step.step} as asked (--stop-after); the run is not complete")
            return True
        return None


class LogBlocks(Callback):
    def __init__(self, folder: str):
        self.folder = folder
        self.file = None

    def on_train_start(self, state):
        os.makedirs(self.folder, exist_ok=True)
        self.file = open(os.path.join(self.folder, f"rank-{state.rank}.txt"), "a", encoding="utf-8")

    def on_step_end(self, state, step):
        self.file.write(f"step {step.step}: {' '.join(map(str, step.blocks))}\n")
        self.file.flush()

    def on_train_end(self, state):
        self.file.close()


class SaveFp32(Callback):
    def __init__(self, path: str):
        self.path = path

    def on_train_end(self, state):
        import torch
        from evenkeel.hf import iter_full_tensors
        weights = {}
        for name, full in iter_full_tensors(state.model):  # a gather per tensor: every rank takes part
            if state.rank == 0:
                weights[name] = full.detach().float().cpu().clone()
        if state.rank == 0:
            tmp = f"{self.path}.tmp.{os.getpid()}"
            torch.save(weights, tmp)
            os.replace(tmp, self.path)


def main(argv=None) -> int:
    import evenkeel.train as train
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--stop-after", type=int, default=0)
    p.add_argument("--log-blocks", default="")
    p.add_argument("--save-fp32", default="")
    hooks, rest = p.parse_known_args(sys.argv[1:] if argv is None else argv)
    callbacks = []
    if hooks.stop_after:
        callbacks.append(StopAfter(hooks.stop_after))
    if hooks.log_blocks:
        callbacks.append(LogBlocks(hooks.log_blocks))
    if hooks.save_fp32:
        callbacks.append(SaveFp32(hooks.save_fp32))
    return train.main(rest, callbacks=callbacks)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as evenkeel.train's own __main__: skip torch's slow teardown
