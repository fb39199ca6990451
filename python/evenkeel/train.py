#!/usr/bin/env python3
"""The reference trainer: the field report's recipe on a real Hugging Face model,
driven by the run file alone.

    torchrun --nnodes 2 --nproc-per-node 8 ... -m evenkeel.train RUN.toml
    python -m evenkeel.train RUN.toml --dry-run     # the step and save schedule as JSON, no model

It ships inside the evenkeel Python package, so `evenkeel launch` finds it through the
run's Python wherever the evenkeel binary lives (trainer/train.py in a source tree
runs this module).

Everything comes from RUN.toml, read by the same C++ code the gate runs
(evenkeel.RunFile), and the schedule (steps per epoch, total steps with epochs and
max_steps, the save steps, the learning-rate endpoints) from the one computation of
it, run::MakeSchedule, through evenkeel.Plan: this file has no step arithmetic of its
own. The pack, the model directory, micro-batch, accumulation,
epochs, the optimizer (AdamW, linear warmup then cosine decay to lr x
min_lr_ratio), the save interval, the checkpoint directory and copies kept,
evenfix, the collective timeout, the heartbeat directory, gradient
checkpointing and precision. A flag that names a run-file key is accepted only
when it agrees with the file (`--grad-accum 4` against grad_accum = 8 is an
error naming both); the run file is the one source of truth.

The model ([model] path) is built with transformers' AutoModelForCausalLM on the
meta device and sharded with FSDP2: fully_shard per decoder layer (the classes in
the model's _no_split_modules, e.g. Qwen3DecoderLayer), then the root; bf16
mixed precision on CUDA (an option on CPU). Each rank reads only its rows of the
pretrained safetensors weights (evenkeel.hf). Checkpoints are bf16 consolidated
safetensors shards with an index, the config and tokenizer files, and
evenkeel-checkpoint.json, every save_every steps and at every epoch end, each
behind the report's save barrier (evenkeel.checkpoint). A restart resumes the
weights of the newest checkpoint that verifies (with checksums), at the exact
block and learning-rate step where it was saved; under `evenkeel launch`, the
checkpoint node 0's launcher chose, which every node's launcher names in
EVENKEEL_RESUME_FROM (a path, or "none"), checked again here against the digest of
the manifest the launcher verified (EVENKEEL_RESUME_MANIFEST_XXH3): one that does
not verify is a refusal (exit 2), never a silent pick of another, and so is a rank
whose view (what it was handed, the manifest its node sees) differs from rank 0's.

Flags that are not in the run file control one attempt: --stop-after N ends it
after step N as an interruption would (for tests of resume), --log-blocks DIR
writes the block indices each rank consumes per step, --save-fp32 PATH writes
the final full weights in fp32 (for tests), --no-resume ignores checkpoints.

Each rank prints `[rank R] ...` lines: the run file's identity, evenfix's line,
the plan, steps, saves, errors with the phase they hit (forward, backward,
optimizer, save_barrier, save), and `done`. On gloo a failed collective writes
this rank's flight-recorder dump (TORCH_FR_DUMP_TEMP_FILE + rank), as NCCL's
watchdog does by itself.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import pickle
import socket
import sys
import time
import traceback

import torch
import torch.distributed as dist

from evenkeel import BlockDataset, Heartbeat, Plan, RunFile, _core, evenfix
from evenkeel.checkpoint import CheckpointWriter, newest_verified, verify
from evenkeel.hf import iter_full_tensors, load_sharded

# Flags that restate a run-file key: (flag, section.key, type). Given, they must agree.
RUN_FLAGS = [
    ("--pack-dir", "data.pack_dir", "path"),
    ("--model", "model.path", "path"),
    ("--micro-batch", "train.micro_batch", int),
    ("--grad-accum", "train.grad_accum", int),
    ("--epochs", "train.epochs", int),
    ("--max-steps", "train.max_steps", int),
    ("--warmup-steps", "train.warmup_steps", int),
    ("--lr", "train.lr", float),
    ("--weight-decay", "train.weight_decay", float),
    ("--min-lr-ratio", "train.min_lr_ratio", float),
    ("--seed", "train.seed", int),
    ("--precision", "train.precision", str),
    ("--save-every", "train.save_every", int),
    ("--ckpt-dir", "checkpoint.dir", "path"),
    ("--keep", "checkpoint.keep", int),
    ("--evenfix", "evenfix.mode", str),
    ("--backend", "distributed.backend", str),
    ("--watchdog-timeout-min", "distributed.watchdog_timeout_min", float),
    ("--heartbeat-dir", "watch.heartbeat_dir", "path"),
    ("--gradient-checkpointing", "model.gradient_checkpointing", "bool"),
]


class UsageError(Exception):
    """A contradiction or refusal found before training: exit 2 on every rank."""


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_file", help="run.toml (docs/run_format.md)")
    for flag, key, kind in RUN_FLAGS:
        p.add_argument(flag, default=None, metavar=key.split(".")[-1].upper(),
                       help=f"must agree with {key} in the run file")
    p.add_argument("--stop-after", type=int, default=0, help="end this attempt after step N (tests of resume)")
    p.add_argument("--log-blocks", default="", help="write each rank's block indices per step to DIR/rank-R.txt")
    p.add_argument("--save-fp32", default="", help="after training, write the full fp32 weights here (tests)")
    p.add_argument("--no-resume", action="store_true", help="ignore existing checkpoints")
    p.add_argument("--dry-run", action="store_true",
                   help="read the run file and the pack, print the step and save schedule as JSON, exit (no model, "
                        "no process group)")
    return p.parse_args(argv)


def _value(run: RunFile, key: str):
    section, name = key.split(".")
    return getattr(getattr(run, section), name)


def check_flags(args: argparse.Namespace, run: RunFile) -> None:
    """A flag may restate the run file, never contradict it."""
    for flag, key, kind in RUN_FLAGS:
        given = getattr(args, flag[2:].replace("-", "_"))
        if given is None:
            continue
        want = _value(run, key)
        try:
            if kind == "path":
                same = os.path.realpath(given) == os.path.realpath(want) if want else False
            elif kind == "bool":
                if given.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(given)
                same = (given.lower() in ("true", "1", "yes")) == bool(want)
            elif kind is float:
                same = math.isclose(float(given), float(want), rel_tol=1e-9, abs_tol=0.0)
            elif kind is int:
                same = int(given) == int(want)
            else:
                same = str(given) == str(want)
        except ValueError:
            raise UsageError(f"{flag} {given!r} is not a valid value for {key}") from None
        if not same:
            shown = f"{want!r}" if isinstance(want, str) else f"{want}"
            raise UsageError(f"{flag} {given} contradicts {key} = {shown} in {run.path}: the run file is what the "
                             f"gate checked; change it there")


# ---------------------------------------------------------------------------------------------
# Where each rank is, so a failed collective can say what the rank was doing.


class Run:
    def __init__(self, rank: int):
        self.rank = rank
        self.phase = "init"
        self.phase_since = time.monotonic()
        self.global_step = 0
        self.heartbeat: Heartbeat | None = None

    def enter(self, phase: str, detail: str = "", step: int | None = None) -> None:
        """Phase `phase` of step `step` (forward of step 36; save_barrier after step 35)."""
        self.phase = f"{phase} ({detail})" if detail else phase
        self.phase_since = time.monotonic()
        if self.heartbeat is not None:
            self.heartbeat.set_phase(phase, step)

    def log(self, msg: str) -> None:
        sys.stdout.write(f"[rank {self.rank}] {msg}\n")  # one write: ranks may share a pipe
        sys.stdout.flush()


def dump_flight_recorder(run: Run, backend: str) -> str | None:
    """Writes this rank's flight-recorder pickle where torch's own dump would go."""
    size = os.environ.get("TORCH_FR_BUFFER_SIZE") or os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE")
    if size is not None and int(size) <= 0:
        return None
    if backend == "nccl":
        return None  # the NCCL watchdog dumps on timeout (TORCH_NCCL_DUMP_ON_TIMEOUT)
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    if not prefix:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        prefix = os.path.join(cache, "torch", "comm_lib_trace_rank_")
    try:
        data = torch._C._distributed_c10d._dump_fr_trace()
    except Exception as e:  # a recorder that cannot dump must not hide the real error
        run.log(f"flight recorder: no dump: {e}")
        return None
    path = f"{prefix}{run.rank}"
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    entries = pickle.loads(data).get("entries", [])
    if entries:
        last = entries[-1]
        run.log(f"flight recorder: last collective {last['profiling_name']} "
                f"seq {last['collective_seq_id']} ({len(entries)} entries) -> {path}")
    return path


# ---------------------------------------------------------------------------------------------
# Resume


# The launcher's resume decision (docs/launch.md "Resume"): a checkpoint directory it
# verified with checksums, or "none", and the xxh3 of that checkpoint's manifest as it
# verified it. Every node's launcher hands the same pair, node 0's choice. Unset when
# the trainer is run by hand.
RESUME_ENV = "EVENKEEL_RESUME_FROM"
DIGEST_ENV = "EVENKEEL_RESUME_MANIFEST_XXH3"
MANIFEST = "evenkeel-checkpoint.json"


def manifest_digest(ckpt: str) -> str:
    """xxh3-64 of the checkpoint's manifest as this process sees it (16 hex digits), or
    "unreadable (why)"."""
    try:
        return _core.xxh3_file(os.path.join(ckpt, MANIFEST))
    except _core.Error as e:
        return f"unreadable ({e})"


def handed_resume(handed: str, digest: str = "") -> tuple[dict | None, str | None, str]:
    """The checkpoint the launcher handed over, checked here: (its evenkeel-checkpoint.json
    with "path" and "manifest_xxh3" added, None, how it was checked), (None, None, "") for
    "none", or (None, the reason, how) when it does not verify: the trainer then refuses
    (exit 2) rather than pick another one behind the launcher's back.

    When `digest`, the launcher's, is the xxh3 of the manifest here, the manifest is the
    one the launcher verified with checksums before this attempt; it lists every file's
    size and hash, so the files' sizes and headers are checked against it (the structure
    level) instead of rehashing every byte a second time. Without a digest, or with one
    that does not match, every byte is rehashed."""
    if handed == "none":
        return None, None, ""
    t0 = time.monotonic()
    mine = manifest_digest(handed)
    quick = bool(digest) and mine == digest
    try:
        report = verify(handed, full=not quick)
    except _core.Error as e:
        return None, f"{RESUME_ENV}={handed}: {e}", ""
    if quick:
        how = f"its manifest is the one the launcher verified with checksums (xxh3 {digest}): sizes and headers checked"
    elif digest:
        how = f"verified with checksums (its manifest's xxh3 {mine} is not the launcher's {digest})"
    else:
        how = "verified with checksums"
    how += f" in {time.monotonic() - t0:.3f}s"
    if not report["ok"]:
        problems = report["problems"] or ["does not verify"]
        return None, f"{RESUME_ENV}={handed}: the checkpoint the launcher chose does not verify: {problems[0]}", how
    with open(os.path.join(handed, MANIFEST), encoding="utf-8") as f:
        meta = json.load(f)
    meta["path"] = handed
    meta["manifest_xxh3"] = mine
    return meta, None, how


def resume_disagreement(views: list[dict], chosen: dict | None) -> str | None:
    """Every rank's view of the resume ({"host", "handed", "digest", "sees"}: what its
    launcher handed over, and the chosen checkpoint's manifest xxh3 as its node sees it)
    against rank 0's choice: the first disagreement, naming both sides, or None."""
    def handed(r: int, v: dict) -> str:
        got = f"{RESUME_ENV}={v['handed']}" if v["handed"] else f"no {RESUME_ENV}"
        return f"rank {r} on {v['host']} was handed {got}" + (f" ({DIGEST_ENV}={v['digest']})" if v["digest"] else "")
    first = views[0]
    for r, v in enumerate(views):
        if (v["handed"], v["digest"]) != (first["handed"], first["digest"]):
            return (f"{handed(r, v)}, but {handed(0, first)}: the launchers disagree on the checkpoint to resume "
                    "from (every node's launcher must hand node 0's choice)")
    if chosen is None:
        return None
    for r, v in enumerate(views):
        if v["sees"] != chosen["manifest_xxh3"]:
            return (f"rank {r} on {v['host']} sees {chosen['path']}/{MANIFEST} with xxh3 {v['sees']}, but rank 0 on "
                    f"{first['host']} chose it with xxh3 {chosen['manifest_xxh3']}: the nodes do not see the same "
                    "checkpoint (checkpoint.dir must be storage every node shares)")
    return None


