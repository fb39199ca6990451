"""The tests' rank zygote: one Python process that imports the libraries a rank imports
(torch, torch.distributed.checkpoint and DTensor, transformers and its model classes) once,
then forks a ready interpreter for each rank a test starts, and for each launch attempt's torchrun.

Why: a rank's start-up is mostly imports, ~10 s of CPU on a 2-core CI machine (torch 5 s,
DTensor's sympy 3 s, transformers), and the slow suite starts about 300 ranks, so imports
were over half of its CPU. A user's rank starts fresh and pays it once per attempt; the
tests pay it per rank per test. tests/conftest.py starts this server for a pytest session
that has slow tests and puts tests/zygote (whose sitecustomize.py is the client) on the
ranks' PYTHONPATH; modules whose assertions are about the process tree itself run without it
(conftest.py's FRESH_RANKS).

What a rank sees is a fresh interpreter's view: its argv, environment, working directory,
sys.path (the script's folder or the working directory first, then PYTHONPATH), standard
streams (the client's own file descriptors, passed over the socket) and buffering (-u,
PYTHONUNBUFFERED), torch's intra-op thread count (its OMP_NUM_THREADS, or torch's own
default; tests/trainer/test_zygote.py compares these with a fresh interpreter's). What
differs: the rank's parent is this server, not the process that started it; the client
(that process, a thin stand-in) forwards the signals it gets to the rank, stops itself
when the rank is stopped (so a wrapper reading its child's state sees "T") and ends as the
rank ends: the same exit code, or killed by the same signal. A client that dies (SIGKILL,
a parent-death signal) takes its rank with it: this server SIGKILLs a rank whose client's
connection closes.

Served: `python [-u] -m evenkeel.train|evenkeel.isolation ...` and `python [-u] SCRIPT ...`
for the trainer scripts in SCRIPTS and the installation's own torchrun, from the same Python
installation (sys.prefix) as this server; anything else is answered "no" and the client runs
it itself.

  python tests/zygote/server.py SOCKET READY_FILE

Protocol (a Unix stream socket): the client sends a 4-byte big-endian length and a JSON
request {"prefix", "argv" (sys.orig_argv), "cwd", "env"} with its descriptors 0, 1, 2
attached; the server answers lines: "no", or "pid N" then "stop N" (the rank stopped by
signal N), "cont", and last "exit N" or "signal N". SOCKET.pids gets a line "RANK CLIENT"
(the two pids) per rank served.
"""
from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time

MODULES = frozenset({"evenkeel.train", "evenkeel.isolation"})
# Scripts by path relative to the repository.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# torchrun too: the console script beside this interpreter (the tests' launch.torchrun), which
# a launch starts once per attempt (4.4 CPU-s of imports each, ~100 attempts a slow suite).
# Its workers are started by torchrun in sessions of their own (start_new_session), never in
# the launcher's process group: a group kill reached only torchrun before, and reaches only
# its client now, whose death this server turns into torchrun's SIGKILL, as it was.
SCRIPTS = frozenset([*(os.path.join(REPO, p) for p in (
    "trainer/train.py", "tests/trainer/hooked_trainer.py", "tests/launch/precision_trainer.py",
    "tests/zygote/probe_trainer.py")), os.path.join(os.path.dirname(sys.executable), "torchrun")])
# The libraries only. evenkeel's own modules are imported by each rank, fresh (a fraction
# of a second): what they take at import is the rank's own (evenkeel.heartbeat notes the
# process's start as no later than its import; preloaded here it was the server's start,
# and the launcher's goodput account ignored every beat as older than the attempt).
PRELOAD = ("numpy", "torch", "torch.distributed", "torch.distributed.checkpoint", "torch.distributed.tensor",
           "torch.distributed.fsdp", "torch.distributed.run", "safetensors.torch", "transformers",
           "transformers.models.qwen3.modeling_qwen3", "transformers.models.llama.modeling_llama",
           "transformers.models.gemma3.modeling_gemma3", "transformers.masking_utils")


