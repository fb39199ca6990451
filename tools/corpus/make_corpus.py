#!/usr/bin/env python3
"""Builds a realistic mixed-text JSONL corpus from text that ships on a Debian 12 machine.

Each output line is {"text": "..."}. The mix (shares of the output bytes, see kMix):
prose from /usr/share/doc and /usr/share/common-licenses, Python stdlib sources under
/usr/lib/python3.*, C and C++ headers under /usr/include, man pages (roff source,
decompressed; English and translated), translations from the gettext catalogs under
/usr/share/locale (many scripts: CJK, Japanese, Korean, Thai, Arabic, Hebrew, Devanagari,
Bengali, Cyrillic, ...), and chat-formatted records (Qwen ChatML and some Llama 3 style,
with special tokens embedded in the text) built from the same material.

Deterministic: every directory listing is sorted, every random choice comes from a
random.Random seeded from --seed and a fixed label, and nothing depends on time, so the
same machine state gives a byte-identical file. The file size and sha256 are printed on
stdout; a summary of the mix goes to stderr.

Usage:
  tools/corpus/make_corpus.py                       # bench/corpus/corpus-50mb.jsonl
  tools/corpus/make_corpus.py --sample              # testdata/tokenize/sample.jsonl (~1.2 MB)
  tools/corpus/make_corpus.py --target-mb 5 --out /tmp/c.jsonl
"""

import argparse
import hashlib
import json
import os
import random
import re
import sys

from chat import ChatBuilder
from sources import Catalogs, Docs, cut, doc_keep, header_keep, kMaxRecordBytes, man_paths, \
    mo_languages, pieces, python_stdlib_dir, restrict_to_packages, sample_length, walk_sorted

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MB = 1000 * 1000

# Share of output bytes per category. Chat records are built last from the same sources.
kMix = [
    ("prose", 0.17),
    ("python", 0.10),
    ("c_headers", 0.10),
    ("man_en", 0.08),
    ("man_l10n", 0.07),
    ("l10n", 0.28),
    ("chat", 0.20),
]

# Only files owned by these Debian packages are read, so the corpus depends on their
# versions alone, not on whatever else a machine has installed. All are installed by
# scripts/setup.sh (APT_PACKAGES and their dependencies) or are part of every Debian system.
kCorpusPackages = [
    # base system (priority required)
    "base-files", "coreutils", "tar", "dpkg", "apt", "bash", "findutils", "grep", "sed",
    "diffutils", "util-linux", "login", "passwd", "perl-base", "libc-bin", "libc6", "debconf",
    # toolchain and -dev packages from setup.sh, with their docs, headers and man pages
    "gcc-12", "g++-12", "cpp-12", "binutils", "binutils-common", "libc6-dev", "linux-libc-dev",
    "libstdc++-12-dev", "libgcc-12-dev", "make", "cmake", "cmake-data", "ninja-build",
    "pkg-config", "ccache", "git", "libgtest-dev", "libgmock-dev", "googletest",
    "libbenchmark-dev", "libfmt-dev", "libsimdjson-dev", "libutf8proc-dev", "libxxhash-dev",
    "libzstd-dev", "zstd", "libonig-dev", "libcli11-dev", "libcpp-httplib-dev",
    "libtomlplusplus-dev", "pybind11-dev", "unicode-data", "nodejs",
    # Python standard library sources
    "python3.11", "python3.11-minimal", "libpython3.11-stdlib", "libpython3.11-minimal",
    "libpython3.11-dev", "python3-pip", "python3-venv",
    # man pages and translation catalogs (setup.sh installs these for the corpus)
    "manpages", "manpages-dev", "man-db", "libc-l10n", "iso-codes", "libglib2.0-data",
    "libgtk2.0-common", "xkb-data", "shared-mime-info",
]

# Languages weighted up in the translation mix so every script the tokenizer must handle
# is well represented; every other catalog language still gets weight 1.
kPriorityLangs = {
    "zh_CN": 3, "zh_TW": 2, "ja": 3, "ko": 3, "th": 3, "ar": 3, "he": 3, "hi": 3,
    "bn": 3, "ru": 3, "uk": 2, "el": 2, "ka": 2, "ta": 2, "fa": 2, "mr": 2, "ne": 2,
    "pa": 2, "gu": 2, "te": 2, "kn": 2, "ml": 2, "vi": 2, "tr": 2, "de": 2, "fr": 2,
    "es": 2, "pt_BR": 2, "pl": 2, "cs": 2, "it": 2,
}


