"""Per-rank heartbeat for evenkeel's agent and watcher (docs/watch.md).

    from evenkeel.heartbeat import Heartbeat
    hb = Heartbeat(total_steps=total_steps)      # dir from EVENKEEL_HEARTBEAT_DIR
    for step in ...:
        ...
        hb.beat(step, tokens)                     # once per optimizer step
    hb.set_phase("forward", step + 1)             # what the rank is doing, and for which step
    with hb.phase("save", step):                  # a save: the watcher allows for it
        save_checkpoint(...)
    hb.training_started()                         # the first step begins (after load, resume)
    hb.add_save_blocked(seconds)                  # a save held training up this long
    hb.done()                                     # a clean exit, not a crash

Each rank owns one small file, DIR/rank-<RANK>.json (about 300 bytes), rewritten
whole through a temporary file and os.replace: a reader never sees half a beat.
That is four system calls per write (open, write, close, rename), no fsync (a
heartbeat that a power cut loses is worth nothing anyway). Writes are coalesced
to at most one per `min_interval_s`; what was held back is written by a
background thread within `min_interval_s`, so the file shows the phase a rank
blocked in even when it blocks right after changing phase (a collective that
never returns), and by close().

A write that fails (a full disk, EIO, a short write) never raises and never
reaches the final name: the heartbeat must not take the trainer down with it.
The file keeps the last good beat, one "evenkeel: warning:" line per run of
failures goes to stderr, and the next beat (or the background thread) tries
again.

The file carries the rank's step, its cumulative tokens, the wall time of the
beat and of the last step change, moving averages of step time and tokens/s,
the phase with the step it belongs to and when it began, the pid and
optionally the run's total steps (docs/heartbeat_format.md). The phases the
reference trainer reports: load, forward, backward, optimizer, save_barrier,
save, done.

For the launcher's goodput account (docs/launch.md "Goodput") it also carries
when the rank's process started (`started`: by default the process's start time
from /proc/self/stat, else the time evenkeel was imported), when its first
training step began (`train_start`, set by training_started()), and the seconds
its training was blocked by saves with the number of saves (`save_blocked_s`,
`saves`, added to by add_save_blocked()).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import sys
import threading
import time

__all__ = ["Heartbeat"]

_FORMAT_VERSION = 1
_IMPORTED_AT = time.time()  # the fallback for the process's start time


def process_start_time() -> float:
    """Wall time (Unix s) this process started: /proc/self/stat's starttime (clock ticks
    after boot) plus the boot time from /proc/stat; the time evenkeel.heartbeat was imported
    where /proc cannot say (not Linux)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read().decode()
        # The command name, field 2, is in parentheses and may hold spaces: split after it.
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])
        with open("/proc/stat") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        started = btime + ticks / os.sysconf("SC_CLK_TCK")
        # btime has a one-second resolution: never later than now, never after the import.
        return min(started, _IMPORTED_AT)
    except (OSError, ValueError, IndexError, StopIteration):
        return _IMPORTED_AT
_EWMA = 0.3  # weight of the newest interval in step_s and tok_s


def _env_int(*names: str) -> int | None:
    for n in names:
        v = os.environ.get(n)
        if v not in (None, ""):
            return int(v)
    return None