def plan(req: dict) -> tuple[str, str, list[str], bool] | None:
    """(kind, target, argv for sys.argv, unbuffered) for a served command line, else None."""
    if req.get("prefix") != sys.prefix:
        return None
    argv = list(req.get("argv") or [])[1:]
    unbuffered = False
    while argv and argv[0].startswith("-") and argv[0] not in ("-m", "-c", "-"):
        if argv[0] != "-u":
            return None  # an interpreter option this server was not started with
        unbuffered = True
        argv.pop(0)
    if len(argv) >= 2 and argv[0] == "-m" and argv[1] in MODULES:
        return "module", argv[1], [argv[1], *argv[2:]], unbuffered
    if argv and not argv[0].startswith("-"):
        script = os.path.normpath(os.path.join(req.get("cwd", "/"), argv[0]))
        if script in SCRIPTS:
            return "script", script, argv, unbuffered
    return None


def read_request(conn: socket.socket) -> tuple[dict, list[int]]:
    msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    if len(msg) < 4:
        raise ValueError("short request")
    size = int.from_bytes(msg[:4], "big")
    body = bytearray(msg[4:])
    while len(body) < size:
        more = conn.recv(size - len(body))
        if not more:
            raise ValueError("truncated request")
        body += more
    return json.loads(body), list(fds)


# torch's intra-op threads in a process started without OMP_NUM_THREADS (main() sets it).
FRESH_THREADS = 0


def omp_threads(env: dict) -> None:
    """The intra-op thread count a fresh rank with this environment starts with: its
    OMP_NUM_THREADS (the launcher and torchrun set one, 1 for four ranks on two cores),
    else torch's default. Without this every rank kept the server's count (all cores):
    four ranks ran eight threads on two cores, spinning in OpenMP, unlike a user's rank."""
    torch = sys.modules.get("torch")
    if torch is None or FRESH_THREADS <= 0:
        return
    n = env.get("OMP_NUM_THREADS", "").strip()
    torch.set_num_threads(int(n) if n.isdigit() and int(n) > 0 else FRESH_THREADS)