def json_line(text):
    return json.dumps({"text": text}, ensure_ascii=False) + "\n"


class Budget:
    def __init__(self, limit):
        self.limit = limit
        self.used = 0
        self.records = []

    def full(self):
        return self.used >= self.limit

    def add(self, text):
        line = json_line(text)
        self.records.append(line)
        self.used += len(line.encode("utf-8"))


def fill_from_docs(budget, docs, rng, cap_bytes, joiner_eot=False):
    while not budget.full():
        item = docs.next()
        if item is None:
            return
        _, text = item
        for piece in pieces(text, rng, cap_bytes):
            if joiner_eot and rng.random() < 0.04:
                # Pretraining-style packing: two documents joined by an end-of-text token.
                other = docs.next()
                if other is not None:
                    piece = piece + "<|endoftext|>" + other[1][:rng.randint(1, 2000)]
            budget.add(piece)
            if budget.full():
                return


# ---------------------------------------------------------------------------------------
# Translations

def fill_l10n(budget, catalogs, rng, per_lang):
    """Round-robin over languages, a language of weight w taking w turns a round. Each round
    visits the weighted-up languages first (in a seeded random order), so a small sample still
    gets them. Returns the languages whose catalogs ran out."""
    langs = sorted(catalogs.langs)
    exhausted = set()
    while not budget.full() and len(exhausted) < len(langs):
        first = [k for k in langs if k in kPriorityLangs]
        rest = [k for k in langs if k not in kPriorityLangs]
        extra = [k for k in first for _ in range(kPriorityLangs[k] - 1)]
        for group in (first, rest, extra):
            rng.shuffle(group)
        for lang in first + rest + extra:
            if lang in exhausted:
                continue
            pairs = catalogs.take(lang, sample_length(rng))
            if not pairs:
                exhausted.add(lang)
                continue
            sep = "\n\n" if rng.random() < 0.3 else "\n"
            text = sep.join(s for _, s in pairs)
            text = text[:cut(text, 0, kMaxRecordBytes, rng)]
            budget.add(text)
            per_lang[lang] = per_lang.get(lang, 0) + len(text.encode("utf-8"))
            if budget.full():
                return exhausted
    return exhausted


# ---------------------------------------------------------------------------------------

