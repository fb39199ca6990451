#!/usr/bin/env python3
"""Writes testdata/tokenize/tricky.jsonl: hand-picked strings where byte-level BPE
tokenizers tend to disagree with Hugging Face tokenizers.

The cases are listed below by theme, with what each one probes. Long cases (10k-letter
words, base64) are built in code so the list stays readable; the output is deterministic.
Most lines are written with raw UTF-8; a few with \\u escapes (ensure_ascii) so a JSON
reader's escape handling, surrogate pairs included, is exercised too.

Usage: tools/corpus/make_tricky.py [--out PATH] [--check]
"""

import argparse
import base64
import hashlib
import json
import os
import random

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Contractions: the patterns use (?i:'s|'t|'re|'ve|'m|'ll|'d); case-insensitive matching
# in Rust's regex uses Unicode simple case folding, so U+017F LATIN SMALL LETTER LONG S
# matches 's' and U+212A KELVIN SIGN matches 'k'. U+2019 is not an apostrophe to the regex.
CONTRACTIONS = [
    "it's", "IT'S", "it'S", "It'S", "itſ", "it'ſ", "don't", "DON'T", "don'T", "Don'T",
    "we're", "WE'RE", "we'Re", "we'rE", "you've", "YOU'VE", "you'Ve", "I'm", "I'M",
    "we'll", "WE'LL", "we'LL", "we'Ll", "he'd", "HE'D", "he'D", "it’s", "don’t", "we’re",
    "'s", "'S", "'ſ", "'T", "'Re", "'LL", "'D", "'VE", "'M", "'", "''", "'''", "'x", "'sx",
    "'st", "'ll've", "y'all'd've", "rock 'n' roll", "'twas", "the dogs' bowls",
    " 's", "  'S", "\n't", "x'\u017f'", "'\u212a", "O'Neil's", "l'homme l'État",
    "'s's's's's", "'S'T'RE'VE'M'LL'D", "İ's", "İT'S",
]

WHITESPACE = [
    "", " ", "  ", "   ", "\n", "\n\n", "\n\n\n", "\t", "\t\t", "\r", "\r\n", "\r\n\r\n", "\n\r",
    " \n", "\n ", " \n ", "  \n  ", "a b", "a  b", "a   b", "a    b", "a \n b", "a\n\nb",
    "a \t b", "a\t\tb", "trailing   ", "trailing\n", "trailing  \n", "trailing\n\n\n",
    "trailing \n\n ", "   leading", "\n\nleading", "\tleading tab", "line1\r\nline2\r\n",
    "x\r\ny", "x\r\r\ny", " \r\n \r\n ", "a\u00a0b", "a\u00a0\u00a0b", "\u00a0lead",
    "trail\u00a0", "a\u3000b", "日本\u3000語", "\u3000\u3000", "a\u2028b", "a\u2029b",
    "a\u0085b", "a\u2009b", "a\u200bb", "\ufeffBOM at start", "a\u180eb", "a\u000bb",
    "a\u000cb", "mixed \t\u00a0\u3000 \n runs", "  \n\t \r\n   end", "x" + " " * 300 + "y",
    " " * 1000, "\n" * 500, "\t" * 200 + "x", "a\n \n \nb", "}\n\n\n    def f():\n        pass\n",
]

# Whitespace runs before a non-space where bpe-qwen 0.1.5 disagrees with HF (found on the
# 50 MB corpus by bench/tokenize): \s+(?!\S) must give back the last whitespace char.
PEER_DIFFS = [
    " извоза \t\t", "емых адресов \t\t", "word \t\t", "word\t\t", "word \t\tnext", "a \t\t\n",
    ".IP \"\u00a0\u00a0\u00a0\u00a0\u00a0\u00a0\u00a0[", "%s\u00a0\u00a0៖", "\u00a0\u00a0x", "x\u00a0\u00a0\u00a0y",
    " \u00a0\u00a0[", "។\n\n\n%s\u00a0\u00a0៖", "a\u3000\u3000b", "a \u00a0b", "a\u00a0 b", "a\t b", "a \tb",
]

# Unicode versions. HF tokenizers 0.23.2 matches the Split regex with the regex crate's
# Unicode 16.0 tables (letters new in 16.0 are \p{L}, letters new in 17.0 are not), while its
# NFC normalizer uses Unicode 9.0 data (marks and compositions added since are unknown to it:
# no reordering, no composition). Base "d" + mark + U+0323 shows whether a mark is known.
UNICODE_VERSIONS = [
    "\U00013460's", "\U000138FF's", "\U00013A09^n5", "x\U00013460y", "\U00016D43's", "\U0001E5D0's",
    "\U00010D4Aab", "\U000105C0's", "\U00011BC0's", "\U00016100's", "\U00011380's",
    "\U00010940's", "\U00011DB0's", "\U0001E6C0's", "\U00016EA0's", "\U000323B0's",
    "d\u1DF5\u0323", "d\U0001E944\u0323", "d\u1DF6\u0323", "d\U0001E130\u0323",
    "d\U0001E2EC\u0323", "d\U00016FF0\u0323", "d\U0001E08F\u0323", "d\U0001E4EC\u0323",
    "q\U0001E4EC\u0323", "e\U0001E4EF\u0316", "b\U00016FF0\u0323", "\U00011935\U00011930",
    "\U00016D67\U00016D67", "\U00011382\U000113C9", "\U000115B8\U000115AF",
]

NUMBERS = [
    "0", "12", "123", "1234", "12345", "1234567890", "3.14159265358979323846",
    "1,000,000", "1_000_000", "-42", "+1e-10", "0x7fffffff", "v1.2.3-rc4", "2026-11-29T14:00:00Z",
    "98765432109876543210987654321098765432109876543210", "9" * 500, "x²³", "H₂O",
    "E=mc²", "Ⅻ", "Ⅻ.", "chapter Ⅻ", "ⅻⅰⅴ", "½", "¼¾", "1½ cups", "⅞", "٠١٢٣٤٥٦٧٨٩",
    "١٢٣ شارع", "१२३४५", "০১২৩", "๑๒๓", "１２３４５", "①②③", "⑴⑵", "𝟘𝟙𝟚", "123abc456",
    "abc123def", "a1b2c3", "10k", "3rd", "1st/2nd", "$1,299.99", "€5", "50%", "#1",
]

SCRIPTS = [
    "你好，世界！", "中文文本测试。这是一个较长的句子，用于测试分词器。", "繁體中文：臺灣、香港",
    "日本語のテキストです。", "カタカナとひらがなと漢字", "ｶﾀｶﾅ半角", "東京タワーは333メートル",
    "한국어 텍스트입니다.", "안녕하세요 여러분", "ㄱㄴㄷ ㅏㅑㅓ", "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "สวัสดีครับ", "น้ำ", "ก่อน", "مرحبا بالعالم", "العَرَبِيَّة", "بِسْمِ ٱللَّٰهِ", "שלום עולם",
    "עִבְרִית", "בְּרֵאשִׁית", "नमस्ते दुनिया", "हिन्दी भाषा", "क्षत्रिय", "क़लम", "क\u093cलम",
    "বাংলা ভাষা", "আমি বাংলায় গান গাই", "ক্ষ", "বো", "ব\u09c7\u09be", "Русский язык", "Ёжик в тумане",
    "Українська мова: ґ, є, ї", "Ελληνικά: Καλημέρα", "ქართული ენა", "தமிழ் மொழி",
    "த\u0bc6\u0bbe", "ગુજરાતી", "ਪੰਜਾਬੀ", "తెలుగు", "ಕನ್ನಡ", "മലയാളം", "සිංහල", "မြန်မာ",
    "ខ្មែរ", "ລາວ", "བོད་ཡིག", "አማርኛ", "Հայերեն", "Tiếng Việt có dấu", "Türkçe İı",
    "Straße groß", "ǅemal", "ﬁnance ﬀ", "mixed日本語English混在テキスト", "Ελληνικά and English",
    "שלום hello مرحبا", "a\u200db", "a\u200cb", "\u202eRLO override\u202c", "Ⓐⓑⓒ", "ℌℑℜ",
]

NORMALIZATION = [
    "e\u0301", "cafe\u0301", "Cafe\u0301 au lait", "A\u030a", "\u212b", "\u2126", "\u00c5",
    "o\u0308\u0304", "a\u0323\u0301", "a\u0301\u0323", "Vie\u0323\u0302t Nam", "n\u0303",
    "\u1100\u1161\u11a8", "\u1100\u1161", "\u1112\u1161\u11ab\u1100\u1173\u11af",
    "\u110b\u1161\u11ab\u1102\u1167\u11bc", "\u1100", "\u11a8", "\uf900", "\uf91d",
    "\u0958", "\u09dc", "\u0344", "\u0340", "\u1e9b\u0323", "e" + "\u0301" * 50, "\u0301",
    "\u0301start", " \u0301", "\u0345", "\u05d1\u05bc\u05b0", "\u0627\u0653",
    "\u00e9 vs e\u0301 vs \u0065\u0301", "\u2163", "\u3392", "\u00bd vs 1\u20442",
]

EMOJI = [
    "😀", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "👩🏿‍🦱", "🧑🏻‍🤝‍🧑🏾", "🏳️‍🌈", "🏴‍☠️", "🇯🇵🇺🇸", "🇩🇪",
    "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f", "1️⃣", "#️⃣", "❤️", "❤",
    "☺️", "✌🏼", "I ❤️ NY", "🚀🚀🚀", "emoji😀in😀word", "👋 hello", "hello 👋", "🙂\n", "😀" * 100,
    "(╯°□°）╯︵ ┻━┻", "¯\\_(ツ)_/¯", "ʕ•ᴥ•ʔ", "𝐁𝐨𝐥𝐝 𝑖𝑡𝑎𝑙𝑖𝑐", "𐍈 gothic", "\U0010ffff",
    "\ue000 private", "\ufffd", "\ufffe\uffff", "\u007f del", "a\u0001b\u001fc", "nul\u0000byte",
]

QWEN_SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>",
                 "<tool_call>", "<|fim_prefix|>", "<|vision_start|>"]
