"""Reading the text a Debian machine ships, for make_corpus.py: sorted file walks, decoding
(gunzip, strict UTF-8), GNU gettext .mo catalogs, and cutting documents into records.

Everything here is deterministic given the machine state and the random.Random passed in.
"""

import gzip
import hashlib
import math
import os
import random
import re
import struct
import subprocess

kMaxRecordBytes = 20 * 1024

kSkipDocExt = (".png", ".gif", ".jpg", ".jpeg", ".svg", ".ico", ".pdf", ".gz.sig", ".json",
               ".json.gz", ".woff", ".ttf", ".bz2", ".xz", ".zip", ".pyc", ".mo", ".db")

# ---------------------------------------------------------------------------------------
# Reading sources

_allowed_files = None  # set by restrict_to_packages(); None: every file qualifies


def restrict_to_packages(packages):
    """Makes walk_sorted() yield only files that dpkg says the given packages own, so the
    corpus does not change when unrelated packages are installed. Returns (installed,
    missing) package names; if dpkg-query is unavailable, nothing is restricted."""
    global _allowed_files
    try:
        status = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${Status}\n", *packages],
                                capture_output=True, text=True).stdout
        installed = sorted({line.split()[0] for line in status.splitlines()
                            if line.endswith(" installed")})
        listing = subprocess.run(["dpkg-query", "-L", *installed], capture_output=True,
                                 text=True).stdout if installed else ""
    except OSError:
        return [], list(packages)
    _allowed_files = set(listing.splitlines())
    return installed, sorted(set(packages) - set(installed))


def walk_sorted(top, keep):
    """Yields regular (non-symlink) file paths under top, in sorted order, where keep(path)."""
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if _allowed_files is not None and path not in _allowed_files:
                continue
            if not os.path.islink(path) and os.path.isfile(path) and keep(path):
                yield path


def read_text(path):
    """Returns the file's text (gunzipped if .gz) or None if not strict UTF-8 text."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        if path.endswith(".gz"):
            data = gzip.decompress(data)
        text = data.decode("utf-8", errors="strict")
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile, ValueError):
        return None
    if not text or "\x00" in text:
        return None
    # Drop files that are mostly control characters (binary data that happens to decode).
    bad = sum(1 for c in text[:4096] if ord(c) < 32 and c not in "\t\n\r\f")
    if bad > 8:
        return None
    return text


def read_mo(path):
    """Parses a GNU gettext .mo file. Returns [(msgid, msgstr)], plural forms split out."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        magic = struct.unpack("<I", data[:4])[0]
        if magic == 0x950412DE:
            end = "<"
        elif magic == 0xDE120495:
            end = ">"
        else:
            return []
        _, n, orig_off, trans_off = struct.unpack(end + "4I", data[4:20])
        raw = []
        for i in range(n):
            olen, ooff = struct.unpack(end + "2I", data[orig_off + 8 * i:orig_off + 8 * i + 8])
            tlen, toff = struct.unpack(end + "2I", data[trans_off + 8 * i:trans_off + 8 * i + 8])
            raw.append((data[ooff:ooff + olen], data[toff:toff + tlen]))
    except (OSError, struct.error):
        return []
    charset = "utf-8"
    for msgid, msgstr in raw:
        if msgid == b"":
            m = re.search(rb"charset=([A-Za-z0-9_\-]+)", msgstr)
            if m:
                charset = m.group(1).decode("ascii").lower()
    if charset in ("charset", "ascii", "us-ascii"):
        charset = "utf-8"
    pairs = []
    for msgid, msgstr in raw:
        if msgid == b"" or not msgstr:
            continue
        if b"\x04" in msgid:  # msgctxt EOT msgid
            msgid = msgid.split(b"\x04", 1)[1]
        try:
            ids = msgid.decode("utf-8").split("\x00")
            strs = msgstr.decode(charset).split("\x00")
        except (UnicodeDecodeError, LookupError):
            continue
        for k, s in enumerate(strs):
            if s:
                pairs.append((ids[min(k, len(ids) - 1)], s))
    return pairs


def mo_languages():
    """{lang: [catalog paths]} for every non-English locale that has gettext catalogs."""
    base = "/usr/share/locale"
    langs = {}
    if not os.path.isdir(base):
        return langs
    for lang in sorted(os.listdir(base)):
        if lang.startswith("en") or "@" in lang and lang.split("@")[1] in ("quot", "boldquot"):
            continue
        paths = list(walk_sorted(os.path.join(base, lang), lambda p: p.endswith(".mo")))
        if paths:
            langs[lang] = paths
    return langs


