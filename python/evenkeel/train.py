#!/usr/bin/env python3
"""The reference trainer: the field report's recipe on a real Hugging Face model,
driven by the run file alone (docs/trainer.md).

    torchrun --nnodes 2 --nproc-per-node 8 ... -m evenkeel.train RUN.toml
    python -m evenkeel.train RUN.toml --set train.lr=2e-5   # a run-file key, overridden
    python -m evenkeel.train RUN.toml --dry-run              # the step and save schedule as JSON

Top to bottom: build everything from the run file (read by the C++ parser the gate
runs), find the checkpoint to resume from, loop over the plan's steps calling
train_step, save at the plan's save steps behind the report's save barrier. The parts
are the evenkeel package's: inputs (pack, tokenizer match, evenfix, the plan: no step
arithmetic here), resume, hf (FSDP2 loading), checkpoint, heartbeat, metrics,
flight_recorder; callbacks are the loop's extension point (tests use them).

Exit codes: 0 done (or stopped by a callback), 1 a failure during training (its phase
named: `error in save_barrier (after step 35) after 900.0s at step 35: ...`), 2 refused
before training.
"""

from __future__ import annotations

import gc

if __name__ == "__main__":
    # A rank's start-up: no cyclic collection until training starts (start_up_done). The
    # imports (torch, torch.distributed.checkpoint, transformers' model classes) and the
    # model's build make millions of long-lived objects, and collecting while they are made
    # costs a rank about 0.8 s of its ~4.5 s import (measured on a 2-core machine): every
    # rank of every attempt pays it. trainer/train.py and the tests' wrappers do the same
    # before importing this module.
    gc.disable()

import argparse
import datetime
import json
import os
import sys
import time
import traceback
from typing import Sequence

import torch
import torch.distributed as dist

from evenkeel import Heartbeat, Plan, RunFile, _core, flight_recorder, state
from evenkeel.callbacks import Callback, StepEnd, TrainState
from evenkeel.hf import load_sharded
from evenkeel.inputs import open_pack
from evenkeel.metrics import Metrics
from evenkeel.progress import Progress, Refused
from evenkeel.resume import find_resume, layout_changes, resume_disagreement, start_of
from evenkeel.saver import SaveFailed, Saver

__all__ = ["dry_run", "main", "resume_disagreement", "train", "train_step"]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_file", help="run.toml (docs/run_format.md)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a run-file key, checked as the file's own (repeatable; not under evenkeel launch, "
                        "whose gate checked the file as written)")
    p.add_argument("--no-resume", action="store_true", help="ignore existing checkpoints")
    p.add_argument("--dry-run", action="store_true",
                   help="read the run file and the pack, print the step and save schedule as JSON, exit (no model, "
                        "no process group)")
    return p.parse_args(argv)


def start_up_done() -> None:
    """Training begins: the start-up's objects (modules, the model, the optimizer) move to
    the collector's permanent generation, where no collection scans them again, and
    collection is on (it was off for the start-up when this process began as a rank)."""
    gc.freeze()
    gc.enable()


def train_step(model, optimizer, scheduler, ds, blocks, t, device, progress: Progress, step: int) -> float:
    """One optimizer step over `blocks` (micro_batch x grad_accum of them): forward and
    backward per micro-batch, gradients reduced on the last, clipped, stepped. Returns
    the mean loss. With a loss mask, with isolated documents (whose first tokens are not
    targets) or with padding (bfd packs: never a target), the loss is the mean over the window's trained tokens (a
    micro-batch can hold few or none): each micro-batch's summed loss is divided by the
    window's count, as transformers does with num_items_in_batch."""
    isolated = ds.attention == "isolated"
    counted = ds.has_mask or isolated or ds.has_padding  # not every position of every block is a target
    trained = max(1, ds.trained_targets(blocks)) if counted else None
    implementation = getattr(model.config, "_attn_implementation", None)
    loss_sum = 0.0
    for micro in range(t.grad_accum):
        index = blocks[micro * t.micro_batch:(micro + 1) * t.micro_batch]
        # labels -100 where the loss mask is 0; isolated: position_ids, cu_seq_lens, max_length too
        inputs = ds.inputs(index, device=device, implementation=implementation)
        model.set_requires_gradient_sync(micro == t.grad_accum - 1)
        progress.enter("forward", f"step {step}, micro-batch {micro}", step)
        if trained is None:
            loss = model(**inputs).loss
            progress.enter("backward", f"step {step}, micro-batch {micro}", step)
            (loss / t.grad_accum).backward()
            loss_sum += loss.item()
        else:
            loss = model(**inputs, num_items_in_batch=torch.tensor(trained, device=device)).loss
            progress.enter("backward", f"step {step}, micro-batch {micro}", step)
            loss.backward()
            loss_sum += loss.item() * t.grad_accum
    progress.enter("optimizer", f"step {step}", step)
    if t.max_grad_norm > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), t.max_grad_norm)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss_sum / t.grad_accum


