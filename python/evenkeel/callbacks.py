"""The reference trainer's extension point: callbacks called around its loop, as
torchtitan's and Lightning's are. The product's own loop needs none; tests use them
to stop an attempt early, log the blocks each rank trains on, or save fp32 weights
(tests/trainer/hooked_trainer.py), without a flag for it in the trainer.

    class StopAfter(Callback):
        def on_step_end(self, state, step):
            return step.step >= 5          # True ends this attempt here, as an interruption would

    evenkeel.train.main(["run.toml"], callbacks=[StopAfter()])

Order on each rank: on_train_start once the model is loaded (still the `load` phase),
on_step_end after every optimizer step and its save, on_train_end when the run's last
step is done (not when a callback stopped the attempt), before the heartbeat's done.
An exception from a callback is the trainer's: it is reported with the phase and the
rank exits 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["Callback", "StepEnd", "TrainState"]


@dataclass
class TrainState:
    """What a callback may read: the run file, the plan, the sharded model, this rank's
    progress (`progress.log` prints a `[rank R]` line) and its step count."""
    cfg: Any          # evenkeel.RunFile
    plan: Any         # evenkeel.Plan
    model: Any        # the FSDP2-sharded model
    progress: Any     # evenkeel.progress.Progress
    rank: int
    world: int
    total_steps: int  # this rank's last step


@dataclass
class StepEnd:
    """One optimizer step, done: where it is in the schedule, its loss and learning
    rate, the tokens seen so far, the blocks this rank trained on (file indices, in
    micro-batch order) and the checkpoint written after it, if any."""
    epoch: int
    step_in_epoch: int
    step: int
    loss: float
    lr: float
    tokens_seen: int
    blocks: Sequence[int]
    saved: str | None


class Callback:
    def on_train_start(self, state: TrainState) -> None:
        pass

    def on_step_end(self, state: TrainState, step: StepEnd) -> bool | None:
        """True ends this attempt after `step` (exit 0, the run not complete)."""
        return None

    def on_train_end(self, state: TrainState) -> None:
        pass