class Heartbeat:
    def __init__(self, dir: str | None = None, rank: int | None = None,
                 local_rank: int | None = None, total_steps: int | None = None,
                 min_interval_s: float = 0.2, started: float | None = None):
        self.dir = dir or os.environ.get("EVENKEEL_HEARTBEAT_DIR") or "/tmp/evenkeel-heartbeat"
        self.rank = rank if rank is not None else (_env_int("RANK") or 0)
        self.local_rank = (local_rank if local_rank is not None
                           else _env_int("LOCAL_RANK") if _env_int("LOCAL_RANK") is not None
                           else self.rank)
        if self.rank < 0 or self.local_rank < 0:
            raise ValueError(f"heartbeat: rank {self.rank} / local rank {self.local_rank} must be >= 0")
        self.total_steps = int(total_steps) if total_steps else 0
        self.min_interval_s = float(min_interval_s)
        self.started = float(started) if started is not None else process_start_time()
        self._train_start = 0.0  # 0: training_started() not called yet
        self._save_blocked_s = 0.0
        self._saves = 0
        self._failing = False  # a failure was reported and no write has succeeded since
        self.path = os.path.join(self.dir, f"rank-{self.rank}.json")
        self._tmp = os.path.join(self.dir, f".rank-{self.rank}.json.tmp.{os.getpid()}")
        self._host = socket.gethostname()
        self._step = -1
        self._tokens = 0
        self._phase = "train"
        self._phase_step = -1
        self._phase_time = time.time()
        self._beat_time = 0.0
        self._step_time = 0.0
        self._step_s = 0.0
        self._tok_s = 0.0
        self._written = 0.0
        self._dirty = False
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        try:
            os.makedirs(self.dir, exist_ok=True)
        except OSError as e:
            self._report("create directory", self.dir, e)
        self._write()  # the rank exists from the start, at step -1
        self._flusher = threading.Thread(target=self._flush_loop, name="evenkeel-heartbeat", daemon=True)
        self._flusher.start()

    def beat(self, step: int, tokens: int = 0) -> None:
        """Records that this rank finished `step`, having processed `tokens` in total."""
        with self._lock:
            self._beat(step, tokens)

    def _beat(self, step: int, tokens: int) -> None:
        now = time.time()
        step, tokens = int(step), int(tokens)
        if step != self._step:
            if self._step >= 0 and self._step_time > 0 and step > self._step:
                dt = now - self._step_time
                if dt > 0:
                    per_step = dt / (step - self._step)
                    rate = max(tokens - self._tokens, 0) / dt
                    a = _EWMA if self._step_s > 0 else 1.0
                    self._step_s = a * per_step + (1 - a) * self._step_s
                    self._tok_s = a * rate + (1 - a) * self._tok_s
            self._step_time = now
        self._step, self._tokens, self._beat_time = step, tokens, now
        self._dirty = True
        if now - self._written >= self.min_interval_s:
            self._write()
        else:
            self._wake.set()

    def training_started(self) -> None:
        """The first training step of this process begins now (after model load and resume)."""
        with self._lock:
            now = time.time()
            self._train_start = now
            self._beat_time = now
            self._dirty = True
            self._write()

    def add_save_blocked(self, seconds: float) -> None:
        """A save held this process's training up for `seconds`: added, and counted as a save."""
        seconds = float(seconds)
        if not seconds >= 0:  # NaN too
            raise ValueError(f"heartbeat: save_blocked seconds {seconds} must be >= 0")
        with self._lock:
            self._save_blocked_s += seconds
            self._saves += 1
            self._beat_time = time.time()  # when the save let training go on
            self._dirty = True
            self._write()

    @contextlib.contextmanager
    def phase(self, name: str, step: int | None = None):
        """Marks a stretch (a checkpoint save) during which the step does not advance."""
        old, old_step = self._phase, self._phase_step
        self.set_phase(name, step)
        try:
            yield self
        finally:
            self.set_phase(old, old_step)

    def set_phase(self, name: str, step: int | None = None) -> None:
        """Enters phase `name` of step `step` (forward of step 36: 36; save after step 35: 35)."""
        with self._lock:
            name = str(name)
            step = -1 if step is None else int(step)
            if name == self._phase and step == self._phase_step:
                return
            now = time.time()
            self._phase, self._phase_step, self._phase_time = name, step, now
            self._beat_time = now
            self._dirty = True
            if now - self._written >= self.min_interval_s or name == "done":
                self._write()
            else:
                self._wake.set()

    def done(self) -> None:
        """A clean end: the watcher reads the exit as completion, not a crash."""
        self.set_phase("done", self._step)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._dirty:
                self._write()
        self._wake.set()

    def _flush_loop(self) -> None:
        """Writes what a coalesced beat or phase change held back, within min_interval_s."""
        while True:
            self._wake.wait()
            if self._closed:
                return
            time.sleep(self.min_interval_s)
            with self._lock:
                self._wake.clear()
                if self._closed:
                    return
                if self._dirty:
                    try:
                        self._write()
                    except OSError:
                        pass  # the next beat tries again

    def __enter__(self) -> "Heartbeat":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def _write(self) -> None:
        """Writes the beat; on failure keeps the old file, reports once, stays dirty."""
        rec = {
            "v": _FORMAT_VERSION, "rank": self.rank, "local_rank": self.local_rank,
            "pid": os.getpid(), "host": self._host, "step": self._step, "tokens": self._tokens,
            "time": self._beat_time or time.time(), "step_time": self._step_time,
            "step_s": round(self._step_s, 6), "tok_s": round(self._tok_s, 3), "phase": self._phase,
            "phase_step": self._phase_step, "phase_time": round(self._phase_time, 3),
            "total_steps": self.total_steps, "started": round(self.started, 3),
            "save_blocked_s": round(self._save_blocked_s, 6), "saves": self._saves,
        }
        if self._train_start:
            rec["train_start"] = round(self._train_start, 3)
        data = json.dumps(rec, separators=(",", ":")).encode()
        op, target = "open", self._tmp
        try:
            fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            op = "write"
            try:
                view = memoryview(data)
                while view:  # os.write may write less than asked: write the rest
                    n = os.write(fd, view)
                    if n <= 0:
                        raise OSError(errno.EIO, "write made no progress")
                    view = view[n:]
            except BaseException:
                with contextlib.suppress(OSError):
                    os.close(fd)
                raise
            op = "close"
            os.close(fd)
            op, target = "rename to", self.path
            os.replace(self._tmp, self.path)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.unlink(self._tmp)
            self._report(op, target, e)
            return
        self._written = time.time()
        self._dirty = False
        self._failing = False

    def _report(self, op: str, target: str, e: OSError) -> None:
        if self._failing:
            return
        self._failing = True
        what = f"{self._tmp}: {op} {target}" if op == "rename to" else f"{target}: {op}"
        print(f"evenkeel: warning: heartbeat of rank {self.rank}: {what}: {e.strerror or e}; "
              f"{self.path} keeps the last good beat; retrying on the next beat",
              file=sys.stderr, flush=True)