def find_resume(run: Run, ckpt_dir: str) -> dict | None:
    """Rank 0 decides, every rank gets the checkpoint's evenkeel-checkpoint.json (or
    None). Under the launcher (EVENKEEL_RESUME_FROM set on every rank, by every node's
    launcher) exactly the checkpoint node 0's launcher chose; by hand, the newest one
    that verifies with checksums. Every rank then checks that its own view agrees with
    rank 0's (resume_disagreement): a disagreement is a refusal naming both."""
    handed = os.environ.get(RESUME_ENV, "")
    digest = os.environ.get(DIGEST_ENV, "")
    found: list = [None, None]  # the checkpoint, the reason the handed one cannot be used
    if run.rank == 0:
        if handed:
            meta, reason, how = handed_resume(handed, digest)
            found = [meta, reason]
            if meta is not None:
                run.log(f"resume: {meta['path']} (step {meta['step']}), as the launcher chose; {how}")
            elif reason is None:
                run.log("resume: from the start, as the launcher chose (no checkpoint verifies)")
        elif os.path.isdir(ckpt_dir):
            meta, warnings = newest_verified(ckpt_dir, full=True)
            for w in warnings:
                run.log(f"warning: {w}")
            if meta is not None:
                meta["manifest_xxh3"] = manifest_digest(meta["path"])
            found[0] = meta
    dist.broadcast_object_list(found, src=0)
    chosen = found[0]
    view = {"host": socket.gethostname(), "handed": handed, "digest": digest,
            "sees": manifest_digest(chosen["path"]) if chosen is not None else ""}
    views: list = [None] * dist.get_world_size()
    dist.all_gather_object(views, view)
    if found[1] is not None:
        raise UsageError(found[1])
    problem = resume_disagreement(views, chosen)
    if problem is not None:
        raise UsageError(problem)
    if chosen is not None and handed and run.rank != 0 and int(os.environ.get("LOCAL_RANK", "0")) == 0:
        run.log(f"resume: {chosen['path']} (step {chosen['step']}), rank 0's choice and the one this node's launcher "
                f"handed over; its manifest here has the same xxh3 {view['sees']}")
    return chosen


