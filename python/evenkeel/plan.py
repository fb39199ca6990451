"""Plan: the run's schedule as the C++ core computes it (run::MakeSchedule).

    plan = Plan("run.toml")                 # block counts from data.pack_dir's manifest
    plan.total_steps, plan.steps_per_epoch, plan.save_steps, plan.is_save(500)
    plan.epoch_steps[e]                     # steps trained in epoch e (max_steps may cut one)
    plan.lr_factor(step)                    # warmup then cosine decay to min_lr_ratio
    for s in plan.walk(rank, start=resumed):   # the training loop's steps, saves marked
        s.epoch, s.step_in_epoch, s.step, s.save

There is no step arithmetic in Python: the gate, the launcher, the report and the
trainer read the same numbers (docs/run_format.md, "The schedule"). A node-local
pack whose manifest lacks other nodes' ranks takes every rank's block count in
`rank_blocks` (the trainer gathers them). A RunFile with overrides (--set) is
planned with them.
"""

from __future__ import annotations

import json
import math
import os
from typing import Iterator, NamedTuple, Sequence

from evenkeel import _core

__all__ = ["Plan", "PlanStep"]


class PlanStep(NamedTuple):
    """One optimizer step of the walk: its epoch, the steps done in that epoch once it
    is done (1-based), the global step, and whether a checkpoint is written after it."""
    epoch: int
    step_in_epoch: int
    step: int
    save: bool


class Plan:
    def __init__(self, run_file, rank_blocks: Sequence[int] | None = None):
        path = run_file.path if hasattr(run_file, "path") else os.fspath(run_file)
        self.run_path = path
        overrides = list(getattr(run_file, "overrides", ()))
        blocks = None if rank_blocks is None else [int(b) for b in rank_blocks]
        self._data = json.loads(_core.plan_schedule(path, blocks, overrides))
        d = self._data
        self.world: int = d["world"]
        self.epochs: int = d["epochs"]
        self.max_steps: int = d["max_steps"]
        self.evenfix: str = d["evenfix"]
        self.blocks_per_step: int = d["blocks_per_step"]
        self.seq_len: int = d["seq_len"]
        self.global_min_blocks: int = d["global_min_blocks"]
        self.global_max_blocks: int = d["global_max_blocks"]
        self.target_blocks: int = d["target_blocks"]
        self.steps_per_epoch: int = d["steps_per_epoch"]
        self.total_steps: int = d["total_steps"]
        self.epoch_steps: list[int] = list(d["epoch_steps"])
        self.save_steps: list[int] = list(d["save_steps"])
        self.warmup_steps: int = d["warmup_steps"]
        self.decay_end_step: int = d["decay_end_step"]
        self.tokens_per_step: int = d["tokens_per_step"]
        self.rank_blocks: list[int] = list(d["rank_blocks"])
        self.rank_steps_per_epoch: list[int] = list(d["rank_steps_per_epoch"])
        self.rank_total_steps: list[int] = list(d["rank_total_steps"])
        self.rank_save_steps: list[list[int]] = [list(x) for x in d["rank_save_steps"]]
        self._saves = frozenset(self.save_steps)
        self._rank_saves = [frozenset(x) for x in self.rank_save_steps]

    def is_save(self, step: int, rank: int | None = None) -> bool:
        """True when a checkpoint is written after global step `step` (on `rank`: with
        evenfix off each rank saves at its own epoch ends and last step)."""
        if rank is not None and self._rank_saves:
            return step in self._rank_saves[rank]
        return step in self._saves

    def walk(self, rank: int = 0, start: tuple[int, int, int] = (0, 0, 0)) -> Iterator[PlanStep]:
        """The training loop's control flow without the model: the steps `rank` trains
        from `start` (epoch, steps done in it, global step: where a checkpoint left off)
        to its last step, each with whether it is a save step. A start at an epoch's
        end continues with the next epoch. The trainer and its dry run both walk this."""
        steps_per_epoch, total = self.rank_steps_per_epoch[rank], self.rank_total_steps[rank]
        start_epoch, start_done, step = start
        for epoch in range(start_epoch, self.epochs):
            done = start_done if epoch == start_epoch else 0
            while done < steps_per_epoch and step < total:
                step += 1
                done += 1
                yield PlanStep(epoch, done, step, self.is_save(step, rank))

    def lr_factor(self, step: int, min_ratio: float) -> float:
        """The learning-rate multiplier for 0-based optimizer step `step`: linear warmup
        over warmup_steps, then cosine decay to `min_ratio` at decay_end_step."""
        warmup, end = self.warmup_steps, self.decay_end_step
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, end - warmup))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    def as_dict(self) -> dict:
        return json.loads(json.dumps(self._data))

    def __repr__(self) -> str:
        return (f"Plan({self.run_path!r}, steps_per_epoch={self.steps_per_epoch}, epochs={self.epochs}, "
                f"total_steps={self.total_steps}, saves={len(self.save_steps)})")