LLAMA_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
                  "<|end_header_id|>", "<|reserved_special_token_5|>", "<|python_tag|>"]
SPECIALS = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<think>", "</think>",
    "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\nHi there.<|im_end|>\n",
    "<|im_start|>assistant\n<think>\n\n</think>\n\nDone.<|im_end|>",
    "abc<|im_start|>def", "abc<|endoftext|>def", "word<think>word</think>word",
    "<|im_start|><|im_end|>", "<|im_start|><|im_start|><|im_start|>", "<think></think>",
    "<|endoftext|><|endoftext|>", " <|endoftext|> ", "  <|im_start|>  ", "\n<|im_end|>\n",
    "x <|im_end|>", "<|im_end|> x", "<|im_start|", "|im_start|>", "<|im_start|>>", "<<|im_end|>",
    "<|im_<|im_end|>start|>", "<|IM_START|>", "<THINK>", "< think >", "<|endoftext|",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "text<|eot_id|>text", "<|reserved_special_token_5|>x", "<|reserved_special_token_999|>",
    "<tool_call>\n{\"name\": \"f\"}\n</tool_call>", "<|fim_prefix|>def f(<|fim_suffix|>):<|fim_middle|>",
    "日本語<|im_end|>日本語", "'s<|endoftext|>'s", "123<|endoftext|>456", "<|endoftext|>" * 50,
    "".join(QWEN_SPECIALS + LLAMA_SPECIALS), " ".join(QWEN_SPECIALS + LLAMA_SPECIALS),
]

