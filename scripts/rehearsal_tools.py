#!/usr/bin/env python3
"""Helpers of the rehearsal (scripts/main.sh), each a step a person would do by hand.

    rehearsal_tools.py slice SAMPLE OUT N      the first N chat records of the sample
    rehearsal_tools.py check-loss LOG RATIO    fail unless the last losses are below RATIO x the first
    rehearsal_tools.py generate CKPT PROMPT    load a checkpoint with transformers, greedy-decode
"""

from __future__ import annotations

import json
import re
import sys


def slice_chat(sample: str, out: str, n: int) -> int:
    """A learnable slice: the sample's chat records (ChatML text), which a tiny model can
    memorize in a few epochs, so the loss visibly falls; written back as conversations
    ({"messages": [...]}) for `evenkeel pack` to render with the model's own template."""
    kept = []
    with open(sample, encoding="utf-8") as f:
        for line in f:
            text = json.loads(line).get("text", "")
            if not text.startswith("<|im_start|>"):
                continue
            turns = re.findall(r"<\|im_start\|>(\w+)\n(.*?)(?:<\|im_end\|>|$)", text, re.S)
            kept.append(json.dumps({"messages": [{"role": r, "content": c} for r, c in turns]},
                                   ensure_ascii=False) + "\n")
            if len(kept) == n:
                break
    with open(out, "w", encoding="utf-8") as f:
        f.writelines(kept)
    print(f"slice: {len(kept)} conversations -> {out}")
    return 0 if kept else 1


def check_loss(log: str, ratio: float) -> int:
    losses = [float(x) for x in re.findall(r"\] step \d+ epoch \d+ loss ([\d.]+)", open(log, encoding="utf-8").read())]
    if len(losses) < 6:
        print(f"check-loss: only {len(losses)} loss lines in {log}", file=sys.stderr)
        return 1
    k = 5
    first, last = losses[0], sum(losses[-k:]) / k
    verdict = last <= ratio * first
    print(f"loss: first step {first:.3f} (chance for Qwen3's vocabulary: ln 151,936 = 11.93) -> "
          f"mean of the last {k} steps {last:.3f}: {'fell' if verdict else 'did NOT fall'} below {ratio:g} x the start")
    return 0 if verdict else 1


def generate(ckpt: str, prompt: str, tokens: int = 40) -> int:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(ckpt)
    model = AutoModelForCausalLM.from_pretrained(ckpt)  # bf16, as saved
    model.eval()
    ids = tok(prompt, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=tokens, do_sample=False, pad_token_id=tok.eos_token_id)
    text = tok.decode(out[0][ids["input_ids"].shape[1]:], skip_special_tokens=False)
    print(f"loaded {ckpt} with transformers ({type(model).__name__}, {model.dtype})")
    print(f"prompt: {prompt!r}")
    print(f"greedy: {text!r}")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) >= 4 and argv[0] == "slice":
        return slice_chat(argv[1], argv[2], int(argv[3]))
    if len(argv) == 3 and argv[0] == "check-loss":
        return check_loss(argv[1], float(argv[2]))
    if len(argv) == 3 and argv[0] == "generate":
        return generate(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
