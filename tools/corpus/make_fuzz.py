#!/usr/bin/env python3
"""Writes random but deterministic {"text": ...} lines for tokenizer parity fuzzing: short
strings mixing ASCII, whitespace of every kind, contraction fragments (incl. U+017F and the
Kelvin sign), special-token pieces, combining marks, Hangul jamo, Indic clusters, emoji with
ZWJ and skin tones, and random code points up to U+2FFFF (so characters new in recent
Unicode versions show up). It found the Unicode-version mismatches now in tricky.jsonl.

Usage: tools/corpus/make_fuzz.py [--lines 30000] [--seed 7] --out FILE
"""

import argparse
import json
import random

kAscii = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
              "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
kSpaces = [" ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u3000", "\u2028", "\u2029", "\u0085", "\x0b",
           "\x0c", "\u2009", "\u200b", "\u180e", "\ufeff", "  ", "\n\n"]
kFragments = [
    "'s", "'S", "'t", "'T", "'re", "'RE", "'ve", "'m", "'ll", "'LL", "'d", "'D", "ſ", "'ſ", "\u212a",
    "'\u212a", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>",
    "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|", "|>", "<", "tool_call>",
    "<tool_call>", "e\u0301", "\u0301", "\u0308", "\u0323", "\u1100\u1161\u11a8", "\u1100", "\u1161",
    "\u11a8", "각", "\u0958", "क़", "्", "ि", "ক্ষ", "\u09c7\u09be", "ั", "่", "ำ", "👩‍💻", "👍🏽", "🏽",
    "\u200d", "\ufe0f", "🇯🇵", "1️⃣", "😀", "²", "½", "Ⅻ", "٣", "१", "１", "𝟘", "漢", "字", "の",
    "カ", "ｶ", "ﾞ", "한", "İ", "ß", "ﬁ", "Å", "\u212b", "\uf900",
]


def random_code_point(rng):
    while True:
        r = rng.random()
        if r < 0.5:
            cp = rng.randrange(0x80, 0x3000)
        elif r < 0.8:
            cp = rng.randrange(0x3000, 0x10000)
        else:
            cp = rng.randrange(0x10000, 0x30000)
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def random_text(rng):
    parts = []
    for _ in range(rng.choice([1, 2, 3, 5, 8, 13, 30, 80, 200])):
        r = rng.random()
        if r < 0.35:
            parts.append(rng.choice(kAscii))
        elif r < 0.55:
            parts.append(rng.choice(kSpaces))
        elif r < 0.80:
            parts.append(rng.choice(kFragments))
        else:
            parts.append(random_code_point(rng))
    return "".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=30000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with open(args.out, "w", encoding="utf-8") as f:
        for _ in range(args.lines):
            f.write(json.dumps({"text": random_text(rng)}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
