"""The gate's isolation probe: would this run's packing leak attention across documents?

    python -m evenkeel.isolation --config MODEL/config.json --seq-len 2048 --attention isolated --json

Builds the run's own model config at tiny width (the same model_type, layer types,
rope settings and head_dim; few layers, two key/value heads, a small hidden size,
random fp32 weights), packs random documents of varied lengths end to end into a few
blocks (one spanning a block boundary, one starting a block), runs the packed blocks
the way the trainer does (evenkeel.segments' fields through evenkeel.attention's
implementation) and each document alone, and prints one JSON verdict
(docs/gate_format.md, "The isolation check"):

- ``pass``: every document's loss (absolute) and every layer's output (relative to the
  layer's largest value) in the packed blocks equal the document's own within the
  tolerance;
- ``leak``: they differ, with the largest difference and the first layer (index and
  type) whose output differs;
- ``refused``: evenkeel.attention refuses the model (linear attention, ...);
- ``error``: the probe could not decide (the config cannot be built, ...).

A verdict other than ``error`` is cached on disk, keyed by the config file's bytes,
the attention setting, seq_len, the torch, transformers and Python versions and the
probe's version, under ``$EVENKEEL_CACHE_DIR``, else ``$XDG_CACHE_HOME/evenkeel``, else
``~/.cache/evenkeel`` (``isolation/KEY.json``, written to a temp file, fsynced and
renamed); a cached answer says ``"cached": true`` and costs no torch import.
Exit 0 with a verdict printed, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time

__all__ = ["PROBE_VERSION", "TOLERANCE", "cache_key", "probe", "tiny_config"]

# Part of the cache key: bump it with any change to this probe, evenkeel.segments or
# evenkeel.attention that could change a verdict, so no stale answer is read back.
PROBE_VERSION = 1
TOLERANCE = 1e-5  # fp32 on CPU; measured differences are ~1e-7
_PROBE_SEQ = 32
_PROBE_VOCAB = 128
_PROBE_LENGTHS = (5, 11, 16, 3, 27, 9, 1, 17, 7)  # 32-token blocks: 27 spans two, one starts at 64


def _versions() -> dict:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for name in ("torch", "transformers"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def cache_dir() -> str:
    explicit = os.environ.get("EVENKEEL_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "evenkeel")


def cache_key(config_bytes: bytes, attention: str, seq_len: int, versions: dict) -> str:
    what = {"config": hashlib.sha256(config_bytes).hexdigest(), "attention": attention, "seq_len": int(seq_len),
            "versions": versions, "probe": PROBE_VERSION}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:32]


def _read_cache(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            verdict = json.load(f)
    except (OSError, ValueError):
        return None  # absent or torn: the probe runs again and rewrites it
    return verdict if isinstance(verdict, dict) and verdict.get("probe_version") == PROBE_VERSION else None


def _write_cache(path: str, verdict: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".isolation.", suffix=".tmp", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(verdict, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        dfd = os.open(os.path.dirname(path), os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _layer_subset(layer_types: list[str]) -> list[int]:
    """Indices of the layers the tiny model keeps: the shortest prefix holding every
    layer type (so the interleaving stays the model's), at most 6; past that, the
    first layer of each type."""
    seen, prefix = set(), 0
    for i, t in enumerate(layer_types):
        prefix = i + 1
        seen.add(t)
        if seen == set(layer_types):
            break
    if prefix <= 6:
        return list(range(prefix))
    first = {}
    for i, t in enumerate(layer_types):
        first.setdefault(t, i)
    return sorted(first.values())


def tiny_config(config_dict: dict):
    """The config of `config_dict` (a config.json) at tiny width: same model_type,
    layer types (a subset keeping each type), rope settings and head_dim."""
    from transformers import AutoConfig

    d = dict(config_dict)
    model_type = d.pop("model_type", None)
    if not model_type:
        raise ValueError("config.json has no model_type")
    for k in ("architectures", "auto_map", "quantization_config", "torch_dtype", "dtype", "_name_or_path"):
        d.pop(k, None)
    config = AutoConfig.for_model(model_type, **d)
    text = getattr(config, "text_config", None) or config
    heads = int(getattr(text, "num_attention_heads", 4) or 4)
    kv = int(getattr(text, "num_key_value_heads", None) or heads)
    head_dim = getattr(text, "head_dim", None) or (int(text.hidden_size) // heads)
    tiny_kv = min(kv, 2)
    text.num_key_value_heads = tiny_kv
    text.num_attention_heads = tiny_kv * min(max(heads // kv, 1), 2)
    text.head_dim = int(head_dim)
    text.hidden_size = 64
    text.intermediate_size = 128
    text.vocab_size = _PROBE_VOCAB
    for k in ("num_experts", "num_local_experts"):
        if getattr(text, k, None):
            setattr(text, k, min(int(getattr(text, k)), 4))
    if getattr(text, "num_experts_per_tok", None):
        text.num_experts_per_tok = min(int(text.num_experts_per_tok), 2)
    if getattr(text, "moe_intermediate_size", None):
        text.moe_intermediate_size = 64
    layer_types = list(getattr(text, "layer_types", None) or [])
    if layer_types:
        keep = _layer_subset(layer_types)
        text.layer_types = [layer_types[i] for i in keep]
        text.num_hidden_layers = len(keep)
    else:
        text.num_hidden_layers = 2
    if getattr(text, "sliding_window", None):
        # Small enough to bind inside the probe's documents, as the real window binds in real ones.
        text.sliding_window = min(int(text.sliding_window), 8)
    for k in ("pad_token_id", "bos_token_id", "eos_token_id"):
        v = getattr(text, k, None)
        if isinstance(v, int) and v >= _PROBE_VOCAB:
            setattr(text, k, 0)
    text.use_cache = False
    return config


def _pack(rng, seq_len: int):
    import numpy as np

    docs = [rng.integers(1, _PROBE_VOCAB, size=n).astype(np.int64) for n in _PROBE_LENGTHS]
    stream = np.concatenate(docs)
    starts = np.cumsum([0] + [len(d) for d in docs[:-1]])
    n = len(stream) // seq_len
    entries = np.array([s for s in starts if s < n * seq_len], dtype=np.uint64)
    return stream[:n * seq_len].reshape(n, seq_len), entries


def probe(config_dict: dict, attention: str) -> dict:
    """Runs the probe (no cache); returns the verdict's fields."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    from evenkeel.attention import IsolationRefused, check_isolation, isolated_implementation, model_inputs
    from evenkeel.segments import isolated_fields

    config = tiny_config(config_dict)
    model_type = getattr(config, "model_type", "")
    out = {"model_type": model_type, "attention": attention, "tolerance": TOLERANCE}
    if attention == "isolated":
        try:
            check_isolation(config)
        except IsolationRefused as e:
            return {**out, "verdict": "refused", "layer": e.layer, "layer_index": -1, "message": str(e)}
        implementation = isolated_implementation(config, "cpu")
    else:
        implementation = "sdpa"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=implementation, dtype=torch.float32).eval()
    blocks, entries = _pack(np.random.default_rng(0), _PROBE_SEQ)
    B, S = blocks.shape
    ids = torch.from_numpy(blocks)
    fields = isolated_fields(np.arange(B), S, entries, ids.clone())
    layers = _decoder_layers(model)
    text = getattr(config, "text_config", None) or config
    types = list(getattr(text, "layer_types", None) or ["full_attention"] * len(layers))
    captured: list = []
    hooks = [m.register_forward_hook(lambda _m, _i, o: captured.append(o[0] if isinstance(o, tuple) else o))
             for m in layers]
    with torch.no_grad():
        if attention == "isolated":
            packed = model(**model_inputs(implementation, ids, fields))
        else:
            packed = model(input_ids=ids)  # today's batch: the block as one sequence
        packed_layers = [c.reshape(B * S, -1) for c in captured]
        logits = packed.logits.reshape(B * S, -1)
        cu = fields["cu_seq_lens_q"].tolist()
        flat = ids.reshape(-1)
        # The reference: each document alone through transformers' own SDPA, same weights.
        model.set_attn_implementation("sdpa")
        loss_diff, layer_diff = 0.0, [0.0] * len(layers)
        for a, b in zip(cu[:-1], cu[1:]):
            captured.clear()
            alone = model(input_ids=flat[a:b][None]).logits[0]
            for i, c in enumerate(captured):
                # Relative to the layer's scale: Gemma's hidden states grow to ~1e2 and more.
                scale = max(1.0, c[0].abs().max().item())
                layer_diff[i] = max(layer_diff[i], (c[0] - packed_layers[i][a:b]).abs().max().item() / scale)
            if b - a > 1:
                ce = torch.nn.functional.cross_entropy
                mine = ce(logits[a:b - 1], flat[a + 1:b])
                own = ce(alone[:-1], flat[a + 1:b])
                loss_diff = max(loss_diff, abs(mine.item() - own.item()))
    for h in hooks:
        h.remove()
    out.update(implementation=implementation, blocks=int(B), documents=len(cu) - 1,
               max_loss_diff=loss_diff, max_layer_diff=max(layer_diff, default=0.0))
    first = next((i for i, d in enumerate(layer_diff) if d > TOLERANCE), -1)
    if loss_diff <= TOLERANCE and first < 0:
        return {**out, "verdict": "pass", "layer": "", "layer_index": -1,
                "message": f"packed documents equal their runs alone within {TOLERANCE:g} "
                           f"(loss {loss_diff:.1e}, layers {out['max_layer_diff']:.1e})"}
    layer = types[first] if 0 <= first < len(types) else ""
    return {**out, "verdict": "leak", "layer": layer, "layer_index": first,
            "message": f"packed documents differ from their runs alone by {loss_diff:.3g} in loss"
                       + (f", first at layer {first} ({layer}) by {layer_diff[first]:.3g}" if first >= 0 else "")}


