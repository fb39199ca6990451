"""Chat-formatted records for make_corpus.py: Qwen ChatML (<|im_start|>role ... <|im_end|>,
sometimes with <think> sections) and Llama 3 (<|start_header_id|> ... <|eot_id|>), built
from the same sources as the rest of the corpus: translation pairs, code, man pages, prose.
"""

import os
import random
import re

from sources import Catalogs, Docs, cut, header_keep, kMaxRecordBytes, man_paths, \
    python_stdlib_dir, walk_sorted, doc_keep

kLangNames = {
    "ar": "Arabic", "bg": "Bulgarian", "bn": "Bengali", "ca": "Catalan", "cs": "Czech",
    "da": "Danish", "de": "German", "el": "Greek", "eo": "Esperanto", "es": "Spanish",
    "et": "Estonian", "eu": "Basque", "fa": "Persian", "fi": "Finnish", "fr": "French",
    "ga": "Irish", "gl": "Galician", "gu": "Gujarati", "he": "Hebrew", "hi": "Hindi",
    "hr": "Croatian", "hu": "Hungarian", "id": "Indonesian", "it": "Italian",
    "ja": "Japanese", "ka": "Georgian", "kk": "Kazakh", "kn": "Kannada", "ko": "Korean",
    "lt": "Lithuanian", "lv": "Latvian", "ml": "Malayalam", "mr": "Marathi", "ms": "Malay",
    "nb": "Norwegian Bokmål", "ne": "Nepali", "nl": "Dutch", "pa": "Punjabi", "pl": "Polish",
    "pt": "Portuguese", "pt_BR": "Brazilian Portuguese", "ro": "Romanian", "ru": "Russian",
    "sk": "Slovak", "sl": "Slovenian", "sq": "Albanian", "sr": "Serbian", "sv": "Swedish",
    "ta": "Tamil", "te": "Telugu", "th": "Thai", "tr": "Turkish", "uk": "Ukrainian",
    "vi": "Vietnamese", "zh_CN": "Simplified Chinese", "zh_TW": "Traditional Chinese",
    "zh_HK": "Chinese (Hong Kong)",
}
kEmoji = ["👍", "🙂", "🚀", "✅", "⚠️", "👩‍💻", "👋🏽", "🎉", "🤔", "📦", "🔥", "👨‍👩‍👧‍👦", "🏳️‍🌈", "💡"]


kSystemPrompts = [
    "You are a helpful assistant.",
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
    "You are an expert Linux system administrator. Answer concisely.",
    "You are a senior software engineer. Explain code clearly and point out bugs.",
    "You are a professional translator. Preserve formatting and placeholders like %s.",
    "Réponds toujours en français.",
    "あなたは親切なアシスタントです。",
]


def deroff(text):
    """A crude roff-to-text pass so chat answers read like prose, not macros."""
    out = []
    for line in text.split("\n"):
        if line.startswith(('.\\"', "'\\\"")):
            continue
        m = re.match(r"\.(SH|SS)\s+(.*)", line)
        if m:
            out.append("\n## " + m.group(2).strip('"'))
            continue
        m = re.match(r"\.(B|I|BR|IR|RB|RI|BI|IB)\s+(.*)", line)
        if m:
            line = m.group(2).replace('"', "")
        elif line.startswith("."):
            continue
        line = re.sub(r"\\f[BIRP]|\\f\(..|\\\(..|\\&|\\-", lambda k: "-" if k.group(0) == "\\-" else "", line)
        out.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