def attention_for(cfg: RunFile, device: torch.device) -> str | None:
    """The attention implementation of the run: with data.attention = "isolated", the
    one evenkeel.attention picks for `device` after refusing a model whose attention
    would cross document boundaries (Refused: exit 2); with "cross", the model's default."""
    if cfg.data.attention != "isolated":
        return None
    from transformers import AutoConfig

    from evenkeel.attention import IsolationRefused, check_isolation, isolated_implementation

    config = AutoConfig.from_pretrained(cfg.model.path)
    try:
        check_isolation(config)
    except IsolationRefused as e:
        raise Refused(f"{cfg.path}: data.attention = 'isolated': {e}") from None
    return isolated_implementation(config, device)


def resume_state(cfg: RunFile, progress: Progress, chosen: dict, model, opt, sched, start, tokens_seen) -> None:
    """Loads the chosen checkpoint's training state (fp32 parameters, AdamW moments,
    scheduler, RNG; resharded when the world changed) and checks that its data position
    is the manifest's."""
    t0 = time.monotonic()
    path = os.path.join(chosen["path"], state.STATE_DIR)
    saved_world = int(chosen["train_state"]["world"])
    data = state.load(path, model, opt, sched, saved_world=saved_world)
    want = {"epoch": start[0], "step_in_epoch": start[1], "step": start[2], "tokens_seen": tokens_seen}
    if data != want:
        raise RuntimeError(f"{path}: the training state's data position {data} is not the checkpoint's {want}")
    if progress.rank == 0:
        progress.log(f"resume: full training state from {path} (saved by {saved_world} ranks, loaded by "
                     f"{dist.get_world_size()}): AdamW moments, scheduler at step {sched.last_epoch}, RNG, data "
                     f"position; {time.monotonic() - t0:.1f}s")


