"""Rank 0's training metrics: one JSON line per logged step in
CHECKPOINT_DIR/train-metrics.jsonl (`evenkeel report` draws tokens/s, step and loss from
it) and the `step N epoch E loss L lr X tok/s T` line.

    metrics = Metrics(ckpt_dir, tokens_per_step, log_every, total_steps, start_step)
    line = metrics.record(step, epoch, loss, lr, tokens_seen)   # None when not logged

A step is logged every `log_every` steps and at the final step; tok/s is over the steps
since the last logged one (docs/trainer.md, "Output").
"""

from __future__ import annotations

import json
import os
import time

__all__ = ["Metrics"]

FILE = "train-metrics.jsonl"


class Metrics:
    def __init__(self, ckpt_dir: str, tokens_per_step: int, log_every: int, total_steps: int, start_step: int = 0):
        os.makedirs(ckpt_dir, exist_ok=True)
        self.path = os.path.join(ckpt_dir, FILE)
        self._file = open(self.path, "a", encoding="utf-8")
        self.tokens_per_step, self.log_every, self.total_steps = tokens_per_step, log_every, total_steps
        self._last_t, self._last_step = time.monotonic(), start_step
        self.attempt = int(os.environ.get("EVENKEEL_ATTEMPT", "0") or 0)

    def record(self, step: int, epoch: int, loss: float, lr: float, tokens: int) -> str | None:
        """Appends step `step`'s line when it is logged; returns the log line, or None."""
        if step % self.log_every != 0 and step != self.total_steps:
            return None
        now = time.monotonic()
        rate = (step - self._last_step) * self.tokens_per_step / max(1e-9, now - self._last_t)
        self._last_t, self._last_step = now, step
        self._file.write(json.dumps({"time": round(time.time(), 3), "step": step, "epoch": epoch,
                                     "loss": round(loss, 6), "lr": lr, "tok_s": round(rate, 1),
                                     "tokens": tokens, "attempt": self.attempt}) + "\n")
        self._file.flush()
        return f"step {step} epoch {epoch} loss {loss:.4f} lr {lr:.3g} tok/s {rate:,.0f}"

    def close(self) -> None:
        self._file.close()
