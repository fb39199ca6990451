#!/usr/bin/env python3
"""Times bpe-qwen (PyPI `bpe-qwen`, Rust, rust-gems BPE) encoding a JSONL corpus with its
batch API, for bench_tokenize.py. Run it with the project venv's Python (.venv/bin/python).

  .venv/bin/python bench/tokenize/bpe_qwen_bench.py --tokenizer PATH/tokenizer.json \
      --corpus FILE --threads N [--batch 1024] [--counts FILE]

bpe-qwen reads vocab.json + merges.txt (+ tokenizer_config.json for the added tokens), not
tokenizer.json, so they are written next to a cache key under bench/out/bpe-qwen/ from the
tokenizer.json first. Its package __init__ imports transformers and huggingface_hub (only
needed for its AutoTokenizer shims), so the compiled module is loaded directly.

Timed: QwenTokenizer.encode_batch_parallel(batch) over batches of 1024 records, with
RAYON_NUM_THREADS=N so rayon's global pool has N threads. Its knobs: encode(text) (one text),
encode_batch_parallel(texts, num_workers=None) (rayon; num_workers=K makes a K-thread pool
for the call instead of the global one, which measured no faster here), count_tokens(text).
Loading the corpus is not timed.
Prints one JSON object: {"seconds", "tokens", "bytes", "records"}.
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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_native():
    spec = importlib.util.find_spec("bpe_qwen")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("bpe_qwen_bench: error: bpe-qwen is not installed in this Python "
                 f"({sys.executable}); run scripts/setup.sh")
    so = sorted(glob.glob(os.path.join(spec.submodule_search_locations[0], "bpe_qwen.*.so")))
    if not so:
        sys.exit("bpe_qwen_bench: error: bpe-qwen's compiled module not found")
    native_spec = importlib.util.spec_from_file_location("bpe_qwen", so[0])
    module = importlib.util.module_from_spec(native_spec)
    native_spec.loader.exec_module(module)
    return module


def model_dir(tokenizer_json):
    """Writes vocab.json, merges.txt and tokenizer_config.json for bpe-qwen; returns the dir."""
    with open(tokenizer_json, "rb") as f:
        raw = f.read()
    out = os.path.join(ROOT, "bench/out/bpe-qwen", hashlib.sha256(raw).hexdigest()[:16])
    if os.path.isfile(os.path.join(out, "merges.txt")):
        return out
    tok = json.loads(raw)
    model = tok["model"]
    if model.get("type") != "BPE":
        sys.exit("bpe_qwen_bench: error: not a BPE tokenizer.json")
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--counts")
    args = ap.parse_args()
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)  # before the rayon pool starts

    native = load_native()
    tok = native.QwenTokenizer(model_dir(args.tokenizer))
    with open(args.corpus, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    nbytes = sum(len(t.encode("utf-8")) for t in texts)

    tok.encode_batch_parallel(texts[:64])  # warm-up; also starts the global pool
    counts = []
    t0 = time.perf_counter()
    for i in range(0, len(texts), args.batch):
        for ids in tok.encode_batch_parallel(texts[i:i + args.batch]):
            counts.append(len(ids))
    seconds = time.perf_counter() - t0
    if args.counts:
        with open(args.counts, "w") as f:
            f.write("".join(f"{n}\n" for n in counts))
    print(json.dumps({"seconds": seconds, "tokens": sum(counts), "bytes": nbytes,
                      "records": len(texts)}))


if __name__ == "__main__":
    main()
