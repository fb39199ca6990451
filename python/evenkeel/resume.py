"""Resume: which checkpoint a rank starts from, and where in the data.

    chosen = find_resume(progress, ckpt_dir)       # a collective: every rank calls it
    start, tokens_seen = start_of(chosen)           # (epoch, steps done in it, global step)

Under `evenkeel launch` the checkpoint is exactly the one node 0's launcher chose and
handed to every node (EVENKEEL_RESUME_FROM, with the digest of the manifest it verified
in EVENKEEL_RESUME_MANIFEST_XXH3), checked again here; by hand, the newest one in
checkpoint.dir that verifies with checksums. One that does not verify, or ranks whose
views disagree, are a refusal (exit 2), never a silent pick of another
(docs/launch.md, "Resume"; docs/trainer.md, "Resume").
"""

from __future__ import annotations

import json
import os
import socket
import time

import torch.distributed as dist

from evenkeel import _core
from evenkeel.checkpoint import newest_resumable, verify
from evenkeel.progress import Progress, Refused

__all__ = ["DIGEST_ENV", "LEVEL_ENV", "MANIFEST", "RESUME_ENV", "find_resume", "handed_resume", "layout_changes",
           "manifest_digest", "resume_disagreement", "start_of"]


# The launcher's resume decision (docs/launch.md "Resume"): a checkpoint directory it
# verified with checksums, or "none", and the xxh3 of that checkpoint's manifest as it
# verified it. Every node's launcher hands the same pair, node 0's choice. Unset when
# the trainer is run by hand.
RESUME_ENV = "EVENKEEL_RESUME_FROM"
DIGEST_ENV = "EVENKEEL_RESUME_MANIFEST_XXH3"
# The level the launcher resumes at ("full": weights and training state verified;
# "weights": the weights verified, the state missing or not; docs/launch.md "Resume").
LEVEL_ENV = "EVENKEEL_RESUME_LEVEL"
MANIFEST = "evenkeel-checkpoint.json"


def manifest_digest(ckpt: str) -> str:
    """xxh3-64 of the checkpoint's manifest as this process sees it (16 hex digits), or
    "unreadable (why)"."""
    try:
        return _core.xxh3_file(os.path.join(ckpt, MANIFEST))
    except _core.Error as e:
        return f"unreadable ({e})"


def handed_resume(handed: str, digest: str = "", level: str = "full") -> tuple[dict | None, str | None, str]:
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
    good = report["weights_ok"] if level == "weights" else report["ok"]
    if not good:
        problems = [p for p in report["problems"] if level != "weights" or not p.startswith("train_state")]
        problems = problems or report["problems"] or ["does not verify"]
        return None, f"{RESUME_ENV}={handed}: the checkpoint the launcher chose does not verify: {problems[0]}", how
    with open(os.path.join(handed, MANIFEST), encoding="utf-8") as f:
        meta = json.load(f)
    meta["path"] = handed
    meta["manifest_xxh3"] = mine
    meta["resume_level"] = level
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


def find_resume(progress: Progress, ckpt_dir: str, wanted: str = "full") -> dict | None:
    """Rank 0 decides, every rank gets the checkpoint's evenkeel-checkpoint.json (or
    None). Under the launcher (EVENKEEL_RESUME_FROM set on every rank, by every node's
    launcher) exactly the checkpoint node 0's launcher chose, at its level
    (EVENKEEL_RESUME_LEVEL); by hand, the one newest_resumable picks at `wanted` level
    (checkpoint.resume), verified with checksums; the result's "resume_level" says
    which. Every rank then checks that its own view agrees with
    rank 0's (resume_disagreement): a disagreement is a refusal naming both."""
    handed = os.environ.get(RESUME_ENV, "")
    digest = os.environ.get(DIGEST_ENV, "")
    found: list = [None, None]  # the checkpoint, the reason the handed one cannot be used
    if progress.rank == 0:
        if handed:
            meta, reason, how = handed_resume(handed, digest, os.environ.get(LEVEL_ENV, "full") or "full")
            found = [meta, reason]
            if meta is not None:
                progress.log(f"resume: {meta['path']} (step {meta['step']}, {meta['resume_level']} level), as the launcher "
                             f"chose; {how}")
            elif reason is None:
                progress.log("resume: from the start, as the launcher chose (no checkpoint verifies)")
        elif os.path.isdir(ckpt_dir):
            meta, warnings = newest_resumable(ckpt_dir, wanted, full=True)
            for w in warnings:
                progress.log(f"warning: {w}")
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
        raise Refused(found[1])
    problem = resume_disagreement(views, chosen)
    if problem is not None:
        raise Refused(problem)
    if chosen is not None and handed and progress.rank != 0 and int(os.environ.get("LOCAL_RANK", "0")) == 0:
        progress.log(f"resume: {chosen['path']} (step {chosen['step']}), rank 0's choice and the one this node's "
                     f"launcher handed over; its manifest here has the same xxh3 {view['sees']}")
    return chosen


def start_of(chosen: dict | None) -> tuple[tuple[int, int, int], int]:
    """Where a run resumed from `chosen` (its evenkeel-checkpoint.json) starts: (epoch,
    steps done in it, global step) for Plan.walk, and the tokens seen so far."""
    if chosen is None:
        return (0, 0, 0), 0
    start = (int(chosen["epoch"]), int(chosen["step_in_epoch"]), int(chosen["step"]))
    return start, int(chosen.get("tokens_seen", 0))


def layout_changes(chosen: dict, layout: dict) -> dict:
    """The data-layout keys (pinned_blocks, micro_batch, grad_accum, seed, shuffle) whose
    value in the checkpoint's `extra` differs from this run's: {key: (saved, now)}. Any
    change means the block order does not continue exactly."""
    extra = chosen.get("extra", {})
    return {k: (extra.get(k), v) for k, v in layout.items() if extra.get(k) != v}
