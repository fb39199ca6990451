#!/usr/bin/env python3
"""Records real gloo flight-recorder dumps of the reference trainer failing in each
phase, for the analyzer's tests (testdata/fr/gloo/<case>/rank_0, rank_1).

Each case runs the real trainer (evenkeel.train, FSDP2 over gloo, the tiny Qwen3 of
tests/trainer) as 2 CPU processes with TORCH_FR_BUFFER_SIZE=2000, checkpoints every 2
steps, and makes one rank raise a Python exception after the first checkpoint:

    forward       rank 1, step 3: a pre-forward hook on the last decoder layer raises
    backward      rank 0, step 3: a gradient hook on the first decoder layer's output raises
    optimizer     rank 1, step 3: AdamW.step raises (after clip_grad_norm_'s all_reduce)
    save_gather   rank 0, step 4's save: the 4th DTensor.full_tensor() of the save raises
    save_write    rank 0, step 4's save: safetensors' save_file raises OSError ENOSPC
    barrier       rank 1, step 4: raises on its way into the save barrier
    deadlock      no exception: evenfix off, blocks [12, 8]; rank 1 runs out of data
                  after step 4 and enters the final save's barrier while rank 0 goes on
                  to step 5's forward all_gather (the field report's desync)

The faulting rank's trainer logs the error, writes its dump and exits 1; the other
rank's collective then fails (the peer closed its connection) or times out (15 s),
and it writes its dump too. The faults are injected here, by patching functions of
evenkeel.train before calling its main(): the product carries no test hook.

Usage (what made testdata/fr/gloo/, PyTorch 2.15.0 from PyPI, ~1 min per case):
    .venv/bin/python tools/fr/record_gloo_dumps.py testdata/fr/gloo [CASE ...]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SEQ = 32
VOCAB = 512

# case -> (faulting rank, step, blocks per rank, run-file overrides)
CASES = {
    "forward": (1, 3, [8, 8], {}),
    "backward": (0, 3, [8, 8], {}),
    "optimizer": (1, 3, [8, 8], {}),
    "save_gather": (0, 4, [8, 8], {}),
    "save_write": (0, 4, [8, 8], {}),
    "barrier": (1, 4, [8, 8], {}),
    "deadlock": (-1, -1, [12, 8], {"evenfix": {"mode": "off"}, "train": {"save_every": 0}}),
}


class InjectedFault(RuntimeError):
    pass


def child(case: str, fault_rank: int, fault_step: int, run_file: str) -> int:
    """One rank: patch evenkeel.train, then run its main()."""
    import errno

    import torch
    import evenkeel.train as train
    from torch.distributed.tensor import DTensor

    rank = int(os.environ["RANK"])
    armed = rank == fault_rank
    where = {"phase": "init", "step": -1}
    saves = {"gathers": 0}

    def hit(phase: str) -> bool:
        return armed and where["phase"] == phase and where["step"] == fault_step

    real_enter = train.Progress.enter

    def enter(self, phase, detail="", step=None):
        real_enter(self, phase, detail, step)
        where["phase"], where["step"] = phase, step
        if phase == "save" and step == fault_step:
            saves["gathers"] = 0
        if case == "barrier" and hit("save_barrier"):
            raise InjectedFault(f"injected fault on rank {rank} on its way into the save barrier of step {step}")

    train.Progress.enter = enter

    real_load = train.load_sharded

    def load_sharded(*args, **kwargs):
        model = real_load(*args, **kwargs)
        layers = model.model.layers
        if case == "forward":
            def pre(_module, _inputs):
                if hit("forward"):
                    raise InjectedFault(f"injected fault on rank {rank} in the forward of step {fault_step}")
            layers[-1].register_forward_pre_hook(pre)
        if case == "backward":
            def post(_module, _inputs, output):
                if hit("forward"):  # hooks the output now; it fires during this step's backward
                    out = output[0] if isinstance(output, tuple) else output

                    def grad_hook(_g):
                        raise InjectedFault(f"injected fault on rank {rank} in the backward of step {fault_step}")
                    out.register_hook(grad_hook)
            layers[0].register_forward_hook(post)
        return model

    train.load_sharded = load_sharded

    if case == "optimizer":
        real_step = torch.optim.AdamW.step

        def step(self, *args, **kwargs):
            if hit("optimizer"):
                raise InjectedFault(f"injected fault on rank {rank} in the optimizer step {fault_step}")
            return real_step(self, *args, **kwargs)
        torch.optim.AdamW.step = step

    if case == "save_gather":
        real_full = DTensor.full_tensor

        def full_tensor(self, *args, **kwargs):
            if hit("save"):
                saves["gathers"] += 1
                if saves["gathers"] == 4:
                    raise InjectedFault(f"injected fault on rank {rank} in the save's 4th gather (step {fault_step})")
            return real_full(self, *args, **kwargs)
        DTensor.full_tensor = full_tensor

    if case == "save_write":
        import safetensors.torch as st
        real_save = st.save_file

        def save_file(tensors, filename, *args, **kwargs):
            if hit("save"):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), filename)
            return real_save(tensors, filename, *args, **kwargs)
        st.save_file = save_file

    code = train.main([run_file])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def record(case: str, out: Path, model: Path, work: Path) -> None:
    sys.path.insert(0, str(REPO / "tests" / "trainer"))
    from packs import TOKENIZER_DIRS, child_env, free_port, make_pack, write_run_file

    fault_rank, fault_step, blocks, over = CASES[case]
    tmp = work / case
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    pack = make_pack(tmp / "pack", blocks, seq_len=SEQ, vocab=VOCAB,
                     tokenizer=TOKENIZER_DIRS["qwen3"] / "tokenizer.json")
    sections = {
        "run": {"name": f"fr-{case}"},
        "cluster": {"nodes": 1, "gpus_per_node": 2},
        "data": {"pack_dir": str(pack)},
        "model": {"path": str(model)},
        "train": {"seq_len": SEQ, "micro_batch": 1, "grad_accum": 2, "epochs": 1, "warmup_steps": 1,
                  "save_every": 2, "lr": 3e-3, "seed": 1, "max_grad_norm": 1.0},
        "checkpoint": {"dir": str(tmp / "ckpt"), "keep": 2, "shard_size_gb": 0.01},
        "evenfix": {"mode": "min"},
        "distributed": {"backend": "gloo", "watchdog_timeout_min": 0.25},
    }
    for section, keys in over.items():
        sections[section].update(keys)
    rf = write_run_file(tmp / "run.toml", sections)
    dest = out / case
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    port = str(free_port())
    procs = []
    for r in range(2):
        env = child_env(RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), LOCAL_WORLD_SIZE="2",
                        MASTER_ADDR="127.0.0.1", MASTER_PORT=port, TORCH_FR_BUFFER_SIZE="2000",
                        TORCH_FR_DUMP_TEMP_FILE=str(dest / "rank_"))
        log = open(tmp / f"rank-{r}.log", "w")
        procs.append(subprocess.Popen([sys.executable, __file__, "--child", case, str(fault_rank),
                                       str(fault_step), str(rf)], env=env, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True))
    t0 = time.monotonic()
    for p in procs:
        try:
            p.wait(timeout=max(1, 300 - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    codes = [p.returncode for p in procs]
    errors = []
    for r in range(2):
        text = (tmp / f"rank-{r}.log").read_text()
        errors += [line for line in text.splitlines() if "] error in " in line or "flight recorder" in line]
    dumps = sorted(os.listdir(dest))
    print(f"{case}: exit codes {codes}, {time.monotonic() - t0:.0f}s, dumps {dumps}")
    for line in errors:
        print(f"  {line}")
    (dest / "README").write_text(
        f"tools/fr/record_gloo_dumps.py {case}: "
        + (f"rank {fault_rank} raises at step {fault_step}" if fault_rank >= 0 else "evenfix off, blocks [12, 8]")
        + f"\nexit codes {codes}\n" + "\n".join(errors) + "\n")
    if dumps != ["rank_0", "rank_1"]:
        raise SystemExit(f"{case}: expected a dump from each rank, got {dumps}; logs in {tmp}")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("cases", nargs="*", help=f"some of {', '.join(CASES)} (default: all)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs, checkpoints)")
    args = ap.parse_args()
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case {unknown[0]!r}; the cases are {', '.join(CASES)}")
    args.cases = args.cases or list(CASES)
    work = Path(tempfile.mkdtemp(prefix="fr-record-"))
    sys.path.insert(0, str(REPO / "tests" / "trainer"))
    from packs import make_tiny_model
    model = make_tiny_model("qwen3", work / "tiny-qwen3")
    for case in args.cases:
        record(case, args.out.resolve(), model, work)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"work folder: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