# ---------------------------------------------------------------------------------------------
# Training


def schedule_steps(plan: Plan, rank: int, start_epoch: int, start_step: int, start_global: int):
    """The training loop's control flow without the model: after each step, yields
    (epoch, steps done in the epoch, global step, whether to save). Every number comes
    from `plan`; the dry run and the real loop both walk this."""
    steps_per_epoch, total = plan.rank_steps_per_epoch[rank], plan.rank_total_steps[rank]
    step = start_global
    for epoch in range(start_epoch, plan.epochs):
        done = start_step if epoch == start_epoch else 0
        while done < steps_per_epoch and step < total:
            step += 1
            done += 1
            yield epoch, done, step, plan.is_save(step, rank)


def dry_run(cfg: RunFile) -> dict:
    """The run's schedule as this trainer would walk it, from rank 0's view, without a model."""
    plan = Plan(cfg)
    saves = []
    last = None
    for epoch, done, step, save in schedule_steps(plan, 0, 0, 0, 0):
        last = step
        if save:
            saves.append({"step": step, "epoch": epoch, "step_in_epoch": done,
                          "epoch_complete": done >= plan.rank_steps_per_epoch[0],
                          "final": step >= plan.rank_total_steps[0]})
    return {"run": cfg.path, "xxh3": cfg.xxh3, "plan": plan.as_dict(), "final_step": last or 0,
            "save_steps": [s["step"] for s in saves], "saves": saves}