PUNCTUATION = [
    "Hello, world!", "Hello!!!", "?!?!?!", "...", "…", "....\n", "!\n", " !\n", "\n!\n", "!\r\n",
    " ?\n\n", ".\n\n\n", ";\n  \n", ",", " ,", "'\n", "\"\n", "-" * 80, "=" * 80, "#" * 100,
    "*" * 64 + "\n", "—", "–", "«Bonjour»", "„Anführungszeichen“", "¿Qué? ¡Sí!", "、。「」",
    "！？（）", "a->b", "x+=1;", "i++; --j;", "#include <stdio.h>\n", "if (a && b) {\n\treturn;\n}",
    "def f(x):\n    return x ** 2\n", "SELECT * FROM t WHERE a = 'b';", "<div class=\"x\">&amp;</div>",
    "$HOME/.bashrc", "~/.config/", "C:\\Windows\\System32", "https://example.com/a?b=c&d=e#f",
    "user@example.com", "@mention #hashtag", "__init__", "snake_case_name", "camelCaseName",
    "HTTPServerError", "ALLCAPS WORDS", "x_1 = y_2", "\\n\\t escaped", "\"\"\"docstring\"\"\"",
    "{\"key\": [1, 2, {\"nested\": null}]}", "`code`", "```\ncode\n```", "| a | b |\n|---|---|\n",
    "!!!\n\n!!!", "???   ", " .", "..", ". . .", "!@#$%^&*()_+-=[]{};':\",./<>?\\|`~", "\\", "/",
]

