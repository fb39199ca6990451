# One file over 600 lines: the 43 cases of one table share its fixtures (one small model, a background of waiting launches, the rows the docs table is written from).
"""The launcher's precision table (docs/launch.md "Precision"): induced failures of a
real 2-rank CPU run under `evenkeel launch` (gloo, FSDP2, a tiny Qwen3), each judged
by the launcher. Every case asserts the exit code, the decision (action, exit code and
reason, in summary.json and in the attempt's decision.json), the failing rank's cause
as the launcher named it, and the flight recorder's verdict. No case may end in a
false do-not-requeue (93, or 2); the real uneven-data deadlock must end in 93.

The faults are injected by tests/launch/precision_trainer.py, the run file's
`launch.trainer`, which patches evenkeel.train and calls its main(): one fault per
attempt, so one launch judges a chain of cases (each attempt is judged on its own
facts: retry.max_no_progress is out of the way in chains, and the cases where it
matters have launches of their own). Signals are sent from here, to the pid the
rank's heartbeat file names, at the moment the rank asks for them.

Each case writes its row (case, induced failure, cause named, flight recorder,
decision, exit) to a file; the last test compares the rows with the table in
docs/launch.md, so the two cannot drift. EK_PRECISION_WRITE_DOCS=1 rewrites the
table from a complete run instead.

Storage faults are real: a tmpfs sized so the second save fails, `chattr +i`
(ext4; a loop-mounted ext4 image where the test's folder is not), a read-only
bind mount. They need root and fail, never skip, without it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from packs import EVENKEEL, REPO, TOKENIZER_DIRS, child_env, make_pack, write_run_file
from precision_cases import (DEADLOCKS, DO_NOT_REQUEUE, EXCEPTION_BLOCKS, EXCEPTIONS, EXCEPTIONS_LAST, FULL,
                             GONE_AT_START, RECORDS, SIGNAL_BLOCKS, SIGNALS, SIGNALS_LAST, STOP_BLOCKS, STOPS,
                             STOPS_LAST, STORAGE, STORAGE_BLOCKS, STORAGE_LAST, Case, decision_kind)

SEQ = 32
TORCHRUN = str(Path(sys.executable).parent / "torchrun")
TRAINER = Path(__file__).resolve().parent / "precision_trainer.py"
DOCS = REPO / "docs" / "launch.md"
BEGIN = "<!-- precision table: begin (tests/launch/test_precision.py writes it; do not edit by hand) -->"
END = "<!-- precision table: end -->"
HEADER = ("| case | induced failure | cause named (asserted) | flight recorder | decision | exit |\n"
          "|---|---|---|---|---|---|")
FALSE_STOPS = {DO_NOT_REQUEUE, 2}  # "do not requeue" codes (docs/launch.md, Exit codes)


# ---------------------------------------------------------------------------------------------
# Fixtures and helpers


@pytest.fixture(scope="module")
def small_model(tmp_path_factory) -> Path:
    """The smallest tiny Qwen3 that still is one: hidden 16, 1 decoder layer, Qwen3's real
    vocabulary and tokenizer (the qwen3_model fixture's maker, smaller)."""
    sys.path.insert(0, str(REPO / "trainer"))
    import make_tiny_model as mtm
    out = tmp_path_factory.mktemp("models") / "tiny-qwen3-h16"
    return Path(mtm.make("qwen3", str(TOKENIZER_DIRS["qwen3"]), str(out), hidden=16, layers=1))


@pytest.fixture(scope="module")
def rows_file(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "precision-rows.jsonl"


def pack_for(tmp: Path, blocks: list[int]) -> Path:
    return make_pack(tmp / "pack", blocks, seq_len=SEQ, vocab=512, tokenizer=TOKENIZER_DIRS["qwen3"] / "tokenizer.json")


def run_file(tmp: Path, model: Path, pack: Path, **over) -> Path:
    sections = {
        "run": {"name": "precision"},
        "cluster": {"nodes": 1, "gpus_per_node": 2},
        "data": {"pack_dir": str(pack)},
        "model": {"path": str(model)},
        "train": {"seq_len": SEQ, "micro_batch": 1, "grad_accum": 2, "epochs": 1, "warmup_steps": 1,
                  "save_every": 2, "lr": 3e-3, "seed": 1, "log_every": 1},
        "checkpoint": {"dir": str(tmp / "ckpt"), "keep": 2, "shard_size_gb": 0.01},
        "evenfix": {"mode": "min"},
        # No foreground case waits for the collective timeout (a dead peer's socket closes at
        # once); a long one keeps a slow rank on a loaded host from timing out by accident.
        "distributed": {"backend": "gloo", "watchdog_timeout_min": 1.0, "watchdog_floor_min": 0.1},
        "launch": {"torchrun": TORCHRUN, "trainer": str(TRAINER), "gate_timeout_s": 60, "stop_grace_s": 10},
        "retry": {"max_restarts": 0, "max_no_progress": 2, "backoff_s": 0},
    }
    for key, value in over.items():
        section, k = key.split("__")
        if value is None:
            sections.get(section, {}).pop(k, None)
        else:
            sections.setdefault(section, {})[k] = value
    return write_run_file(tmp / "run.toml", sections)


def summary_of(stdout: str) -> dict:
    for line in reversed(stdout.splitlines()):
        if line.startswith("{") and '"attempt_records"' in line:
            return json.loads(line)
    raise AssertionError(f"no --json summary in:\n{stdout}")


def session_of(rf: Path) -> Path:
    text = rf.read_text()
    m = re.search(r'^dir = "(.*)"$', text.split("[launch]", 1)[1], re.M) if "[launch]" in text else None
    if m:
        return Path(m.group(1)) / "precision"
    return rf.parent / "ckpt" / "launch" / "precision"


class Signaller:
    """Serves precision_trainer.py's signal requests: a rank writes rank-R.json with its
    pid and the signal; the signal goes to the pid the rank's heartbeat names, and only
    when the two agree."""

    def __init__(self, requests: Path, heartbeats: Path):
        self.requests, self.heartbeats = requests, heartbeats
        requests.mkdir(parents=True, exist_ok=True)
        self.sent: list[tuple[int, str, int]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            for req in self.requests.glob("rank-*.json"):
                try:
                    ask = json.loads(req.read_text())
                except (OSError, ValueError):
                    continue
                rank = int(req.stem.split("-")[1])
                pid = None
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    try:
                        pid = json.loads((self.heartbeats / f"rank-{rank}.json").read_text())["pid"]
                    except (OSError, ValueError, KeyError):
                        pid = None
                    if pid == ask["pid"]:
                        break
                    time.sleep(0.1)
                req.unlink()
                if pid != ask["pid"]:
                    self.errors.append(f"rank {rank} asked for {ask['signal']} as pid {ask['pid']}, its heartbeat "
                                       f"names pid {pid}")
                    continue
                os.kill(pid, getattr(signal, ask["signal"]))
                self.sent.append((rank, ask["signal"], pid))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


RUNNING: set[subprocess.Popen] = set()  # launches under way, stopped when the module ends


@dataclass
class Launch:
    rf: Path
    code: int
    out: str
    seconds: float
    signaller: Signaller | None = None
    summary: dict = field(default_factory=dict)


def launch(rf: Path, *args: str, plan: dict | None = None, env: dict | None = None, timeout: float = 900,
           signals: bool = False) -> Launch:
    """Runs `evenkeel launch RF --json ARGS` with the fault plan (precision_trainer.py's
    EK_PRECISION_PLAN), serving its signal requests when `signals`."""
    work = rf.parent
    extra = {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "5", **(env or {})}
    if plan is not None:
        (work / "faults.json").write_text(json.dumps(plan, indent=1))
        extra["EK_PRECISION_PLAN"] = str(work / "faults.json")
    sig = None
    if signals:
        extra["EK_PRECISION_SIGNALS"] = str(work / "signals")
        sig = Signaller(work / "signals", session_of(rf) / "heartbeat" / "node-0")
    t0 = time.monotonic()
    proc = subprocess.Popen([EVENKEEL, "launch", str(rf), "--json", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=child_env(**extra), cwd=work,
                            start_new_session=True)
    RUNNING.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        RUNNING.discard(proc)
        if sig:
            sig.close()
    result = Launch(rf, proc.returncode, out + err, time.monotonic() - t0, sig)
    if '"attempt_records"' in out:
        result.summary = summary_of(out)
    attempts = len(result.summary.get("attempt_records", []))
    print(f"{rf.parent.name}: exit {proc.returncode}, {attempts} attempt(s) in {result.seconds:.0f} s")
    return result


def normalize(text: str, tmp: Path) -> str:
    return text.replace(str(tmp), "TMP")  # the test's folder: the table holds no machine's paths


def fill(spec, paths: dict[str, Path]):
    """The case's spec with its placeholders (CKPT, MODEL, PACK, HB) made paths."""
    if isinstance(spec, dict):
        return {k: fill(v, paths) for k, v in spec.items()}
    if isinstance(spec, list):
        return [fill(v, paths) for v in spec]
    if isinstance(spec, str):
        for key, path in paths.items():
            if spec == key or spec.startswith(key + "/"):
                return str(path) + spec[len(key):]
    return spec


def write_row(rows_file: Path, case: Case, fr: str, decision: str, exit_code: str) -> None:
    row = {"id": case.id, "what": case.what, "cause": case.cause or "-", "fr": fr, "decision": decision,
           "exit": exit_code}
    with open(rows_file, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def check_attempt(result: Launch, index: int, case: Case, rows_file: Path, *, final: bool) -> None:
    """Asserts one attempt's judgement against `case` and writes the case's row."""
    s = result.summary
    assert s, result.out
    attempts = s["attempt_records"]
    assert len(attempts) > index, f"{case.id}: attempt {index + 1} never ran:\n{result.out}"
    a = attempts[index]
    d = a["decision"]
    where = f"{case.id} ({case.what}), attempt {a['attempt']}"
    on_disk = json.loads((session_of(result.rf) / f"attempt-{a['attempt']:03d}" / "decision.json").read_text())
    assert (on_disk["action"], on_disk["exit_code"], on_disk["reason"]) == (d["action"], d["exit_code"], d["reason"]), \
        f"{where}: decision.json {on_disk} != summary {d}"
    assert d["action"] == case.action, f"{where}: decision {d}\n{result.out}"
    kind = decision_kind(d)
    assert kind == case.decision, f"{where}: decision {d}"
    if case.action != "restart":
        assert d["exit_code"] == case.exit_code, f"{where}: decision {d}"
    if final:
        assert result.code == d["exit_code"], f"{where}: the launch exited {result.code}, the decision says {d}"
    if case.exit_code != DO_NOT_REQUEUE:
        assert d["exit_code"] not in FALSE_STOPS, f"{where}: a false do-not-requeue: {d}\n{result.out}"
    assert a["flight_recorder"]["conclusive"] == case.conclusive, f"{where}: {a['flight_recorder']}"
    if case.cause_rank >= 0:
        tmp = result.rf.parent
        named = normalize({c["rank"]: c["cause"] for c in a["causes"]}.get(case.cause_rank, ""), tmp)
        reason = normalize(d["reason"], tmp)
        for part in case.cause.split("…"):  # "…" stands for a part that varies (a pid, a message)
            assert part in named, f"{where}: rank {case.cause_rank}'s cause {named!r} lacks {part!r}: {a['causes']}"
            assert part in reason, f"{where}: the reason does not name the cause ({part!r}): {d['reason']}"
    fr = "desync (conclusive)" if a["flight_recorder"]["conclusive"] else "no desync"
    write_row(rows_file, case, fr, kind, "-" if d["action"] == "restart" else str(d["exit_code"]))


def chain(tmp: Path, model: Path, cases: list[Case], blocks: int, rows_file: Path, *, last: Case | None = None,
          signals: bool = False, **over) -> Launch:
    """One launch, one attempt per case, then `last` (by default an attempt without a
    fault, which completes the run). Restarts are allowed for every case; no-progress
    counting is out of the way, so each decision is about its own attempt."""
    pack = pack_for(tmp, [blocks, blocks])
    budget = len(cases)  # the last attempt's own restart, if it asks for one, is past the budget
    rf = run_file(tmp, model, pack, retry__max_restarts=budget, retry__max_no_progress=len(cases) + 1, **over)
    done = last or Case("-", "no fault", {"kind": "none"}, action="done", exit_code=0, decision="done")
    paths = {"CKPT": tmp / "ckpt", "MODEL": model, "PACK": pack, "HB": session_of(rf) / "heartbeat" / "node-0"}
    plan = {str(i + 1): fill(c.spec, paths) for i, c in enumerate(cases + [done])}

    result = launch(rf, plan=plan, signals=signals)
    assert not (result.signaller and result.signaller.errors), result.signaller.errors
    for i, c in enumerate(cases):
        check_attempt(result, i, c, rows_file, final=False)
    check_attempt(result, len(cases), done, rows_file if last else Path(os.devnull), final=True)
    assert len(result.summary["attempt_records"]) == len(cases) + 1, result.out
    if done.action == "done":
        assert result.summary["steps"] == result.summary["planned_steps"] == blocks // 2, result.summary
    return result


def chattr(flag: str, path: Path) -> None:
    p = subprocess.run(["chattr", flag, str(path)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.fail(f"chattr {flag} {path}: {p.stderr.strip()} (the EPERM cases need root on ext4)")


def unfreeze(root: Path) -> None:
    """chattr -i on everything under root, so that pytest can remove it."""
    subprocess.run(["chattr", "-R", "-i", str(root)], capture_output=True)


def mount(*args: str) -> None:
    p = subprocess.run(["mount", *args], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.fail(f"mount {' '.join(args)}: {p.stderr.strip()} (the storage cases need root and do not skip)")


def umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def ext4(tmp_path):
    """A folder where `chattr +i` works: tmp_path when it is ext4 (or another filesystem
    with the immutable flag), else a loop-mounted 64 MB ext4 image."""
    probe = tmp_path / "chattr-probe"
    probe.write_text("")
    ok = subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode == 0
    subprocess.run(["chattr", "-i", str(probe)], capture_output=True)
    probe.unlink()
    if ok:
        yield tmp_path
        unfreeze(tmp_path)
        return
    image, where = tmp_path / "ext4.img", tmp_path / "ext4"
    where.mkdir()
    subprocess.run(["truncate", "-s", "64M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", str(image)], check=True)
    mount("-o", "loop", str(image), str(where))
    try:
        yield where
    finally:
        unfreeze(where)
        umount(where)


def no_ranks_left(rf: Path) -> None:
    left = subprocess.run(["pgrep", "-f", str(rf)], capture_output=True, text=True).stdout.split()
    assert not left, f"processes of {rf} left running: {left}"


# ---------------------------------------------------------------------------------------------
# Background: the cases that mostly wait for a collective timeout run one after another in a
# thread, beside the others.


# The collective timeout of the cases that wait for it (a stopped rank, a deadlock): 18 s.
WAIT_TIMEOUT_MIN = 0.3


class Background:
    def __init__(self):
        self._jobs: dict[str, tuple[threading.Event, list]] = {}
        self._queue: list[tuple[str, object]] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, name: str, fn) -> None:
        with self._lock:
            self._jobs[name] = (threading.Event(), [])
            self._queue.append((name, fn))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._thread = None
                    return
                name, fn = self._queue.pop(0)
            done, box = self._jobs[name]
            try:
                box.append(("ok", fn()))
            except BaseException as e:  # noqa: BLE001  (re-raised in the test that waits for it)
                box.append(("error", e))
            done.set()

    def result(self, name: str, timeout: float = 1200):
        done, box = self._jobs[name]
        assert done.wait(timeout), f"{name}: still running after {timeout} s"
        kind, value = box[0]
        if kind == "error":
            raise value
        return value


def deadlock(tmp: Path, model: Path, case: Case, blocks: list[int], rows_file: Path) -> Launch:
    """The report's deadlock, for real: evenfix off (the gate FAILs it; --accept-gate-fail),
    uneven blocks, no save but the final one: the short rank walks into the final save's
    barrier while the other waits in the next step's forward."""
    rf = run_file(tmp, model, pack_for(tmp, blocks), evenfix__mode="off", train__save_every=0,
                  retry__max_restarts=1, distributed__watchdog_timeout_min=WAIT_TIMEOUT_MIN)
    r = launch(rf, "--accept-gate-fail", plan={})
    assert r.code == DO_NOT_REQUEUE, r.out
    (a,) = r.summary["attempt_records"]  # a deterministic deadlock is not retried
    assert re.search(r"rank \d in .*barrier", a["flight_recorder"]["verdict"]), a["flight_recorder"]
    check_attempt(r, 0, case, rows_file, final=True)
    no_ranks_left(rf)
    return r


@pytest.fixture(scope="module")
def background(request, small_model, tmp_path_factory, rows_file):
    """Starts the waiting cases that were selected; at the end, stops any launch still running
    (a -k run that selected a waiting case but not the test that collects it)."""
    selected = {item.name for item in request.session.items}
    bg = Background()
    if "test_sigstop_to_one_rank" in selected:
        bg.submit("stops", lambda: chain(tmp_path_factory.mktemp("stops"), small_model, STOPS, STOP_BLOCKS, rows_file,
                                         last=STOPS_LAST, signals=True,
                                         distributed__watchdog_timeout_min=WAIT_TIMEOUT_MIN))
    for case, blocks, test in zip(DEADLOCKS, ([12, 8], [8, 12]), ("test_the_report_deadlock_stops_with_93",
                                                                  "test_the_report_deadlock_with_rank_0_short_stops_with_93")):
        if test in selected:
            bg.submit(case.id, lambda case=case, blocks=blocks: deadlock(tmp_path_factory.mktemp(case.id.lower()),
                                                                         small_model, case, blocks, rows_file))
    yield bg
    for proc in list(RUNNING):
        os.killpg(proc.pid, signal.SIGKILL)


# ---------------------------------------------------------------------------------------------
# The cases


def test_python_exceptions_in_every_phase(small_model, tmp_path, rows_file, background):
    r = chain(tmp_path, small_model, EXCEPTIONS, EXCEPTION_BLOCKS, rows_file, last=EXCEPTIONS_LAST)
    no_ranks_left(r.rf)


def test_signals_to_one_rank(small_model, ext4, rows_file, background):
    r = chain(ext4, small_model, SIGNALS, SIGNAL_BLOCKS, rows_file, last=SIGNALS_LAST, signals=True)
    assert [(rank, sig) for rank, sig, _ in r.signaller.sent] == [(c.spec["rank"], c.spec["signal"]) for c in SIGNALS]
    log = (session_of(r.rf) / f"attempt-{len(SIGNALS) + 1:03d}" / "rank-1.log").read_text()
    assert "Operation not permitted" in log and "rank-1.json" in log, log  # the heartbeat's warning
    no_ranks_left(r.rf)


def test_storage_faults_and_directories_gone_mid_run(small_model, ext4, rows_file, background):
    model = ext4 / "model"
    shutil.copytree(small_model, model)  # this chain takes its model away
    (ext4 / "ckpt").mkdir()
    (ext4 / "ckpt" / "train-metrics.jsonl").write_text("")  # chattr +i needs the file
    r = chain(ext4, model, STORAGE, STORAGE_BLOCKS, rows_file, last=STORAGE_LAST)
    assert (ext4 / "pack.gone").is_dir() and not (ext4 / "pack").exists()
    no_ranks_left(r.rf)


def test_directories_missing_at_start(small_model, tmp_path, rows_file, background):
    pack = pack_for(tmp_path, [8, 8])
    missing = {"model": tmp_path / "no-such-model", "pack": tmp_path / "no-such-pack"}
    for case, over, args in ((GONE_AT_START[0], {"model__path": str(missing["model"])}, ()),
                             (GONE_AT_START[1], {"data__pack_dir": str(missing["pack"])}, ()),
                             (GONE_AT_START[2], {"model__path": str(missing["model"])}, ("--accept-gate-fail",)),
                             (GONE_AT_START[3], {"data__pack_dir": str(missing["pack"])}, ("--accept-gate-fail",))):
        for old in (tmp_path / "ckpt").glob("launch/*/attempt-*"):
            shutil.rmtree(old)
        rf = run_file(tmp_path, small_model, pack, retry__max_restarts=2, **over)
        r = launch(rf, *args, plan={})
        where = f"{case.id} ({case.what})"
        assert r.code == case.exit_code, f"{where}:\n{r.out}"
        if case.action == "gate refused":
            assert r.summary["outcome"] == "gate refused" and not r.summary["attempt_records"], r.summary
            assert "the gate refused the run" in r.out, r.out
            name = "model" if "model" in case.what else "pack"
            assert str(missing[name]) in r.out, f"{where}: the gate does not name {missing[name]}:\n{r.out}"
            write_row(rows_file, case, "-", case.decision, str(r.code))
        else:
            assert len(r.summary["attempt_records"]) == 1, f"{where}: a refusal is not retried:\n{r.out}"
            check_attempt(r, 0, case, rows_file, final=True)


class Tmpfs:
    def __init__(self, path: Path, size: int):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))

    def close(self) -> None:
        umount(self.path)


def checkpoint_bytes(model: Path) -> int:
    """What one checkpoint of `model` takes: bf16 weights (half the fp32 safetensors), the
    training state (fp32 parameters and AdamW's two moments: three times the fp32 weights)
    and the files copied beside them."""
    weights = sum(p.stat().st_size for p in model.glob("*.safetensors"))
    copied = sum((model / n).stat().st_size for n in ("config.json", "generation_config.json", "tokenizer.json",
                                                      "tokenizer_config.json", "special_tokens_map.json")
                 if (model / n).exists())
    return weights // 2 + 3 * weights + copied + 64 * 1024


def test_enospc_at_the_second_save_restarts_then_stops_with_74(small_model, tmp_path, rows_file, background):
    """A real full disk: the checkpoint folder a tmpfs with room for one checkpoint and a half
    (the gate's storage check FAILs that; --accept-gate-fail). Attempt 1 saves step 2 and
    fails at step 4's save: progress, restart. Attempt 2 fails at the same save: no progress,
    and a full disk is an I/O error an operator fixes (74), not a do-not-requeue."""
    ckpt = Tmpfs(tmp_path / "ckpt", int(checkpoint_bytes(small_model) * 1.5))
    try:
        rf = run_file(tmp_path, small_model, pack_for(tmp_path, [12, 12]), launch__dir=str(tmp_path / "launch"),
                      retry__max_restarts=1, retry__max_no_progress=1)
        r = launch(rf, "--accept-gate-fail", plan={})
        assert r.code == 74, r.out
        check_attempt(r, 0, FULL[0], rows_file, final=False)
        check_attempt(r, 1, FULL[1], rows_file, final=True)
        assert r.summary["attempt_records"][0]["checkpoint_after"] == 2, r.summary
    finally:
        ckpt.close()
    no_ranks_left(rf)


def test_a_read_only_checkpoint_folder_stops_with_74(small_model, tmp_path, rows_file, background):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "train-metrics.jsonl").write_text("")
    mount("--bind", str(ckpt), str(ckpt))
    try:
        mount("-o", "remount,ro,bind", str(ckpt))
        rf = run_file(tmp_path, small_model, pack_for(tmp_path, [8, 8]), launch__dir=str(tmp_path / "launch"),
                      retry__max_restarts=1, retry__max_no_progress=1)
        r = launch(rf, "--accept-gate-fail", plan={})
        assert r.code == 74, r.out
        check_attempt(r, 0, FULL[2], rows_file, final=True)
    finally:
        umount(ckpt)
    no_ranks_left(rf)


def test_the_report_deadlock_stops_with_93(background):
    background.result(DEADLOCKS[0].id)


def test_the_report_deadlock_with_rank_0_short_stops_with_93(background):
    background.result(DEADLOCKS[1].id)


def test_sigstop_to_one_rank(background):
    r = background.result("stops")
    assert [(rank, sig) for rank, sig, _ in r.signaller.sent] == [(c.spec["rank"], c.spec["signal"])
                                                                   for c in STOPS + [STOPS_LAST]]
    no_ranks_left(r.rf)


# ---------------------------------------------------------------------------------------------
# Records or nothing (docs/launch.md "Records"): when the launcher's own records cannot be
# written, it stops the ranks, names the file and exits 74.


def test_records_on_a_full_tmpfs_stop_the_launch_with_74_naming_the_file(small_model, tmp_path, rows_file):
    ckpt = Tmpfs(tmp_path / "ckpt", int(checkpoint_bytes(small_model) * 1.5))
    try:
        rf = run_file(tmp_path, small_model, pack_for(tmp_path, [12, 12]), retry__max_restarts=2)
        r = launch(rf, "--accept-gate-fail", plan={})
        assert r.code == 74, r.out
        m = re.search(r"evenkeel: error: launch: (\S+): .*No space left on device", r.out)
        assert m, r.out
        assert m.group(1).startswith(str(tmp_path / "ckpt" / "launch" / "precision")), m.group(0)
    finally:
        ckpt.close()
    no_ranks_left(rf)
    write_row(rows_file, RECORDS[0], "-", RECORDS[0].decision, "74")


def test_records_made_immutable_mid_run_stop_the_launch_with_74_naming_the_file(small_model, ext4, rows_file):
    pack = pack_for(ext4, [8, 8])
    rf = run_file(ext4, small_model, pack, retry__max_restarts=2)
    session = session_of(rf)
    plan = {"1": {"kind": "act", "rank": 0, "when": "forward", "step": 3,
                  "actions": [["chattr", "+i", str(session)], ["chattr", "+i", str(session / "attempt-001")]]}}
    r = launch(rf, plan=plan)
    assert r.code == 74, r.out
    m = re.search(r"evenkeel: error: launch: (\S+): .*Operation not permitted", r.out)
    assert m, r.out
    assert m.group(1).startswith(str(session)), m.group(0)
    no_ranks_left(rf)
    write_row(rows_file, RECORDS[1], "-", RECORDS[1].decision, "74")


# ---------------------------------------------------------------------------------------------
# The table


def _docs_rows() -> dict[str, str]:
    text = DOCS.read_text()
    assert BEGIN in text and END in text, f"{DOCS}: no precision table (markers {BEGIN!r} ... {END!r})"
    body = text.split(BEGIN, 1)[1].split(END, 1)[0].strip().splitlines()
    rows = {}
    for line in body[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = line.strip()
    return rows


def _row_line(r: dict) -> str:
    cause = f"`{r['cause']}`" if r["cause"] != "-" else "-"
    return f"| {r['id']} | {r['what']} | {cause} | {r['fr']} | {r['decision']} | {r['exit']} |"


CASES = (EXCEPTIONS + [EXCEPTIONS_LAST] + SIGNALS + [SIGNALS_LAST] + STOPS + [STOPS_LAST] + STORAGE + [STORAGE_LAST] + GONE_AT_START + FULL + DEADLOCKS
         + RECORDS)
ALL_IDS = [c.id for c in CASES]


def test_the_table_in_docs_is_what_the_cases_found(rows_file):
    """Runs last: every row a case wrote is the docs' row of that case; after a complete run,
    the docs hold exactly these rows (and EK_PRECISION_WRITE_DOCS=1 writes them)."""
    assert len(ALL_IDS) == len(set(ALL_IDS)) >= 40
    produced = {}
    if rows_file.exists():
        for line in rows_file.read_text().splitlines():
            r = json.loads(line)
            produced[r["id"]] = _row_line(r)
    complete = set(produced) == set(ALL_IDS)
    if os.environ.get("EK_PRECISION_WRITE_DOCS") == "1":
        assert complete, f"EK_PRECISION_WRITE_DOCS=1 needs every case; missing {sorted(set(ALL_IDS) - set(produced))}"
        text = DOCS.read_text()
        head, rest = text.split(BEGIN, 1)
        DOCS.write_text(head + "\n".join([BEGIN, HEADER, *(produced[i] for i in ALL_IDS), END])
                        + rest.split(END, 1)[1])
    docs = _docs_rows()
    assert produced, "no case wrote a row"
    for i, line in produced.items():
        assert docs.get(i) == line, f"docs/launch.md's row for {i}:\n  {docs.get(i)}\nthe case found:\n  {line}"
    if complete:
        assert list(docs) == ALL_IDS, f"docs/launch.md's table has rows {list(docs)}, the cases are {ALL_IDS}"
