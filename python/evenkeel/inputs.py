"""The trainer's inputs, checked before any weight is read: the pack and the model named
by the run file, the pack's tokenizer against the model's, the world and the sequence
length against the pack, evenfix, and the plan (the C++ schedule) from every rank's
block count.

    ds, pinned, plan = open_pack(cfg, rank, world)   # a collective: every rank calls it

Each contradiction is a Refused naming the run file, the key and both values: the
trainer exits 2 on every rank and the launcher does not retry it.
"""

from __future__ import annotations

import os

import torch.distributed as dist

from evenkeel import _core
from evenkeel.dataset import BlockDataset
from evenkeel._evenfix import evenfix
from evenkeel.plan import Plan
from evenkeel.progress import Refused

__all__ = ["check_inputs", "open_pack"]


def check_inputs(cfg, world: int) -> None:
    """The run file names a pack, a model and a checkpoint directory that exist, for
    this many ranks, and the pack's ids mean the model's tokens."""
    pack_dir, model_dir, ckpt_dir = cfg.data.pack_dir, cfg.model.path, cfg.checkpoint.dir
    if not pack_dir or not model_dir or not ckpt_dir:
        raise Refused(f"{cfg.path}: data.pack_dir, model.path and checkpoint.dir are needed to train")
    if cfg.world != world:
        raise Refused(f"{cfg.path}: cluster is {cfg.cluster.nodes} x {cfg.cluster.gpus_per_node} = world "
                      f"{cfg.world}, but {world} ranks were started")
    if not os.path.isdir(pack_dir):
        raise Refused(f"{cfg.path}: data.pack_dir {pack_dir}: no such directory")
    if not os.path.isdir(model_dir):  # else the tokenizer match below would call it a tokenizer mismatch
        raise Refused(f"{cfg.path}: model.path {model_dir}: no such directory")
    try:
        _core.check_model_tokenizer(pack_dir, model_dir)
    except _core.Error as e:
        raise Refused(f"tokenizer mismatch: {e}") from None


def open_pack(cfg, rank: int, world: int) -> tuple[BlockDataset, int, Plan]:
    """This rank's blocks, pinned by evenfix, and the run's plan: (dataset, pinned block
    count, plan). Every rank's block count is gathered for the plan, since a node-local
    pack's manifest lacks the other nodes' ranks; the arithmetic is run::MakeSchedule's."""
    check_inputs(cfg, world)
    t = cfg.train
    attention = cfg.data.attention
    ds = BlockDataset(cfg.data.pack_dir, rank, seed=t.seed, shuffle=t.shuffle, attention=attention)
    if attention == "isolated" and ds.doc_starts is None:
        raise Refused(f"{cfg.data.pack_dir}: the pack has no document boundaries (rank-{rank:05d}.docs; a pack made "
                      f"before evenkeel recorded them) and {cfg.path} has data.attention = 'isolated': repack it "
                      "(evenkeel pack RUN.toml), or set data.attention = \"cross\" to train each block as one sequence")
    if ds.world != world:
        raise Refused(f"{cfg.data.pack_dir}: the pack is for world {ds.world}, this run has {world} ranks")
    if ds.seq_len != t.seq_len:
        raise Refused(f"{cfg.data.pack_dir}: the pack has seq_len {ds.seq_len}, {cfg.path} train.seq_len = {t.seq_len}")
    pinned = evenfix(ds, mode=cfg.evenfix.mode)
    counts: list = [None] * world
    dist.all_gather_object(counts, ds.local_blocks)
    plan = Plan(cfg, rank_blocks=counts)
    if cfg.evenfix.mode != "off" and pinned != plan.target_blocks:
        raise Refused(f"evenfix pinned {pinned} blocks but the plan's target is {plan.target_blocks}")
    if plan.rank_total_steps[rank] < 1:
        raise Refused(f"{cfg.path}: 0 steps: {pinned} blocks per rank < micro_batch {t.micro_batch} x "
                      f"grad_accum {t.grad_accum}")
    return ds, pinned, plan