def python_stdlib_dir():
    for d in sorted(os.listdir("/usr/lib")):
        if re.fullmatch(r"python3\.\d+", d):
            return os.path.join("/usr/lib", d)
    return None


def doc_keep(path):
    low = path.lower()
    return not low.endswith(kSkipDocExt)


def header_keep(path):
    name = os.path.basename(path)
    ext = os.path.splitext(name)[1]
    return ext in (".h", ".hpp", ".hh", ".hxx", ".tcc", ".inc", ".def") or (
        ext == "" and "/c++/" in path)


def man_paths(translated):
    base = "/usr/share/man"
    out = []
    if not os.path.isdir(base):
        return out
    for sub in sorted(os.listdir(base)):
        is_section = sub.startswith("man")
        if is_section == translated:
            continue
        out.extend(walk_sorted(os.path.join(base, sub), lambda p: p.endswith(".gz")))
    return out


class Docs:
    """Iterates the texts of a shuffled file list, skipping unreadable files and duplicates."""

    def __init__(self, paths, rng, seen, reader=read_text):
        self.paths = list(paths)
        rng.shuffle(self.paths)
        self.pos = 0
        self.seen = seen
        self.reader = reader

    def next(self):
        while self.pos < len(self.paths):
            path = self.paths[self.pos]
            self.pos += 1
            text = self.reader(path)
            if text is None:
                continue
            if isinstance(text, str):
                if text.startswith(".so ") and len(text) < 200:  # man page redirect
                    continue
                digest = hashlib.sha1(text.encode("utf-8")).digest()
                if digest in self.seen:
                    continue
                self.seen.add(digest)
            return path, text
        return None


# ---------------------------------------------------------------------------------------
# Cutting documents into records

def sample_length(rng):
    """Record length in UTF-8 bytes: a few tiny ones, mostly 16 B..8 KB, a tail to 20 KB."""
    r = rng.random()
    if r < 0.03:
        return rng.randint(1, 16)
    if r < 0.50:
        return int(math.exp(rng.uniform(math.log(16), math.log(1000))))
    if r < 0.90:
        return int(math.exp(rng.uniform(math.log(1000), math.log(8000))))
    return int(math.exp(rng.uniform(math.log(8000), math.log(kMaxRecordBytes))))


def cut(text, pos, nbytes, rng):
    """Returns the end of a piece of text starting at pos, about nbytes long in UTF-8,
    preferring to end after a newline, then after a space."""
    ratio = max(1.0, len(text[pos:pos + 4096].encode("utf-8")) / max(1, len(text[pos:pos + 4096])))
    nchars = max(1, int(nbytes / ratio))
    end = min(len(text), pos + nchars)
    if end < len(text) and nchars > 24:
        window = text[pos + nchars // 2:end]
        k = window.rfind("\n")
        if k < 0 and rng.random() < 0.8:
            k = window.rfind(" ")
        if k >= 0:
            end = pos + nchars // 2 + k + 1
    while len(text[pos:end].encode("utf-8")) > kMaxRecordBytes:
        end = pos + (end - pos) * 3 // 4
    return max(end, pos + 1)


def pieces(text, rng, cap_bytes):
    """Splits the first cap_bytes (about) of text into record-sized pieces."""
    out, pos, used = [], 0, 0
    while pos < len(text) and used < cap_bytes:
        end = cut(text, pos, sample_length(rng), rng)
        piece = text[pos:end]
        out.append(piece)
        used += len(piece.encode("utf-8"))
        pos = end
    return out


class Catalogs:
    """Per language, a shuffled stream of (msgid, msgstr) pairs from its catalogs."""

    def __init__(self, langs, seed, label):
        self.langs = langs
        self.streams = {}
        for lang, paths in langs.items():
            rng = random.Random(f"{seed}:{label}:{lang}")
            self.streams[lang] = (Docs(paths, rng, set(), reader=read_mo), [], rng)

    def take(self, lang, nbytes):
        """Returns consecutive pairs of one language totalling about nbytes of msgstr."""
        docs, buf, _ = self.streams[lang]
        out, used = [], 0
        while used < nbytes:
            if not buf:
                item = docs.next()
                if item is None:
                    break
                buf.extend(reversed(item[1]))
                continue
            pair = buf.pop()
            out.append(pair)
            used += len(pair[1].encode("utf-8")) + 1
        return out
