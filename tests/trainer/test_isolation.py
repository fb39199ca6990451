"""Proof, per model family, that isolated packing trains each document as if it were
alone: tiny Qwen3, Llama and Gemma 3 (sliding-window layers, head_dim 256 as the real
one) built here with transformers, fp32 on CPU, in eval mode (no dropout), seeded.

Documents of varied lengths are packed end to end into blocks (tests/trainer/
docpacks.py: some span a block boundary, one starts a block), run packed through
evenkeel.segments' fields and evenkeel.attention's implementation, and each piece
(a document, or its part in one block) run alone with plain SDPA. The per-piece loss
and the gradients of a loss summed over pieces agree within TOL; with attention
"cross" (today's batch: the block as one sequence) the same comparison fails by
orders of magnitude more. Then the refusals (linear attention), and the gate's probe
(python -m evenkeel.isolation) on the same families, its cache and its verdicts.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from docpacks import documents, padded, sequential
from transformers import (AutoModelForCausalLM, Gemma3TextConfig, LlamaConfig, Qwen3Config, Qwen3NextConfig)

from evenkeel.attention import ATTENTION_NAME, IsolationRefused, check_isolation, isolated_implementation, model_inputs
from evenkeel.segments import isolated_fields

TOL = 1e-5
SEQ = 24
VOCAB = 101
LENGTHS = [5, 13, 6, 31, 2, 9, 17, 1, 12, 8, 20]  # 31 spans two blocks; 72 (a block start) begins one


def tiny(family: str):
    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256)
    if family == "qwen3":
        return Qwen3Config(**common, num_hidden_layers=2, head_dim=16)
    if family == "llama":
        return LlamaConfig(**common, num_hidden_layers=2)
    if family == "gemma3":
        # Gemma 3's pattern (sliding layers, then a global one), a window that binds inside documents.
        return Gemma3TextConfig(**common, num_hidden_layers=4, head_dim=256, sliding_window=7,
                                layer_types=["sliding_attention"] * 3 + ["full_attention"])
    raise ValueError(family)


def build(config, implementation: str):
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, attn_implementation=implementation, dtype=torch.float32).eval()


def pieces_flat(pieces, order):
    """(flat start, flat end) of every non-pad piece of blocks `order`, in batch order."""
    return [(i * SEQ + s, i * SEQ + e) for i, b in enumerate(order) for s, e, pad in pieces[b] if not pad]


def per_piece_losses(logits, flat_ids, spans):
    """Mean next-token loss of each piece (its first token is not a target), from logits
    over the flattened batch; pieces of one token have no target and are skipped."""
    ce = torch.nn.functional.cross_entropy
    return [ce(logits[a:b - 1], flat_ids[a + 1:b]) for a, b in spans if b - a > 1]


def alone_losses(model, flat_ids, spans):
    return [model(input_ids=flat_ids[a:b][None], labels=flat_ids[a:b][None]).loss for a, b in spans if b - a > 1]


def grads(model):
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def compare(family: str, packing: str, attention: str):
    """Largest loss difference and largest relative gradient difference, packed vs alone."""
    config = tiny(family)
    rng = np.random.default_rng(7)
    docs = documents(rng, LENGTHS, VOCAB)
    if packing == "sequential":
        blocks, entries, pieces = sequential(docs, SEQ)
    else:
        blocks, entries, pieces = padded([d[:SEQ] for d in docs], SEQ, pad_id=0)
    order = list(range(len(blocks)))[::-1]  # not the file's order: the batch is any window
    ids = torch.from_numpy(blocks[order])
    flat = ids.reshape(-1)
    spans = pieces_flat(pieces, order)
    assert len(spans) > len(blocks)

    implementation = isolated_implementation(config, "cpu") if attention == "isolated" else "sdpa"
    packed_model = build(config, implementation)
    if attention == "isolated":
        fields = isolated_fields(order, SEQ, entries, ids.clone())
        logits = packed_model(**model_inputs(implementation, ids, fields)).logits
    else:
        logits = packed_model(input_ids=ids).logits
    mine = per_piece_losses(logits.reshape(len(flat), -1), flat, spans)
    torch.stack(mine).sum().backward()
    g_packed = grads(packed_model)

    alone_model = build(config, "sdpa")
    own = alone_losses(alone_model, flat, spans)
    torch.stack(own).sum().backward()
    g_alone = grads(alone_model)

    loss_diff = max(abs(a.item() - b.item()) for a, b in zip(mine, own))
    assert g_packed.keys() == g_alone.keys() and g_packed
    grad_diff = max(((g_packed[n] - g_alone[n]).abs().max() / g_alone[n].abs().max().clamp_min(1e-12)).item()
                    for n in g_alone)
    return loss_diff, grad_diff, len(spans)


FAMILIES = ["qwen3", "llama", "gemma3"]


@pytest.mark.parametrize("packing", ["sequential", "padded"])
@pytest.mark.parametrize("family", FAMILIES)
def test_isolated_packing_equals_each_document_alone_and_cross_does_not(family, packing):
    loss_diff, grad_diff, n = compare(family, packing, "isolated")
    print(f"{family} {packing} isolated: {n} pieces, loss {loss_diff:.2e}, gradients (relative) {grad_diff:.2e}")
    assert loss_diff <= TOL and grad_diff <= TOL, (loss_diff, grad_diff)
    cross_loss, cross_grad, _ = compare(family, packing, "cross")
    print(f"{family} {packing} cross: loss {cross_loss:.2e}, gradients (relative) {cross_grad:.2e}")
    assert cross_loss > 1000 * TOL and cross_grad > 1000 * TOL, (cross_loss, cross_grad)


def test_the_document_attention_without_boundaries_is_an_error_not_a_leak():
    config = tiny("llama")
    model = build(config, isolated_implementation(config, "cpu"))
    with pytest.raises(ValueError, match="no document boundaries"):
        model(input_ids=torch.ones(1, 8, dtype=torch.long))


def test_cpu_runs_the_registered_document_attention():
    assert isolated_implementation(tiny("gemma3"), "cpu") == ATTENTION_NAME


def test_linear_attention_is_refused_naming_the_layer_and_what_to_do():
    config = Qwen3NextConfig(num_hidden_layers=4)
    assert "linear_attention" in config.layer_types
    with pytest.raises(IsolationRefused) as e:
        check_isolation(config)
    msg = str(e.value)
    assert "qwen3_next" in msg and "layer 0 is 'linear_attention'" in msg
    assert 'data.attention = "cross"' in msg
    assert e.value.layer == "linear_attention"
    for family in FAMILIES:
        check_isolation(tiny(family))  # no refusal


def test_an_unknown_layer_type_is_refused_too():
    config = tiny("gemma3")
    config.layer_types = ["sliding_attention", "mamba", "sliding_attention", "full_attention"]
    with pytest.raises(IsolationRefused, match="layer 1 is 'mamba'"):
        check_isolation(config)


# The gate's probe, run as the gate runs it.
def run_probe(config_path, attention="isolated", cache=None, extra=()):
    env = dict(os.environ)
    if cache is not None:
        env["EVENKEEL_CACHE_DIR"] = str(cache)
    out = subprocess.run([sys.executable, "-m", "evenkeel.isolation", "--config", str(config_path), "--seq-len",
                          "2048", "--attention", attention, "--json", *extra],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    d = tmp_path_factory.mktemp("configs")
    out = {}
    for name, config in [("qwen3", Qwen3Config()), ("llama", LlamaConfig()), ("gemma3", Gemma3TextConfig()),
                         ("qwen3_next", Qwen3NextConfig())]:
        config.to_json_file(str(d / f"{name}.json"))
        out[name] = d / f"{name}.json"
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_probe_passes_the_families_full_size_configs(configs, family, tmp_path):
    v = run_probe(configs[family], cache=tmp_path)
    assert v["verdict"] == "pass", v
    assert v["max_loss_diff"] <= TOL and v["max_layer_diff"] <= TOL and not v["cached"]
    print(f"probe {family}: {v['seconds']:.1f} s cold")
    again = run_probe(configs[family], cache=tmp_path)
    assert again["cached"] and again["verdict"] == "pass" and again["seconds"] < 1.0


def test_probe_finds_the_leak_of_cross_attention(configs, tmp_path):
    v = run_probe(configs["gemma3"], attention="cross", cache=tmp_path)
    assert v["verdict"] == "leak" and v["max_loss_diff"] > 1000 * TOL
    assert v["layer_index"] == 0 and v["layer"] == "sliding_attention"


def test_probe_refuses_linear_attention(configs, tmp_path):
    v = run_probe(configs["qwen3_next"], cache=tmp_path)
    assert v["verdict"] == "refused" and v["layer"] == "linear_attention" and "qwen3_next" in v["message"]


def test_probe_cache_is_keyed_by_the_config_bytes(configs, tmp_path):
    first = run_probe(configs["llama"], cache=tmp_path)
    changed = tmp_path / "llama.json"
    cfg = json.loads(configs["llama"].read_text())
    cfg["rope_theta"] = 1234.0
    changed.write_text(json.dumps(cfg))
    second = run_probe(changed, cache=tmp_path)
    assert not first["cached"] and not second["cached"]
    assert len(list((tmp_path / "isolation").glob("*.json"))) == 2


def test_probe_error_is_a_verdict_and_not_cached(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "no_such_model"}')
    v = run_probe(bad, cache=tmp_path)
    assert v["verdict"] == "error" and v["message"]
    assert not (tmp_path / "isolation").exists() or not list((tmp_path / "isolation").glob("*.json"))


# The gate's seventh check, the real binary over a real pack and the run's own config.
def gate_run(tmp_path, config_path, attention):
    from packs import EVENKEEL, make_pack, write_run_file

    pack = make_pack(tmp_path / "pack", [4, 4], seq_len=16, vocab=64)
    rf = write_run_file(tmp_path / f"run-{attention}.toml", {
        "run": {"name": "iso"},
        "cluster": {"nodes": 1, "gpus_per_node": 2},
        "data": {"pack_dir": str(pack), "attention": attention},
        "model": {"config": str(config_path)},
        "train": {"seq_len": 16, "micro_batch": 1, "grad_accum": 1},
        "checkpoint": {"dir": str(tmp_path / "ckpt")},
        "distributed": {"backend": "gloo"},
        "launch": {"python": sys.executable},
    })
    return [EVENKEEL, "gate", str(rf), "--json"]


def isolation_of(cmd, cache):
    env = {**os.environ, "EVENKEEL_CACHE_DIR": str(cache), "TORCH_FR_BUFFER_SIZE": "2000"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode in (0, 1), out.stderr
    log = json.loads(out.stdout)
    names = [c["name"] for c in log["checks"]]
    assert names[-1] == "isolation" and len(names) == 7, names
    return log["checks"][-1], log


def test_gate_passes_a_tiny_models_isolation_once_then_from_the_cache(tmp_path):
    config = tmp_path / "qwen3.json"
    Qwen3Config(vocab_size=64, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                head_dim=16, intermediate_size=128).to_json_file(str(config))
    cmd = gate_run(tmp_path, config, "isolated")
    cold, _ = isolation_of(cmd, tmp_path / "cache")
    assert cold["verdict"] == "PASS", cold
    assert "qwen3 through evenkeel_document" in cold["reason"] and "cache" not in cold["reason"], cold
    assert cold["numbers"]["cached"] == 0
    warm, _ = isolation_of(cmd, tmp_path / "cache")
    assert warm["verdict"] == "PASS" and "(verdict from the cache)" in warm["reason"], warm
    assert warm["numbers"]["cached"] == 1 and warm["numbers"]["probe_seconds"] < 1.0
    print(f"probe cold {cold['numbers']['probe_seconds']:.2f} s, warm {warm['numbers']['probe_seconds']:.3f} s")


def test_gate_with_cross_attention_passes_with_a_note_and_no_probe(tmp_path):
    cmd = gate_run(tmp_path, tmp_path / "no-such-config.json", "cross")
    check, _ = isolation_of(cmd, tmp_path / "cache")
    assert check["verdict"] == "PASS" and "by choice" in check["reason"], check
    assert not (tmp_path / "cache").exists()


def test_gate_fails_a_linear_attention_model_naming_the_layer(tmp_path):
    config = tmp_path / "next.json"
    Qwen3NextConfig(num_hidden_layers=4).to_json_file(str(config))
    check, log = isolation_of(gate_run(tmp_path, config, "isolated"), tmp_path / "cache")
    assert check["verdict"] == "FAIL" and log["overall"] == "FAIL", check
    assert "qwen3_next: layer 0 is 'linear_attention'" in check["reason"], check
    assert 'data.attention = "cross"' in check["reason"], check


def test_the_flattened_layout_flash_attention_takes_trains_the_same(tmp_path):
    """The CUDA varlen path reads the micro-batch as one row (model_inputs for
    flash_attention_2): run here through the CPU document attention, the loss and the
    logits equal the unflattened batch's (the CUDA kernel itself is not run here)."""
    config = tiny("qwen3")
    model = build(config, isolated_implementation(config, "cpu"))
    blocks, entries, _ = sequential(documents(np.random.default_rng(3), LENGTHS, VOCAB), SEQ)
    order = [2, 0, 3]
    ids = torch.from_numpy(blocks[order])
    fields = isolated_fields(order, SEQ, entries, ids.clone())
    flat = model_inputs("flash_attention_2", ids, fields)
    assert flat["input_ids"].shape == (1, len(order) * SEQ) and flat["labels"].shape == (1, len(order) * SEQ)
    assert torch.equal(flat["cu_seq_lens_q"], fields["cu_seq_lens_q"])
    with torch.no_grad():
        a = model(**model_inputs(ATTENTION_NAME, ids, fields))
        b = model(**flat)
    assert abs(a.loss.item() - b.loss.item()) <= TOL
    assert (a.logits.reshape(-1, VOCAB) - b.logits.reshape(-1, VOCAB)).abs().max().item() <= TOL