def run_rank(req: dict, fds: list[int], how: tuple[str, str, list[str], bool], keep: set[int]) -> None:
    """In the forked child: becomes the rank, never returns."""
    code = 1
    try:
        import io
        import runpy

        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in keep:
            try:
                os.close(fd)
            except OSError:
                pass
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(req["cwd"])
        env = req["env"]
        os.environ.clear()
        os.environ.update(env)
        omp_threads(env)
        kind, target, argv, unbuffered = how
        unbuffered = unbuffered or bool(env.get("PYTHONUNBUFFERED"))

        def stream(fd: int, err: bool):
            raw = io.FileIO(fd, "w", closefd=False)
            if unbuffered:
                return io.TextIOWrapper(raw, encoding="utf-8", errors="backslashreplace" if err else "strict",
                                        write_through=True)
            return io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8",
                                    errors="backslashreplace" if err else "strict",
                                    line_buffering=err or os.isatty(fd))

        sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)),
                                                     encoding="utf-8")
        sys.stdout = sys.__stdout__ = stream(1, False)
        sys.stderr = sys.__stderr__ = stream(2, True)
        # sys.path as a fresh interpreter builds it: the script's folder (or the working
        # directory for -m), then PYTHONPATH, then the installation's own entries.
        first = os.path.dirname(target) if kind == "script" else os.getcwd()
        base = [p for p in sys.path[1:] if p not in BOOT_PYTHONPATH]
        extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = [first, *extra, *base]
        sys.argv = argv
        sys.orig_argv = list(req["argv"])
        import random

        random.seed()  # a fresh interpreter seeds from the OS; every fork would share one state
        try:
            if kind == "module":
                # Preloaded for its imports; run as __main__ from its source, as `-m` does (a
                # copy left in sys.modules makes runpy warn on stderr).
                sys.modules.pop(target, None)
                runpy.run_module(target, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(target, run_name="__main__")
            code = 0
        except SystemExit as e:
            if e.code is None:
                code = 0
            elif isinstance(e.code, int):
                code = e.code
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except BaseException:  # noqa: BLE001  the interpreter's own report, then exit 1
            sys.excepthook(*sys.exc_info())
            code = 1
        # What interpreter exit does before it goes: wait for non-daemon threads, run atexit.
        import atexit
        import threading

        threading._shutdown()
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        try:
            import traceback

            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        for s in (sys.stdout, sys.stderr):
            try:
                s.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(code & 0xFF if isinstance(code, int) else 1)


BOOT_PYTHONPATH = frozenset(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)


def main() -> int:
    sock_path, ready = sys.argv[1], sys.argv[2]
    t0 = time.monotonic()
    gc.disable()
    # OpenMP reads OMP_NUM_THREADS once, when torch loads it: here, not in a rank, so each
    # rank sets its own count from its own environment (omp_threads). The count of a rank
    # whose environment has none: what a fresh interpreter's torch says, asked once beside
    # the imports (this server imports with the tests' OMP_NUM_THREADS=1: without it an
    # import starts OpenMP's threads, and a process with threads must not fork).
    fresh_env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    asked = subprocess.Popen([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                             env=fresh_env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    global FRESH_THREADS
    out, _ = asked.communicate()
    FRESH_THREADS = int(out) if asked.returncode == 0 and out.strip().isdigit() else 0
    gc.collect()
    gc.freeze()  # the preloaded objects are never scanned again, in the server or a rank
    gc.enable()
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        print(f"zygote: error: {threads} threads after the imports; forking is not safe", file=sys.stderr)
        return 1
    try:
        os.unlink(sock_path)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    children: dict[int, socket.socket | None] = {}  # rank pid -> its client's connection
    conns: dict[socket.socket, int] = {}
    with open(ready + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {time.monotonic() - t0:.1f}\n")
    os.replace(ready + ".tmp", ready)
    pids = open(sock_path + ".pids", "a")

    def tell(pid: int, line: str) -> None:
        c = children.get(pid)
        if c is not None:
            try:
                c.sendall(line.encode() + b"\n")
            except OSError:
                pass

    while not stopping:
        try:
            readable, _, _ = select.select([listener, wake_r, *conns], [], [], 1.0)
        except InterruptedError:
            continue
        if wake_r in readable:
            try:
                while os.read(wake_r, 4096):
                    pass
            except BlockingIOError:
                pass
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG | os.WUNTRACED | os.WCONTINUED)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if os.WIFSTOPPED(st):
                tell(pid, f"stop {os.WSTOPSIG(st)}")
            elif os.WIFCONTINUED(st):
                tell(pid, "cont")
            else:
                tell(pid, f"signal {os.WTERMSIG(st)}" if os.WIFSIGNALED(st) else f"exit {os.WEXITSTATUS(st)}")
                c = children.pop(pid, None)
                if c is not None:
                    conns.pop(c, None)
                    c.close()
        for c in [c for c in readable if c in conns]:
            try:
                gone = not c.recv(64)
            except OSError:
                gone = True
            if gone:  # the client died: so does its rank
                pid = conns.pop(c)
                children[pid] = None
                c.close()
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if listener in readable:
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            fds: list[int] = []
            try:
                conn.settimeout(10)
                req, fds = read_request(conn)
                how = plan(req) if len(fds) == 3 else None
            except (OSError, ValueError):
                how = None
            if how is None:
                for fd in fds:
                    os.close(fd)
                try:
                    conn.sendall(b"no\n")
                except OSError:
                    pass
                conn.close()
                continue
            conn.settimeout(None)
            keep = {listener.fileno(), wake_r, wake_w, conn.fileno(), pids.fileno(), *(x.fileno() for x in conns)}
            pid = os.fork()
            if pid == 0:
                run_rank(req, fds, how, keep)
            for fd in fds:
                os.close(fd)
            children[pid] = conn
            conns[conn] = pid
            # Which client stands in for which rank, for a test that finds a rank by the pid its
            # heartbeat names and its wrapper's record by the pid the wrapper started
            # (tests/trainer/packs.py: launched_pid).
            client = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                         struct.calcsize("3i")))[0]
            pids.write(f"{pid} {client}\n")
            pids.flush()
            try:
                conn.sendall(f"pid {pid}\n".encode())
            except OSError:
                pass
    for pid in list(children):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    listener.close()
    try:
        os.unlink(sock_path)
    except FileNotFoundError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
