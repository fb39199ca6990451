#!/usr/bin/env python3
"""Times one Python tokenizer peer encoding a JSONL corpus, for bench_tokenize.py. Run it with
the project venv's Python (.venv/bin/python).

  .venv/bin/python bench/tokenize/peer_bench.py --peer hf|fastokens|bpe-qwen \
      --tokenizer PATH/tokenizer.json --corpus FILE --threads N [--batch 1024] \
      [--counts FILE] [--ids FILE]

The peers, and how each is told its thread count (set before its pool starts):
  hf         PyPI `tokenizers` (Hugging Face's Rust library, the reference for ids):
             Tokenizer.from_file(T).encode_batch(batch, add_special_tokens=False);
             RAYON_NUM_THREADS=N.
  fastokens  PyPI `fastokens` (Rust, exact): Tokenizer.from_file(T).encode_batch(batch);
             FASTOKENS_BPE_THREADS=N (its own fork-join pool, not rayon).
  bpe-qwen   PyPI `bpe-qwen` (Rust, rust-gems BPE; Qwen only):
             QwenTokenizer.encode_batch_parallel(batch); RAYON_NUM_THREADS=N.
Timed: the encode calls only, summed over batches of --batch records, after a 64-record
warm-up. For hf and fastokens that is the bare encode_batch: reading each encoding's ids
(to check them) happens outside the timer. bpe-qwen returns Python lists of ids, so for it
that conversion is inside. Loading the tokenizer ("load_seconds", reported apart) and the
corpus is not timed.

bpe-qwen reads vocab.json + merges.txt (+ tokenizer_config.json for the added tokens), not
tokenizer.json, so they are written next to a cache key under bench/out/bpe-qwen/ from the
tokenizer.json first. Its package __init__ imports transformers and huggingface_hub (only
needed for its AutoTokenizer shims), so the compiled module is loaded directly.

Prints one JSON object: {"seconds", "load_seconds", "tokens", "bytes", "records"}. --counts
writes each record's token count, one a line; --ids all records' ids end to end as
little-endian uint32.
"""

import argparse
import glob
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
THREADS_ENV = {"hf": "RAYON_NUM_THREADS", "fastokens": "FASTOKENS_BPE_THREADS",
               "bpe-qwen": "RAYON_NUM_THREADS"}


def die(msg):
    sys.exit(f"peer_bench: error: {msg}")


def load_bpe_qwen_native():
    spec = importlib.util.find_spec("bpe_qwen")
    if spec is None or not spec.submodule_search_locations:
        die(f"bpe-qwen is not installed in this Python ({sys.executable}); run scripts/setup.sh")
    so = sorted(glob.glob(os.path.join(spec.submodule_search_locations[0], "bpe_qwen.*.so")))
    if not so:
        die("bpe-qwen's compiled module not found")
    native_spec = importlib.util.spec_from_file_location("bpe_qwen", so[0])
    module = importlib.util.module_from_spec(native_spec)
    native_spec.loader.exec_module(module)
    return module


def bpe_qwen_model_dir(tokenizer_json):
    """Writes vocab.json, merges.txt and tokenizer_config.json for bpe-qwen; returns the dir."""
    with open(tokenizer_json, "rb") as f:
        raw = f.read()
    out = os.path.join(ROOT, "bench/out/bpe-qwen", hashlib.sha256(raw).hexdigest()[:16])
    if os.path.isfile(os.path.join(out, "merges.txt")):
        return out
    tok = json.loads(raw)
    model = tok["model"]
    if model.get("type") != "BPE":
        die("not a BPE tokenizer.json")
    tmp = out + f".tmp{os.getpid()}"
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(model["vocab"], f, ensure_ascii=False)
    with open(os.path.join(tmp, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for m in model["merges"]:
            f.write((" ".join(m) if isinstance(m, list) else m) + "\n")
    config = os.path.join(os.path.dirname(tokenizer_json), "tokenizer_config.json")
    if os.path.isfile(config):
        shutil.copy(config, tmp)
    else:  # build the added-tokens part of a tokenizer_config.json
        decoder = {str(a["id"]): a for a in tok.get("added_tokens", [])}
        with open(os.path.join(tmp, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"added_tokens_decoder": decoder}, f, ensure_ascii=False)
    os.replace(tmp, out)
    return out


def make_encoder(peer, tokenizer_json):
    """Returns encode(batch) -> opaque results, and ids(result) -> the record's ids."""
    if peer == "hf":
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(tokenizer_json)
        return lambda batch: tok.encode_batch(batch, add_special_tokens=False), lambda e: e.ids
    if peer == "fastokens":
        import fastokens
        tok = fastokens.Tokenizer.from_file(tokenizer_json)
        return lambda batch: tok.encode_batch(batch, add_special_tokens=False), lambda e: e.ids
    tok = load_bpe_qwen_native().QwenTokenizer(bpe_qwen_model_dir(tokenizer_json))
    return tok.encode_batch_parallel, lambda ids: ids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer", required=True, choices=sorted(THREADS_ENV))
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--counts")
    ap.add_argument("--ids")
    args = ap.parse_args()
    os.environ[THREADS_ENV[args.peer]] = str(args.threads)  # before the pool starts
    if args.peer == "hf":
        os.environ["TOKENIZERS_PARALLELISM"] = "true"

    t0 = time.perf_counter()
    encode, ids_of = make_encoder(args.peer, args.tokenizer)
    load_seconds = time.perf_counter() - t0
    with open(args.corpus, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    nbytes = sum(len(t.encode("utf-8")) for t in texts)

    encode(texts[:64])  # warm-up; also starts the thread pool
    counts = []
    chunks = []
    seconds = 0.0
    for i in range(0, len(texts), args.batch):
        t0 = time.perf_counter()
        encoded = encode(texts[i:i + args.batch])
        seconds += time.perf_counter() - t0
        for e in encoded:
            ids = ids_of(e)
            counts.append(len(ids))
            if args.ids:
                chunks.append(np.asarray(ids, dtype="<u4"))
    if args.counts:
        with open(args.counts, "w") as f:
            f.write("".join(f"{n}\n" for n in counts))
    if args.ids:
        (np.concatenate(chunks) if chunks else np.zeros(0, "<u4")).tofile(args.ids)
    print(json.dumps({"seconds": seconds, "load_seconds": load_seconds, "tokens": sum(counts),
                      "bytes": nbytes, "records": len(texts)}))


if __name__ == "__main__":
    main()