def train(cfg: RunFile, progress: Progress, device: torch.device, callbacks: Sequence[Callback] = (),
          resume: bool = True) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    t, ckpt_dir = cfg.train, cfg.checkpoint.dir

    # Build: the data, the plan, the checkpoint to resume from.
    ds, pinned, plan = open_pack(cfg, rank, world)
    steps_per_epoch, total_steps = plan.rank_steps_per_epoch[rank], plan.rank_total_steps[rank]
    progress.log(f"blocks={ds.local_blocks} pinned={pinned} steps_per_epoch={steps_per_epoch} "
                 f"total_steps={total_steps} saves={len(plan.save_steps)} evenfix={cfg.evenfix.mode}")
    chosen = find_resume(progress, ckpt_dir, cfg.checkpoint.resume) if resume else None
    full = bool(chosen) and chosen.get("resume_level") == "full"  # weights and training state verified
    start, tokens_seen = start_of(chosen)
    layout = {"pinned_blocks": pinned, "micro_batch": t.micro_batch, "grad_accum": t.grad_accum,
              "seed": t.seed, "shuffle": t.shuffle}
    if chosen:
        progress.global_step = start[2]
        if changed := layout_changes(chosen, layout):
            progress.log(f"warning: resuming {chosen['path']} with a different data layout {changed}: "
                         "the block order does not continue exactly")
        if progress.global_step >= total_steps:
            progress.log(f"already complete: {chosen['path']} is step {progress.global_step} of {total_steps}")
            progress.enter("done")
            if cfg.watch.heartbeat_dir:
                Heartbeat(cfg.watch.heartbeat_dir, rank=rank, total_steps=total_steps).done()
            return

    # Documents attend within themselves only: refuse a model whose attention would not
    # (linear attention, ...) before any weight is read.
    implementation = attention_for(cfg, device)
    progress.enter("load")
    t0 = time.monotonic()
    model = load_sharded(cfg.model.path, device, precision=t.precision,
                         gradient_checkpointing=cfg.model.gradient_checkpointing,
                         weights_dir=chosen["path"] if chosen else None, attn_implementation=implementation)
    progress.log(f"model {cfg.model.path} ({type(model).__name__}, {sum(p.numel() for p in model.parameters()):,} "
                 f"params, precision {t.precision}, attention {cfg.data.attention}"
                 + (f" through {implementation}" if implementation else "") + f") loaded in {time.monotonic() - t0:.1f}s"
                 + (f"; resumed weights from {chosen['path']}: epoch {start[0]} step {start[1]} "
                    f"(global {start[2]})" if chosen else ""))
    # AdamW, linear warmup then cosine decay (the plan's). A full resume restores the
    # moments and the scheduler's step; weights only starts both afresh at the resumed step.
    opt = torch.optim.AdamW(model.parameters(), lr=t.lr, weight_decay=t.weight_decay)
    offset = 0 if full else start[2]
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: plan.lr_factor(s + offset, t.min_lr_ratio))
    if full:
        resume_state(cfg, progress, chosen, model, opt, sched, start, tokens_seen)
    elif chosen and rank == 0:
        progress.log(f"resume: weights only from {chosen['path']}: the AdamW moments and the scheduler start afresh")
    saver = Saver(ckpt_dir, cfg.model.path, shard_bytes=int(cfg.checkpoint.shard_size_gb * 1e9),
                  keep=cfg.checkpoint.keep, marker_timeout_s=60 * cfg.distributed.watchdog_timeout_min)
    progress.saver = saver  # main() lets a save in flight land when training fails

    def collect(call):
        """A saver call whose background failure is named in the phase of that save."""
        try:
            return call()
        except SaveFailed as e:
            progress.enter("save", f"step {e.step}, written in the background", e.step)
            raise
    pack = {"dir": cfg.data.pack_dir, "world": ds.world, "seq_len": ds.seq_len,
            "manifest_xxh3": _core.xxh3_file(os.path.join(cfg.data.pack_dir, "manifest.json"))}

    def save(epoch: int, step_in_epoch: int) -> str:
        step = progress.global_step
        t_blocked = time.monotonic()
        progress.enter("save", f"the previous save, before step {step}'s", step)
        done = collect(saver.wait)  # the previous save, if it is still being written (its failure raises)
        progress.enter("save_barrier", f"after step {step}", step)
        progress.log(f"save barrier at step {step}")
        dist.barrier()  # the report's save barrier: every rank must arrive here at the same step
        progress.enter("save", f"step {step}", step)
        manifest = {
            "step": step, "epoch": epoch, "step_in_epoch": step_in_epoch,
            "epoch_complete": step_in_epoch >= steps_per_epoch, "final": step >= total_steps,
            "tokens_seen": tokens_seen, "run": {"name": cfg.run.name, "path": cfg.path, "xxh3": cfg.xxh3},
            "pack": pack,
            "extra": {**layout, "total_steps": total_steps,
                      "blocks_consumed_per_rank": step_in_epoch * plan.blocks_per_step,
                      **({"overrides": cfg.overrides} if cfg.overrides else {})},
        }
        data = {"epoch": epoch, "step_in_epoch": step_in_epoch, "step": step, "tokens_seen": tokens_seen}
        path = saver.save(step, model, opt, sched, data, manifest)  # returns once the state is staged
        blocked = time.monotonic() - t_blocked
        if progress.heartbeat is not None:
            progress.heartbeat.add_save_blocked(blocked)  # only this stops training (goodput)
        log_saved(done)
        progress.log(f"save of step {step} staged: training blocked {blocked:.3f}s; writing in the background")
        return path

    def log_saved(done) -> None:
        if done is not None:
            progress.log(f"saved {done.path} ({done.files} files, {done.bytes / 1e6:.1f} MB, training state "
                         f"included) {done.background_s:.1f}s after staging")

    view = TrainState(cfg, plan, model, progress, rank, world, total_steps)
    for cb in callbacks:
        cb.on_train_start(view)
    if cfg.watch.heartbeat_dir:
        progress.heartbeat = Heartbeat(cfg.watch.heartbeat_dir, rank=rank, total_steps=total_steps)
        if progress.global_step:
            progress.heartbeat.beat(progress.global_step, tokens_seen)
    metrics = Metrics(ckpt_dir, plan.tokens_per_step, t.log_every, total_steps, start[2]) if rank == 0 else None

    # The loop: the plan's steps from where the run left off.
    last_saved = chosen["path"] if chosen else None
    start_up_done()
    if progress.heartbeat is not None:
        progress.heartbeat.training_started()  # the end of start-up, for the launcher's goodput
    for s in plan.walk(rank, start):
        log_saved(collect(saver.check))  # a background save that failed is an error here, at the next step
        blocks = ds.step_blocks(s.epoch, s.step_in_epoch, t.micro_batch, t.grad_accum)
        loss = train_step(model, opt, sched, ds, blocks, t, device, progress, s.step)
        progress.global_step = s.step
        tokens_seen += plan.tokens_per_step
        if progress.heartbeat is not None:
            progress.heartbeat.beat(s.step, tokens_seen)
        lr = sched.get_last_lr()[0]
        if metrics is not None and (line := metrics.record(s.step, s.epoch, loss, lr, tokens_seen)):
            progress.log(line)
        saved = save(s.epoch, s.step_in_epoch) if s.save else None
        last_saved = saved or last_saved
        end = StepEnd(s.epoch, s.step_in_epoch, s.step, loss, lr, tokens_seen, [int(b) for b in blocks], saved)
        if any([cb.on_step_end(view, end) for cb in callbacks]) and s.step < total_steps:
            progress.enter("save", "the last save, at exit", s.step)
            log_saved(collect(saver.close))
            return  # a callback ended this attempt here, as an interruption would
    progress.enter("save", "the last save, at exit", progress.global_step)
    log_saved(collect(saver.close))  # the last save in flight, in place before the run is done
    if metrics is not None:
        metrics.close()
    for cb in callbacks:
        cb.on_train_end(view)
    progress.enter("done")
    if progress.heartbeat is not None:
        progress.heartbeat.done()
    progress.log(f"done steps={progress.global_step} checkpoint={last_saved}")