def _decoder_layers(model):
    for path in ("model.layers", "model.language_model.layers", "transformer.h", "model.decoder.layers"):
        m = model
        for part in path.split("."):
            m = getattr(m, part, None)
            if m is None:
                break
        if m is not None:
            return list(m)
    raise ValueError(f"{type(model).__name__}: no decoder layers found (model.layers)")


def run(config_path: str, attention: str, seq_len: int, use_cache: bool = True) -> dict:
    t0 = time.monotonic()
    versions = _versions()
    base = {"probe_version": PROBE_VERSION, "config": config_path, "attention": attention, "seq_len": seq_len,
            **{k: v for k, v in versions.items()}}
    try:
        with open(config_path, "rb") as f:
            raw = f.read()
        config_dict = json.loads(raw)
        if not isinstance(config_dict, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as e:
        return {**base, "verdict": "error", "message": f"{config_path}: {e}", "cached": False,
                "seconds": time.monotonic() - t0}
    path = os.path.join(cache_dir(), "isolation", cache_key(raw, attention, seq_len, versions) + ".json")
    if use_cache and (hit := _read_cache(path)) is not None:
        return {**hit, "cached": True, "seconds": time.monotonic() - t0}
    try:
        verdict = {**base, **probe(config_dict, attention)}
    except Exception as e:  # noqa: BLE001 - the verdict names it; the gate FAILs an error
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return {**base, "verdict": "error", "message": f"{type(e).__name__}: {first}", "cached": False,
                "seconds": time.monotonic() - t0}
    if use_cache:
        try:
            _write_cache(path, verdict)
        except OSError as e:
            verdict["cache_error"] = f"{path}: {e}"
    return {**verdict, "cached": False, "seconds": time.monotonic() - t0}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m evenkeel.isolation", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True, help="the model's config.json")
    p.add_argument("--attention", choices=("isolated", "cross"), default="isolated")
    p.add_argument("--seq-len", type=int, required=True, help="train.seq_len (part of the cache key)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    p.add_argument("--json", action="store_true", help="print the verdict as one JSON line (the gate reads it)")
    args = p.parse_args(argv)
    verdict = run(args.config, args.attention, args.seq_len, use_cache=not args.no_cache)
    if args.json:
        sys.stdout.write(json.dumps(verdict) + "\n")
    else:
        sys.stdout.write(f"isolation: {verdict['verdict']}: {verdict.get('message', '')}"
                         + (" (cached)" if verdict.get("cached") else "") + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
