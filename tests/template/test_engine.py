"""The engine against jinja2 itself, one construct at a time (tpl_snippets.py), and
its refusals: a construct evenkeel does not implement is an error naming it and
the template line, before anything renders."""

import json
import subprocess

import pytest

import tpl_harness as harness
import tpl_snippets as snippets


def jinja2_render(source):
    from transformers.utils.chat_template_utils import _compile_jinja_template

    msgs = [{k: v for k, v in m.items() if v is not None} for m in snippets.CONTEXT]  # as transformers drops them
    try:
        return _compile_jinja_template(source).render(messages=msgs, tools=None, documents=None,
                                                      add_generation_prompt=False)
    except Exception as e:  # noqa: BLE001
        return e


def evenkeel_render(source, tmp_path, name="t.jinja"):
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    p = subprocess.run([harness.EVENKEEL, "template", "render", "--template", str(path)],
                       input=json.dumps({"messages": snippets.CONTEXT}).encode(), capture_output=True)
    if p.returncode != 0:
        return RuntimeError(p.stderr.decode())
    return json.loads(p.stdout)["text"]


@pytest.mark.parametrize("i", range(len(snippets.SNIPPETS)))
def test_snippet(i, tmp_path):
    src = snippets.SNIPPETS[i]
    ours = evenkeel_render(src, tmp_path)
    if src in snippets.REFUSED:
        assert isinstance(ours, RuntimeError) and "unsupported" in str(ours), (snippets.REFUSED[src], ours)
        assert "t.jinja:1:" in str(ours), ours
        return
    theirs = jinja2_render(src)
    if isinstance(theirs, Exception):
        assert isinstance(ours, RuntimeError), f"{src!r}: jinja2 raised {theirs!r}, evenkeel rendered {ours!r}"
    else:
        assert ours == theirs, f"{src!r}"


REFUSED_CONSTRUCTS = [
    ("line one\n{% include 'x.jinja' %}", "'include'", 2),
    ("{% extends 'base.jinja' %}", "'extends'", 1),
    ("{% for x in [1] recursive %}{% endfor %}", "recursive", 1),
    ("a\nb\n{% call m() %}x{% endcall %}", "'call'", 3),
    ("{{ x|batch(2) }}", "'batch'", 1),
    ("\n{% if x is escaped2 %}{% endif %}", "'escaped2'", 2),
    ("{{ f(*args) }}", "*args", 1),
    ("{% with a = 1 %}{% endwith %}", "'with'", 1),
    ("{% import 'm.jinja' as m %}", "'import'", 1),
]


@pytest.mark.parametrize("src,construct,line", REFUSED_CONSTRUCTS)
def test_unsupported_construct_named_with_line(src, construct, line, tmp_path):
    path = tmp_path / "u.jinja"
    path.write_text(src)
    p = subprocess.run([harness.EVENKEEL, "template", "check", "--template", str(path)], capture_output=True,
                       text=True)
    assert p.returncode != 0
    assert f"u.jinja:{line}: unsupported" in p.stderr and construct in p.stderr, p.stderr