kScripts = [
    ("Latin", r"[A-Za-z\u00C0-\u024F]"), ("Cyrillic", r"[\u0400-\u04FF]"),
    ("Greek", r"[\u0370-\u03FF]"), ("Arabic", r"[\u0600-\u06FF]"), ("Hebrew", r"[\u0590-\u05FF]"),
    ("Devanagari", r"[\u0900-\u097F]"), ("Bengali", r"[\u0980-\u09FF]"),
    ("Tamil", r"[\u0B80-\u0BFF]"), ("Thai", r"[\u0E00-\u0E7F]"), ("Georgian", r"[\u10A0-\u10FF]"),
    ("Hangul", r"[\uAC00-\uD7AF\u1100-\u11FF]"), ("Kana", r"[\u3040-\u30FF]"),
    ("Han", r"[\u4E00-\u9FFF]"), ("Emoji", r"[\U0001F300-\U0001FAFF]"),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="output path (default: bench/corpus/corpus-50mb.jsonl)")
    ap.add_argument("--target-mb", type=float, default=52.0,
                    help="output size in MB (10^6 bytes); default 52 so the file is over 50 MB")
    ap.add_argument("--sample", action="store_true",
                    help="write the small bundled sample (1.2 MB) to testdata/tokenize/sample.jsonl")
    ap.add_argument("--seed", type=int, default=20260101)
    ap.add_argument("--quiet", action="store_true", help="no mix summary on stderr")
    ap.add_argument("--all-files", action="store_true",
                    help="read every file under the source folders, not only kCorpusPackages' files")
    ap.add_argument("--if-missing", action="store_true", help="do nothing if the output exists")
    args = ap.parse_args()
    if args.sample:
        target = int(1.2 * MB)
        out = args.out or os.path.join(ROOT, "testdata/tokenize/sample.jsonl")
    else:
        target = int(args.target_mb * MB)
        out = args.out or os.path.join(ROOT, "bench/corpus/corpus-50mb.jsonl")
    if args.if_missing and os.path.isfile(out):
        print(f"{out} exists; not regenerated")
        return
    seed = args.seed
    # Per-file caps scale with the target so a small sample still draws on many files.
    scale = min(1.0, target / (50 * MB))
    cap = lambda kb: max(6000, int(kb * 1000 * scale))

    if not args.all_files:
        _, missing = restrict_to_packages(kCorpusPackages)
        if missing:
            print("make_corpus: warning: not installed (run scripts/setup.sh): " + " ".join(missing),
                  file=sys.stderr)
    langs = mo_languages()
    seen = set()
    budgets = {name: Budget(int(share * target)) for name, share in kMix}
    rng = random.Random(f"{seed}:cut")
    r = lambda label: random.Random(f"{seed}:files:{label}")

    prose_paths = list(walk_sorted("/usr/share/common-licenses", lambda p: True)) + list(
        walk_sorted("/usr/share/doc", doc_keep))
    fill_from_docs(budgets["prose"], Docs(prose_paths, r("prose"), seen), rng, cap(200), joiner_eot=True)
    py = python_stdlib_dir()
    py_paths = list(walk_sorted(py, lambda p: p.endswith(".py"))) if py else []
    fill_from_docs(budgets["python"], Docs(py_paths, r("python"), seen), rng, cap(60))
    fill_from_docs(budgets["c_headers"], Docs(walk_sorted("/usr/include", header_keep), r("c"), seen),
                   rng, cap(60))
    fill_from_docs(budgets["man_en"], Docs(man_paths(False), r("man_en"), seen), rng, cap(60))
    fill_from_docs(budgets["man_l10n"], Docs(man_paths(True), r("man_l10n"), seen), rng, cap(60))
    per_lang = {}
    exhausted = fill_l10n(budgets["l10n"], Catalogs(langs, seed, "l10n"), rng, per_lang)
    # A weighted-up language is thin when its catalogs ran out well short of its share.
    unit = budgets["l10n"].limit / max(1, sum(kPriorityLangs.get(k, 1) for k in langs))
    thin = sorted(k for k, w in kPriorityLangs.items()
                  if (k in exhausted or k not in langs) and per_lang.get(k, 0) < 0.3 * w * unit)
    if thin:
        print("make_corpus: warning: little text in " + ", ".join(thin) + " (apt packages with "
              "translations in those languages fix this; see scripts/setup.sh)", file=sys.stderr)
    # Whatever a category could not fill (a thin machine) is made up with chat records.
    short = sum(max(0, b.limit - b.used) for n, b in budgets.items() if n != "chat")
    budgets["chat"].limit += short
    chats = ChatBuilder(seed, langs)
    while not budgets["chat"].full():
        budgets["chat"].add(chats.record())

    records = []
    for name, _ in kMix:
        records.extend(budgets[name].records)
    random.Random(f"{seed}:order").shuffle(records)
    blob = "".join(records).encode("utf-8")
    blob.decode("utf-8")  # asserts valid UTF-8 (surrogates cannot be encoded above)

    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = f"{out}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(blob)
    os.replace(tmp, out)
    digest = hashlib.sha256(blob).hexdigest()

    if not args.quiet:
        err = sys.stderr
        print(f"make_corpus: {len(records)} records, seed {seed}", file=err)
        for name, _ in kMix:
            b = budgets[name]
            print(f"  {name:10s} {b.used / MB:7.2f} MB  {len(b.records):6d} records", file=err)
        lens = sorted(len(json.loads(x)["text"].encode("utf-8")) for x in records)
        print(f"  record bytes: min {lens[0]} median {lens[len(lens) // 2]} "
              f"p99 {lens[len(lens) * 99 // 100]} max {lens[-1]}", file=err)
        top = sorted(per_lang.items(), key=lambda kv: -kv[1])
        print(f"  catalog languages: {len(per_lang)}; " +
              ", ".join(f"{k} {v / 1000:.0f}k" for k, v in top[:40]), file=err)
        text = blob.decode("utf-8")
        counts = [(n, len(re.findall(p, text))) for n, p in kScripts]
        print("  characters by script: " + ", ".join(f"{n} {c}" for n, c in counts), file=err)
        print(f"  chat records with <|im_start|>: {text.count('<|im_start|>user')}, "
              f"Llama 3 style: {text.count('<|start_header_id|>user')}", file=err)
    print(f"{out} {len(blob)} bytes sha256 {digest}")


if __name__ == "__main__":
    main()