def train(args: argparse.Namespace, cfg: RunFile, run: Run, device: torch.device) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    t = cfg.train
    pack_dir, model_dir, ckpt_dir = cfg.data.pack_dir, cfg.model.path, cfg.checkpoint.dir
    if not pack_dir or not model_dir or not ckpt_dir:
        raise UsageError(f"{cfg.path}: data.pack_dir, model.path and checkpoint.dir are needed to train")
    if cfg.world != world:
        raise UsageError(f"{cfg.path}: cluster is {cfg.cluster.nodes} x {cfg.cluster.gpus_per_node} = world "
                         f"{cfg.world}, but {world} ranks were started")
    if not os.path.isdir(pack_dir):
        raise UsageError(f"{cfg.path}: data.pack_dir {pack_dir}: no such directory")
    if not os.path.isdir(model_dir):  # else the tokenizer match below would call it a tokenizer mismatch
        raise UsageError(f"{cfg.path}: model.path {model_dir}: no such directory")
    # The pack's ids must mean the model's tokens: refuse before any weight is read.
    try:
        _core.check_model_tokenizer(pack_dir, model_dir)
    except _core.Error as e:
        raise UsageError(f"tokenizer mismatch: {e}") from None

    ds = BlockDataset(pack_dir, rank, seed=t.seed, shuffle=t.shuffle)
    if ds.world != world:
        raise UsageError(f"{pack_dir}: the pack is for world {ds.world}, this run has {world} ranks")
    if ds.seq_len != t.seq_len:
        raise UsageError(f"{pack_dir}: the pack has seq_len {ds.seq_len}, {cfg.path} train.seq_len = {t.seq_len}")
    pinned = evenfix(ds, mode=cfg.evenfix.mode)
    # Every rank's block count, for the schedule: a node-local pack's manifest lacks the
    # other nodes' ranks. The arithmetic is the C++ core's (run::MakeSchedule).
    counts: list = [None] * world
    dist.all_gather_object(counts, ds.local_blocks)
    plan = Plan(cfg, rank_blocks=counts)
    if cfg.evenfix.mode != "off" and pinned != plan.target_blocks:
        raise UsageError(f"evenfix pinned {pinned} blocks but the plan's target is {plan.target_blocks}")
    blocks_per_step = plan.blocks_per_step
    steps_per_epoch = plan.rank_steps_per_epoch[rank]
    total_steps = plan.rank_total_steps[rank]
    tokens_per_step = plan.tokens_per_step
    run.log(f"blocks={ds.local_blocks} pinned={pinned} steps_per_epoch={steps_per_epoch} "
            f"total_steps={total_steps} saves={len(plan.save_steps)} evenfix={cfg.evenfix.mode}")
    if total_steps < 1:
        raise UsageError(f"{cfg.path}: 0 steps: {pinned} blocks per rank < micro_batch {t.micro_batch} x "
                         f"grad_accum {t.grad_accum}")

    # Resume: the newest checkpoint that verifies; its weights, its place in the data.
    resume = None if args.no_resume else find_resume(run, ckpt_dir)
    start_epoch = start_step = 0
    tokens_seen = 0
    if resume:
        run.global_step = int(resume["step"])
        start_epoch, start_step = int(resume["epoch"]), int(resume["step_in_epoch"])
        tokens_seen = int(resume.get("tokens_seen", 0))
        extra = resume.get("extra", {})
        layout = {"pinned_blocks": pinned, "micro_batch": t.micro_batch, "grad_accum": t.grad_accum,
                  "seed": t.seed, "shuffle": t.shuffle}
        changed = {k: (extra.get(k), v) for k, v in layout.items() if extra.get(k) != v}
        if changed:
            run.log(f"warning: resuming {resume['path']} with a different data layout {changed}: "
                    "the block order does not continue exactly")
        if start_step >= steps_per_epoch:
            start_epoch, start_step = start_epoch + 1, 0
        if run.global_step >= total_steps:
            run.log(f"already complete: {resume['path']} is step {run.global_step} of {total_steps}")
            run.enter("done")
            if run.heartbeat is None and cfg.watch.heartbeat_dir:
                Heartbeat(cfg.watch.heartbeat_dir, rank=rank, total_steps=total_steps).done()
            return

    run.enter("load")
    t0 = time.monotonic()
    model = load_sharded(model_dir, device, precision=t.precision,
                         gradient_checkpointing=cfg.model.gradient_checkpointing,
                         weights_dir=resume["path"] if resume else None)
    run.log(f"model {model_dir} ({type(model).__name__}, {sum(p.numel() for p in model.parameters()):,} params, "
            f"precision {t.precision}) loaded in {time.monotonic() - t0:.1f}s"
            + (f"; resumed weights from {resume['path']}: epoch {start_epoch} step {start_step} "
               f"(global {run.global_step})" if resume else ""))

    opt = torch.optim.AdamW(model.parameters(), lr=t.lr, weight_decay=t.weight_decay)
    resumed_at = run.global_step  # the schedule continues where the run left off
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: plan.lr_factor(s + resumed_at, t.min_lr_ratio))

    writer = CheckpointWriter(ckpt_dir, model_dir, shard_bytes=int(cfg.checkpoint.shard_size_gb * 1e9),
                              keep=cfg.checkpoint.keep)
    pack_identity = {"dir": pack_dir, "manifest_xxh3": _core.xxh3_file(os.path.join(pack_dir, "manifest.json")),
                     "world": ds.world, "seq_len": ds.seq_len}

    def save(epoch: int, step_in_epoch: int) -> str:
        run.enter("save_barrier", f"after step {run.global_step}", run.global_step)
        run.log(f"save barrier at step {run.global_step}")
        dist.barrier()  # the report's save barrier: every rank must arrive here at the same step
        run.enter("save", f"step {run.global_step}", run.global_step)
        t_save = time.monotonic()
        manifest = {
            "step": run.global_step, "epoch": epoch, "step_in_epoch": step_in_epoch,
            "epoch_complete": step_in_epoch >= steps_per_epoch, "final": run.global_step >= total_steps,
            "tokens_seen": tokens_seen,
            "run": {"name": cfg.run.name, "path": cfg.path, "xxh3": cfg.xxh3},
            "pack": pack_identity,
            "extra": {"pinned_blocks": pinned, "micro_batch": t.micro_batch, "grad_accum": t.grad_accum,
                      "seed": t.seed, "shuffle": t.shuffle, "total_steps": total_steps,
                      "blocks_consumed_per_rank": step_in_epoch * blocks_per_step},
        }
        result = writer.save(model, run.global_step, manifest)
        path = os.path.join(ckpt_dir, f"step-{run.global_step:08d}")
        if result is not None:
            run.log(f"saved {result.path} ({result.files} files, {result.bytes / 1e6:.1f} MB) "
                    f"in {time.monotonic() - t_save:.1f}s")
        return path

    block_log = None
    if args.log_blocks:
        os.makedirs(args.log_blocks, exist_ok=True)
        block_log = open(os.path.join(args.log_blocks, f"rank-{rank}.txt"), "a", encoding="utf-8")
    if cfg.watch.heartbeat_dir:
        run.heartbeat = Heartbeat(cfg.watch.heartbeat_dir, rank=rank, total_steps=total_steps)
        if run.global_step:
            run.heartbeat.beat(run.global_step, tokens_seen)
    last_saved = resume["path"] if resume else None
    steps_here = 0
    # Rank 0's metrics, one JSON line per logged step, for evenkeel report.
    metrics = None
    if rank == 0:
        os.makedirs(ckpt_dir, exist_ok=True)
        metrics = open(os.path.join(ckpt_dir, "train-metrics.jsonl"), "a", encoding="utf-8")
    last_log_t, last_log_step = time.monotonic(), run.global_step
    current_epoch = None
    for epoch, step_in_epoch, step, save_now in schedule_steps(plan, rank, start_epoch, start_step, run.global_step):
        if epoch != current_epoch:
            current_epoch = epoch
            position = ds.start_at(epoch, step_in_epoch - 1, t.micro_batch, t.grad_accum)
            order = ds.blocks_for(epoch)
        loss_sum = 0.0
        consumed = []
        window = order[position:position + t.micro_batch * t.grad_accum]
        # With a loss mask, the loss is the mean over the window's trained tokens (a
        # micro-batch can hold few or none): each micro-batch's summed loss is divided by
        # the window's count, as transformers does with num_items_in_batch.
        trained = None
        if ds.has_mask:
            trained = max(1, ds.trained_targets(window))
        for micro in range(t.grad_accum):
            index = order[position:position + t.micro_batch]
            position += t.micro_batch
            consumed.extend(int(i) for i in index)
            # Labels are the ids, with -100 where the pack's loss mask is 0 (assistant-only loss).
            batch, labels = ds.batch(index, device=device)
            model.set_requires_gradient_sync(micro == t.grad_accum - 1)
            run.enter("forward", f"step {step}, micro-batch {micro}", step)
            if trained is None:
                loss = model(input_ids=batch, labels=labels).loss
                run.enter("backward", f"step {step}, micro-batch {micro}", step)
                (loss / t.grad_accum).backward()
                loss_sum += loss.item()
            else:
                loss = model(input_ids=batch, labels=labels,
                             num_items_in_batch=torch.tensor(trained, device=device)).loss
                run.enter("backward", f"step {step}, micro-batch {micro}", step)
                loss.backward()
                loss_sum += loss.item() * t.grad_accum  # logged as loss_sum / grad_accum
        run.enter("optimizer", f"step {step}", step)
        if t.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), t.max_grad_norm)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        run.global_step = step
        steps_here += 1
        tokens_seen += tokens_per_step
        if block_log is not None:
            block_log.write(f"step {step}: {' '.join(map(str, consumed))}\n")
            block_log.flush()
        if run.heartbeat is not None:
            run.heartbeat.beat(step, tokens_seen)
        if rank == 0 and (step % t.log_every == 0 or step == total_steps):
            now = time.monotonic()
            rate = (step - last_log_step) * tokens_per_step / max(1e-9, now - last_log_t)
            last_log_t, last_log_step = now, step
            loss_avg = loss_sum / t.grad_accum
            lr_now = sched.get_last_lr()[0]
            run.log(f"step {step} epoch {epoch} loss {loss_avg:.4f} lr {lr_now:.3g} tok/s {rate:,.0f}")
            metrics.write(json.dumps({"time": round(time.time(), 3), "step": step, "epoch": epoch,
                                      "loss": round(loss_avg, 6), "lr": lr_now, "tok_s": round(rate, 1),
                                      "tokens": tokens_seen,
                                      "attempt": int(os.environ.get("EVENKEEL_ATTEMPT", "0") or 0)}) + "\n")
            metrics.flush()
        if save_now:
            last_saved = save(epoch, step_in_epoch)
        if args.stop_after and step >= args.stop_after and step < total_steps:
            run.log(f"stopping after step {step} as asked (--stop-after); the run is not complete")
            if block_log is not None:
                block_log.close()
            return
    if block_log is not None:
        block_log.close()
    if metrics is not None:
        metrics.close()
    if args.save_fp32:
        state = {}
        for name, full in iter_full_tensors(model):
            if rank == 0:
                state[name] = full.detach().float().cpu().clone()
        if rank == 0:
            tmp = f"{args.save_fp32}.tmp.{os.getpid()}"
            torch.save(state, tmp)
            os.replace(tmp, args.save_fp32)
    run.enter("done")
    if run.heartbeat is not None:
        run.heartbeat.done()
    run.log(f"done steps={run.global_step} checkpoint={last_saved}")


