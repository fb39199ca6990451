#!/usr/bin/env python3
"""Helpers of the rehearsal (scripts/main.sh), each a step a person would do by hand.

    rehearsal_tools.py slice SAMPLE OUT N [--max-chars C]
        the first N chat records of the sample (of at most C characters), as conversations
    rehearsal_tools.py check-loss LOG RATIO
        fail unless the last losses are below RATIO x the first
    rehearsal_tools.py generate CKPT DATA --record K --tokens N [--pack DIR]
        load a checkpoint with transformers, greedy-decode record K's prompt and fail unless
        the completion is the beginning of record K's answer in DATA

Exit status: 0 yes, 1 the check said no, 2 usage, 65 bad input (a file or record that
cannot be used), as the evenkeel binary's.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

EXIT_NO, EXIT_USAGE, EXIT_BAD_INPUT = 1, 2, 65
ASSISTANT_HEADER = "<|im_start|>assistant\n"  # ChatML's, which Qwen3's template writes


class BadInput(Exception):
    """A file or record that cannot be used: exit 65, the message names it."""


def slice_chat(sample: str, out: str, n: int, max_chars: int = 0) -> int:
    """A learnable slice: the first n of the sample's chat records (ChatML text), skipping
    those longer than max_chars characters (0: no limit), so a tiny model can memorize
    them in a few minutes of CPU; written back as conversations ({"messages": [...]})
    for `evenkeel pack` to render with the model's own template."""
    kept = []
    with open(sample, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            try:
                text = json.loads(line).get("text", "")
            except (json.JSONDecodeError, AttributeError) as e:
                raise BadInput(f"{sample}:{number}: not a JSON object: {e}") from None
            if not isinstance(text, str) or not text.startswith("<|im_start|>"):
                continue
            if max_chars and len(text) > max_chars:
                continue
            turns = re.findall(r"<\|im_start\|>(\w+)\n(.*?)(?:<\|im_end\|>|$)", text, re.S)
            kept.append(json.dumps({"messages": [{"role": r, "content": c} for r, c in turns]},
                                   ensure_ascii=False) + "\n")
            if len(kept) == n:
                break
    with open(out, "w", encoding="utf-8") as f:
        f.writelines(kept)
    limit = f" of at most {max_chars:,} characters" if max_chars else ""
    print(f"slice: {len(kept)} conversations{limit} -> {out}")
    if len(kept) < n:
        print(f"slice: {sample} has only {len(kept)} chat records{limit}, {n} asked", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def check_loss(log: str, ratio: float) -> int:
    with open(log, encoding="utf-8") as f:
        losses = [float(x) for x in re.findall(r"\] step \d+ epoch \d+ loss ([\d.]+)", f.read())]
    if len(losses) < 6:
        print(f"check-loss: only {len(losses)} loss lines in {log}", file=sys.stderr)
        return EXIT_NO
    k = 5
    first, last = losses[0], sum(losses[-k:]) / k
    verdict = last <= ratio * first
    print(f"loss: first step {first:.3f} (chance for Qwen3's vocabulary: ln 151,936 = 11.93) -> "
          f"mean of the last {k} steps {last:.3f}: {'fell' if verdict else 'did NOT fall'} below {ratio:g} x the start")
    return 0 if verdict else EXIT_NO


# ---------------------------------------------------------------------------------------------
# generate: the trained model against the data it was trained on


def read_conversations(data: str) -> list[list[dict]]:
    """The "messages" of every record of a JSONL file of conversations, in order."""
    records = []
    with open(data, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                messages = json.loads(line)["messages"]
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise BadInput(f"{data}:{number}: not a conversation ({{\"messages\": [...]}}): {e!r}") from None
            if not isinstance(messages, list):
                raise BadInput(f"{data}:{number}: messages: not a list")
            records.append(messages)
    return records


def split_at_first_answer(rendered: str, where: str) -> tuple[str, str]:
    """(prompt, answer): the rendering up to and including the first assistant header,
    and everything after it."""
    at = rendered.find(ASSISTANT_HEADER)
    if at < 0:
        raise BadInput(f"{where}: no assistant turn ({ASSISTANT_HEADER!r}) in the rendered conversation")
    cut = at + len(ASSISTANT_HEADER)
    return rendered[:cut], rendered[cut:]


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def expected_answer(tok, data: str, record: int, tokens: int) -> dict:
    """Record `record` of `data` rendered with the model's chat template, as `evenkeel pack`
    renders it (transformers' apply_chat_template, add_generation_prompt=False), split at
    its first assistant header. The expected completion is the answer's first tokens up to
    where it parts from every other record's answer, then `tokens` more: tokens that only
    the question (not the template, not another record) can predict."""
    conversations = read_conversations(data)
    if not 0 <= record < len(conversations):
        raise BadInput(f"{data}: record {record} does not exist ({len(conversations)} records, numbered from 0)")

    def ids(text: str) -> list[int]:
        return tok(text, add_special_tokens=False)["input_ids"]

    answers, prompt_ids = [], None
    for k, messages in enumerate(conversations):
        where = f"{data}: record {k}"
        rendered = tok.apply_chat_template(messages, tokenize=False)
        prompt, answer = split_at_first_answer(rendered, where)
        full, head = ids(rendered), ids(prompt)
        # The header ends in a special token's newline: the prompt's ids are the record's.
        if full[:len(head)] != head:
            raise BadInput(f"{where}: the prompt's tokens are not a prefix of the record's")
        answers.append(full[len(head):])
        if k == record:
            prompt_ids, prompt_text, answer_text = head, prompt, answer
    mine = answers[record]
    shared = max((common_prefix(mine, a) for k, a in enumerate(answers) if k != record), default=0)
    want = shared + tokens
    if len(mine) < want:
        raise BadInput(f"{data}: record {record}: its answer has {len(mine)} tokens, {want} needed "
                       f"({shared} shared with another record's, then {tokens})")
    return {"prompt": prompt_text, "prompt_ids": prompt_ids, "answer": answer_text,
            "expected_ids": mine[:want], "shared": shared, "records": len(conversations)}


def find_in_pack(pack: str, sequence: list[int]) -> tuple[int, int, int] | None:
    """(rank, block, offset) of the first trained block holding `sequence` whole, or None:
    the prompt and its answer were one training context, not two halves across blocks."""
    import numpy as np
    from evenkeel import BlockDataset

    world = BlockDataset(pack, 0).world
    sets = [BlockDataset(pack, r) for r in range(world)]
    trained = min(ds.local_blocks for ds in sets)  # evenfix's pin: blocks past it never train
    want = np.asarray(sequence, dtype=np.int32)
    n = len(want)
    for ds in sets:
        blocks = ds.tensor.numpy()[:trained]
        if n > blocks.shape[1]:
            return None
        windows = np.lib.stride_tricks.sliding_window_view(blocks, n, axis=1)
        hits = np.argwhere((windows == want).all(axis=2))
        if len(hits):
            return ds.rank, int(hits[0][0]), int(hits[0][1])
    return None


def generate(ckpt: str, data: str, record: int, tokens: int, pack: str | None) -> int:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging

    logging.set_verbosity_error()  # errors still show; progress bars and notes do not
    logging.disable_progress_bar()
    tok = AutoTokenizer.from_pretrained(ckpt)
    want = expected_answer(tok, data, record, tokens)
    expected = want["expected_ids"]
    if pack:
        found = find_in_pack(pack, want["prompt_ids"] + expected)
        if found is None:
            raise BadInput(f"{pack}: record {record}'s prompt and expected answer ({len(want['prompt_ids'])} + "
                           f"{len(expected)} tokens) are in no trained block: the model never saw them together")
        where = f"; in the pack at rank {found[0]} block {found[1]} offset {found[2]}"
    else:
        where = ""
    model = AutoModelForCausalLM.from_pretrained(ckpt)  # bf16, as saved
    model.eval()
    ids = torch.tensor([want["prompt_ids"]])
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=len(expected),
                             do_sample=False, pad_token_id=tok.eos_token_id)
    got = out[0][ids.shape[1]:].tolist()
    shown = lambda t: tok.decode(t, skip_special_tokens=False)  # noqa: E731
    print(f"loaded {ckpt} with transformers ({type(model).__name__}, {model.dtype})")
    print(f"prompt: record {record} of {data} ({want['records']} records){where}, rendered with the model's "
          f"chat template up to its first assistant header ({len(want['prompt_ids'])} tokens):")
    print(f"  {want['prompt']!r}")
    print(f"expected: the answer's first {len(expected)} tokens as in the data ({want['shared']} shared with "
          f"another record's answer, then {tokens} only this prompt predicts):")
    print(f"  {shown(expected)!r}")
    print(f"greedy:   {shown(got)!r}")
    if got == expected:
        print(f"generate: the greedy completion reproduces the first {len(expected)} tokens of record {record}'s "
              f"answer: the model learned its training data")
        return 0
    first = common_prefix(got, expected)
    print(f"generate: the greedy completion is NOT the beginning of record {record}'s answer: tokens 0-{first - 1} "
          f"match, token {first} is {shown(got[first:first + 1])!r} (id {got[first] if first < len(got) else None}), "
          f"the data has {shown(expected[first:first + 1])!r} (id {expected[first]})"
          if first else
          f"generate: the greedy completion is NOT the beginning of record {record}'s answer: its first token is "
          f"{shown(got[:1])!r}, the data's {shown(expected[:1])!r}", file=sys.stderr)
    return EXIT_NO


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rehearsal_tools.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("slice", help="the first N chat records of the sample, as conversations")
    s.add_argument("sample")
    s.add_argument("out")
    s.add_argument("n", type=int)
    s.add_argument("--max-chars", type=int, default=0, help="skip records longer than this (0: no limit)")
    c = sub.add_parser("check-loss", help="fail unless the last losses are below RATIO x the first")
    c.add_argument("log")
    c.add_argument("ratio", type=float)
    g = sub.add_parser("generate", help="greedy completion of a training record's prompt against its answer")
    g.add_argument("ckpt", help="checkpoint (a Hugging Face model directory)")
    g.add_argument("data", help="the conversations the run was packed from (JSONL, {\"messages\": [...]})")
    g.add_argument("--record", type=int, default=0, help="which record (from 0)")
    g.add_argument("--tokens", type=int, default=8,
                   help="answer tokens to reproduce past the longest beginning it shares with another record's")
    g.add_argument("--pack", help="the run's pack: fail unless the prompt and expected answer are in one trained block")
    try:
        a = p.parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code else 0
    try:
        if a.command == "slice":
            if a.n < 1 or a.max_chars < 0:
                print("rehearsal_tools.py: slice: N must be at least 1, --max-chars at least 0", file=sys.stderr)
                return EXIT_USAGE
            return slice_chat(a.sample, a.out, a.n, a.max_chars)
        if a.command == "check-loss":
            return check_loss(a.log, a.ratio)
        if a.tokens < 1 or a.record < 0:
            print("rehearsal_tools.py: generate: --tokens must be at least 1, --record at least 0", file=sys.stderr)
            return EXIT_USAGE
        return generate(a.ckpt, a.data, a.record, a.tokens, a.pack)
    except BadInput as e:
        print(f"rehearsal_tools.py: {a.command}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:
        print(f"rehearsal_tools.py: {a.command}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