class ChatBuilder:
    def __init__(self, seed, langs):
        self.rng = random.Random(f"{seed}:chat")
        seen = set()
        r = lambda label: random.Random(f"{seed}:chat:{label}")
        py = python_stdlib_dir()
        self.code = {
            "python": Docs(walk_sorted(py, lambda p: p.endswith(".py")) if py else [], r("py"), seen),
            "c": Docs(walk_sorted("/usr/include", header_keep), r("c"), seen),
        }
        self.man = Docs(man_paths(False) + man_paths(True), r("man"), seen)
        self.prose = Docs(walk_sorted("/usr/share/doc", doc_keep), r("doc"), seen)
        self.catalogs = Catalogs(langs, seed, "chat")
        self.lang_list = sorted(langs)

    def snippet(self, docs, nbytes):
        item = docs.next()
        if item is None:
            return ""
        text = item[1]
        start = 0
        if len(text) > nbytes * 2:
            start = self.rng.randrange(0, len(text) - nbytes)
            nl = text.find("\n", start)
            start = nl + 1 if 0 <= nl < start + 200 else start
        return text[start:cut(text, start, nbytes, self.rng)]

    def turn(self):
        """Returns one (user, assistant) pair."""
        rng = self.rng
        kind = rng.random()
        if kind < 0.30 and self.lang_list:
            lang = rng.choice(self.lang_list)
            pairs = self.catalogs.take(lang, rng.randint(20, 1500))
            if pairs:
                name = kLangNames.get(lang, lang)
                user = f"Translate the following into {name}:\n\n" + "\n".join(p[0] for p in pairs)
                return user, "\n".join(p[1] for p in pairs)
        if kind < 0.45 and self.lang_list:
            lang = rng.choice(self.lang_list)
            q = self.catalogs.take(lang, rng.randint(10, 300))
            a = self.catalogs.take(lang, rng.randint(50, 3000))
            if q and a:
                return "\n".join(p[1] for p in q) + "?", "\n\n".join(p[1] for p in a)
        if kind < 0.70:
            lang = rng.choice(["python", "c"])
            code = self.snippet(self.code[lang], rng.randint(100, 4000))
            answer = deroff(self.snippet(self.man, rng.randint(100, 3000)))
            ask = rng.choice(["Explain this code:", "What does this do?", "Find the bug here.",
                              "Can you add comments to this?", "Why does this not compile?"])
            fence = "py" if lang == "python" and rng.random() < 0.3 else lang
            return f"{ask}\n\n```{fence}\n{code}\n```", answer
        if kind < 0.85:
            item = self.man.next()
            if item is not None:
                name = os.path.basename(item[0]).split(".")[0]
                body = deroff(item[1])
                body = body[:cut(body, 0, rng.randint(200, 6000), rng)]
                return rng.choice([f"How do I use {name}?", f"what does `{name}` do",
                                   f"Show me the options of {name}."]), body
        prose = self.snippet(self.prose, rng.randint(200, 6000))
        return "Summarize this:\n\n" + prose, prose[:cut(prose, 0, rng.randint(50, 600), rng)]

    def assistant_text(self, answer):
        rng = self.rng
        if rng.random() < 0.3:
            think = answer[:cut(answer, 0, rng.randint(30, 800), rng)]
            answer = f"<think>\nLet me look at this. {think}\n</think>\n\n{answer}"
        if rng.random() < 0.08:
            answer += " " + rng.choice(kEmoji)
        return answer

    def record(self):
        rng = self.rng
        llama = rng.random() < 0.12
        system = rng.choice(kSystemPrompts) if rng.random() < 0.5 else None
        turns = [self.turn() for _ in range(rng.choice([1, 1, 1, 2, 2, 3]))]
        if llama:
            parts = ["<|begin_of_text|>"]
            if system:
                parts.append(f"<|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>")
            for u, a in turns:
                parts.append(f"<|start_header_id|>user<|end_header_id|>\n\n{u}<|eot_id|>")
                parts.append(f"<|start_header_id|>assistant<|end_header_id|>\n\n{a}<|eot_id|>")
            text = "".join(parts)
        else:
            parts = []
            if system:
                parts.append(f"<|im_start|>system\n{system}<|im_end|>\n")
            for u, a in turns:
                parts.append(f"<|im_start|>user\n{u}<|im_end|>\n")
                parts.append(f"<|im_start|>assistant\n{self.assistant_text(a)}<|im_end|>\n")
            text = "".join(parts)
            if rng.random() < 0.3:
                text = text.rstrip("\n")
        while len(text.encode("utf-8")) > kMaxRecordBytes:
            text = text[:len(text) * 3 // 4]
        return text