def main(argv=None) -> int:
    args = parse_args(argv)
    rank_env = os.environ.get("RANK", "0")
    try:
        cfg = RunFile(args.run_file)
        check_flags(args, cfg)
    except (UsageError, _core.Error, FileNotFoundError) as e:
        sys.stderr.write(f"[rank {rank_env}] train: error: {e}\n")
        return 2
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
        sys.stderr.write(f"[rank {rank_env}] train: error: EVENKEEL_HEARTBEAT_DIR={env_hb} contradicts "
                         f"watch.heartbeat_dir = {cfg.watch.heartbeat_dir!r} in {cfg.path}\n")
        return 2
    if env_hb and not cfg.watch.heartbeat_dir:
        cfg.watch.heartbeat_dir = env_hb  # the launcher's, when the run file names none
    if backend == "nccl" and not torch.cuda.is_available():
        sys.stderr.write(f"[rank {rank_env}] train: error: {cfg.path} distributed.backend = 'nccl' but no CUDA "
                         "device is visible (use 'gloo' on CPU)\n")
        return 2
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    timeout = datetime.timedelta(minutes=cfg.distributed.watchdog_timeout_min)
    dist.init_process_group(backend, timeout=timeout, device_id=device if device.type == "cuda" else None)
    run = Run(dist.get_rank())
    torch.manual_seed(cfg.train.seed)
    if run.rank == 0:
        run.log(f"run file {cfg.path} xxh3 {cfg.xxh3} (run {cfg.run.name}, world {cfg.world}, backend {backend}, "
                f"collective timeout {cfg.distributed.watchdog_timeout_min:g} min)")
    try:
        train(args, cfg, run, device)
    except UsageError as e:
        run.log(f"error: {e}")
        sys.stdout.flush()
        os._exit(2)
    except Exception as e:
        waited = time.monotonic() - run.phase_since
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        run.log(f"error in {run.phase} after {waited:.1f}s at step {run.global_step}: {type(e).__name__}: {first}")
        traceback.print_exc()
        dump_flight_recorder(run, backend)
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
