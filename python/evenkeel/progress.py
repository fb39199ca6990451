"""Where a rank is: its phase and step, so a failed collective can say what the rank
was doing (`error in save_barrier (after step 35) after 900.0s at step 35`), and its
`[rank R] ...` lines.

    progress = Progress(rank, heartbeat)
    progress.enter("forward", "step 36, micro-batch 0", 36)
    progress.log("saved ...")

The heartbeat, when there is one, carries the same phase to the agent and the watcher
(docs/heartbeat_format.md).
"""

from __future__ import annotations

import sys
import time

from evenkeel.heartbeat import Heartbeat

__all__ = ["Progress", "Refused"]


class Refused(Exception):
    """A contradiction or refusal found before training (a tokenizer mismatch, a world
    that is not the pack's, a handed checkpoint that does not verify): the trainer exits
    2 on every rank, which the launcher does not retry."""


class Progress:
    def __init__(self, rank: int, heartbeat: Heartbeat | None = None):
        self.rank = rank
        self.phase = "init"
        self.phase_since = time.monotonic()
        self.global_step = 0
        self.heartbeat = heartbeat
        self.saver = None  # the trainer's evenkeel.saver.Saver, once it has one

    def enter(self, phase: str, detail: str = "", step: int | None = None) -> None:
        """Phase `phase` of step `step` (forward of step 36; save_barrier after step 35)."""
        self.phase = f"{phase} ({detail})" if detail else phase
        self.phase_since = time.monotonic()
        if self.heartbeat is not None:
            self.heartbeat.set_phase(phase, step)

    def log(self, msg: str) -> None:
        sys.stdout.write(f"[rank {self.rank}] {msg}\n")  # one write: ranks may share a pipe
        sys.stdout.flush()