def _random_text(seed, alphabet, n):
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


# Kept short enough that the whole file stays under the 100 KB fixture limit.
LONG_WORDS = [
    "a" * 10000,
    _random_text(1, "abcdefghijklmnopqrstuvwxyz", 10000),
    _random_text(2, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", 3000),
    "ab" * 1500,
    "漢" * 1000,
    _random_text(3, [chr(0x4E00 + i) for i in range(0, 0x5000, 7)], 1000),
    "ก" * 1000,
    "x" * 1500 + " " + "y" * 1500,
    "Supercalifragilisticexpialidocious" * 40,
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    base64.b64encode(b"".join(hashlib.sha256(bytes([i])).digest() for i in range(100))).decode(),
    base64.b64encode(b"".join(hashlib.sha512(bytes([i, 1])).digest() for i in range(50))).decode()
    + "\n",
    "data:image/png;base64," + base64.b64encode(hashlib.sha512(b"img").digest() * 20).decode(),
    hashlib.sha256(b"x").hexdigest() * 10,
    "-" * 2000, "!" * 1000, "." * 1000 + "\n", "_" * 500, "/" * 500,
    "'s" * 1000, "1" * 2000, "a1" * 1000, "é" * 1000, "e\u0301" * 1000,
]


def chat_mixes():
    """A few longer realistic records mixing everything above."""
    out = []
    out.append("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
               "Translate 'it's 12½ km' into 日本語 and العربية.<|im_end|>\n<|im_start|>assistant\n"
               "<think>\nThe user wants two translations.\n</think>\n\n12½キロです。\n١٢½ كم<|im_end|>\n")
    out.append("<|im_start|>user\n```python\nfor i in range(10):\n\tprint(f\"{i:>3}\")\r\n```\n"
               "Why   does\u00a0this\u3000fail?<|im_end|>\n<|im_start|>assistant\nIt doesn't 👍🏽<|im_end|>")
    out.append("Résumé of Ⅻ chapters:\n\n  - ① naïve café\n  - ② Straße\n\n\n\t» done «\n")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "testdata/tokenize/tricky.jsonl"))
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if the file differs from what this script writes (a ctest)")
    args = ap.parse_args()
    cases = []
    for group in (CONTRACTIONS, WHITESPACE, PEER_DIFFS, UNICODE_VERSIONS, NUMBERS, SCRIPTS, NORMALIZATION, EMOJI, SPECIALS,
                  PUNCTUATION, LONG_WORDS, chat_mixes()):
        cases.extend(group)
    # Each contraction also inside a sentence, and each script line followed by a newline.
    cases.extend(f"He said {c} twice, {c}." for c in CONTRACTIONS[:20])
    cases.extend(s + "\n" for s in SCRIPTS[:20])
    lines = []
    for i, text in enumerate(cases):
        # Every seventh short line escapes all non-ASCII (surrogate pairs for astral characters).
        escape = i % 7 == 3 and len(text) < 2000
        lines.append(json.dumps({"text": text}, ensure_ascii=escape) + "\n")
    data = "".join(lines).encode("utf-8")
    if args.check:
        with open(args.out, "rb") as f:
            if f.read() != data:
                raise SystemExit(f"{args.out} is stale: regenerate it with tools/corpus/make_tricky.py")
        print(f"{args.out}: up to date ({len(lines)} lines)")
        return
    with open(args.out, "wb") as f:
        f.write(data)
    print(f"{args.out}: {len(lines)} lines, {len(data)} bytes")


if __name__ == "__main__":
    main()