def dry_run(cfg: RunFile) -> dict:
    """The run's schedule as this trainer would walk it, from rank 0's view, without a model."""
    plan = Plan(cfg)
    saves = [{"step": s.step, "epoch": s.epoch, "step_in_epoch": s.step_in_epoch,
              "epoch_complete": s.step_in_epoch >= plan.rank_steps_per_epoch[0],
              "final": s.step >= plan.rank_total_steps[0]} for s in plan.walk(0) if s.save]
    return {"run": cfg.path, "xxh3": cfg.xxh3, "plan": plan.as_dict(), "final_step": plan.rank_total_steps[0],
            "save_steps": [s["step"] for s in saves], "saves": saves}


def main(argv=None, callbacks: Sequence[Callback] = ()) -> int:
    args = parse_args(argv)
    rank_env = os.environ.get("RANK", "0")

    def refuse(msg: str) -> int:
        sys.stderr.write(f"[rank {rank_env}] train: error: {msg}\n")
        return 2

    try:
        cfg = RunFile(args.run_file, args.set)
    except (_core.Error, FileNotFoundError) as e:
        return refuse(str(e))
    if cfg.overrides and os.environ.get("EVENKEEL_ATTEMPT"):
        return refuse(f"--set under evenkeel launch: the gate checked {cfg.path} as written and the launcher plans "
                      "from it; change the run file instead")
    if args.dry_run:
        try:
            sys.stdout.write(json.dumps(dry_run(cfg)) + "\n")
        except _core.Error as e:
            sys.stderr.write(f"train: error: {e}\n")
            return 2
        return 0
    backend = cfg.distributed.backend
    env_hb = os.environ.get("EVENKEEL_HEARTBEAT_DIR")
    if env_hb and cfg.watch.heartbeat_dir and os.path.realpath(env_hb) != os.path.realpath(cfg.watch.heartbeat_dir):
        return refuse(f"EVENKEEL_HEARTBEAT_DIR={env_hb} contradicts watch.heartbeat_dir = "
                      f"{cfg.watch.heartbeat_dir!r} in {cfg.path}")
    if env_hb and not cfg.watch.heartbeat_dir:
        cfg.watch.heartbeat_dir = env_hb  # the launcher's, when the run file names none
    if backend == "nccl" and not torch.cuda.is_available():
        return refuse(f"{cfg.path} distributed.backend = 'nccl' but no CUDA device is visible (use 'gloo' on CPU)")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    timeout = datetime.timedelta(minutes=cfg.distributed.watchdog_timeout_min)
    dist.init_process_group(backend, timeout=timeout, device_id=device if device.type == "cuda" else None)
    progress = Progress(dist.get_rank())
    torch.manual_seed(cfg.train.seed)
    if progress.rank == 0:
        progress.log(f"run file {cfg.path} xxh3 {cfg.xxh3} (run {cfg.run.name}, world {cfg.world}, backend {backend}, "
                     f"collective timeout {cfg.distributed.watchdog_timeout_min:g} min)"
                     + "".join(f" --set {o}" for o in cfg.overrides))
    try:
        train(cfg, progress, device, callbacks, resume=not args.no_resume)
    except Refused as e:
        progress.log(f"error: {e}")
        sys.stdout.flush()
        os._exit(2)
    except Exception as e:
        waited = time.monotonic() - progress.phase_since
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        progress.log(f"error in {progress.phase} after {waited:.1f}s at step {progress.global_step}: "
                     f"{type(e).__name__}: {first}")
        traceback.print_exc()
        if getattr(progress, "saver", None) is not None:  # a save in flight still lands (bounded)
            progress.saver.settle(min(60.0, 60 * cfg.distributed.watchdog_timeout_min))
        flight_recorder.dump(progress.rank, backend, progress.log)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # a group with a timed-out collective can hang in teardown
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: finalizing torch's modules takes ~10 s of CPU on a loaded
    # host, and everything this process owes the world (checkpoint, logs) is written.
    os._exit(code)
