#!/usr/bin/env python3
"""A simulated trainer rank for the watch tests: beats like a real rank through
evenkeel.heartbeat.Heartbeat (loaded from python/evenkeel/heartbeat.py, so the
test needs no torch), optionally saves checkpoints as the reference trainer
does (rank 0 fills .step-NNNNNNNN.tmp-PID and finalizes it through evenkeel's
extension, python/evenkeel/checkpoint.py's path), and can
misbehave on cue: stop beating while alive (a hang), slow down (throughput).

Control by file: if --control FILE exists and holds "resume", a rank stopped by
--stop-at carries on (used to clear a hang)."""

import argparse
import glob
import importlib.util
import json
import os
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HB_PATH = os.path.join(HERE, "..", "..", "python", "evenkeel", "heartbeat.py")


def load_heartbeat():
    spec = importlib.util.spec_from_file_location("evenkeel_heartbeat", HB_PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Heartbeat


def load_core():
    """evenkeel._core without importing the package (whose __init__ imports torch)."""
    spec = importlib.util.find_spec("evenkeel")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the evenkeel package is not importable (run with the project's venv python)")
    found = glob.glob(os.path.join(spec.submodule_search_locations[0], "_core*.so"))
    if not found:
        raise RuntimeError(f"no evenkeel/_core*.so under {spec.submodule_search_locations[0]}")
    core_spec = importlib.util.spec_from_file_location("evenkeel._core", found[0])
    mod = importlib.util.module_from_spec(core_spec)
    core_spec.loader.exec_module(mod)
    return mod


def safetensors(n_bytes):
    """A one-tensor safetensors file of n_bytes of F32 data."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [n_bytes // 4], "data_offsets": [0, n_bytes]}}).encode()
    return struct.pack("<Q", len(header)) + header + b"w" * n_bytes


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--local-rank", type=int, required=True)
    p.add_argument("--steps", type=int, default=1000000)
    p.add_argument("--total-steps", type=int, default=0)
    p.add_argument("--step-s", type=float, default=0.2)
    p.add_argument("--tokens-per-step", type=int, default=16384)
    p.add_argument("--stop-at", type=int, default=-1, help="stop beating (stay alive) after this step")
    p.add_argument("--control", default="")
    p.add_argument("--ckpt-dir", default="")
    p.add_argument("--ckpt-at", type=int, default=-1, help="checkpoint after this step (and at the end)")
    p.add_argument("--ckpt-s", type=float, default=0.5)
    p.add_argument("--linger-s", type=float, default=0, help="stay alive after the last step")
    a = p.parse_args()

    Heartbeat = load_heartbeat()
    hb = Heartbeat(dir=a.dir, rank=a.rank, local_rank=a.local_rank, total_steps=a.total_steps,
                   min_interval_s=0)
    tokens = 0

    def save(step):
        # Every rank waits in the save (the barrier); rank 0 writes the file.
        with hb.phase("checkpoint"):
            time.sleep(a.ckpt_s / 2)
            if a.rank == 0 and a.ckpt_dir:
                core = load_core()
                os.makedirs(a.ckpt_dir, exist_ok=True)
                final = os.path.join(a.ckpt_dir, f"step-{step:08d}")
                tmp = os.path.join(a.ckpt_dir, f".step-{step:08d}.tmp-{os.getpid()}")
                os.makedirs(tmp)
                with open(os.path.join(tmp, "model.safetensors"), "wb") as f:
                    f.write(safetensors(4096))
                time.sleep(a.ckpt_s / 2)
                meta = {"format_version": 1, "created": "", "evenkeel_version": "", "files": [], "extra": {},
                        "dtype": "float32", "step": step, "epoch": 0, "step_in_epoch": step,
                        "epoch_complete": step == a.total_steps, "final": step == a.total_steps,
                        "tokens_seen": tokens,
                        # A simulated run has no run file or pack to name.
                        "run": {"name": "sim", "path": "", "xxh3": "0000000000000000"},
                        "pack": {"dir": "", "manifest_xxh3": "0000000000000000", "world": 0, "seq_len": 0}}
                core.finalize_checkpoint(tmp, final, json.dumps(meta))
            else:
                time.sleep(a.ckpt_s / 2)

    for step in range(1, a.steps + 1):
        time.sleep(a.step_s)
        tokens += a.tokens_per_step
        hb.beat(step, tokens)
        if step == a.stop_at:
            while not (a.control and os.path.exists(a.control)
                       and open(a.control).read().strip() == "resume"):
                time.sleep(0.05)
        if step == a.ckpt_at:
            save(step)
    if a.ckpt_dir and a.ckpt_at != a.steps:
        save(a.steps)
    hb.done()
    time.sleep(a.linger_s)
    sys.exit(0)


if __name__ == "__main__":
    main()
