"""The client of the tests' rank zygote (tests/zygote/server.py: why, and what a rank sees).

Python imports `sitecustomize` at start-up from any folder on sys.path; tests/conftest.py puts
this folder on the ranks' PYTHONPATH and EK_ZYGOTE (the server's socket) in their
environment. For a command line the server serves, this process hands the server its argv,
environment, working directory and standard descriptors, and from then on only stands in
for the rank the server forked: it forwards the signals it gets, stops when the rank stops,
and ends as the rank ends (its exit code, or the same signal). Anything else (no EK_ZYGOTE,
another program, the server's "no", no server) runs here as always. Costs a process that is
not served one environment lookup, or a connect and a line.
"""


def _ek_zygote() -> None:
    import os

    path = os.environ.get("EK_ZYGOTE")
    if not path:
        return
    import sys

    argv = list(getattr(sys, "orig_argv", ()))
    # Cheap filter first: the server decides, but a command that cannot be one of its
    # (python -c, pip) does not connect.
    if not any(a in ("evenkeel.train", "evenkeel.isolation") or a.endswith(("train.py", "_trainer.py", "/torchrun"))
               for a in argv[1:4]):
        return
    import json
    import signal
    import socket

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        body = json.dumps({"prefix": sys.prefix, "argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
        socket.send_fds(s, [len(body).to_bytes(4, "big") + body], [0, 1, 2])
        f = s.makefile("rb")
        first = f.readline().split()
    except OSError:
        s.close()
        return
    if len(first) != 2 or first[0] != b"pid":
        s.close()
        return  # "no": run it here
    pid = int(first[1])

    def forward(sig, _frame) -> None:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
                signal.SIGCONT):
        signal.signal(sig, forward)
    while True:
        try:
            line = f.readline().split()
        except OSError:
            line = []
        if not line:
            os._exit(1)  # the server went away: its ranks with it
        what, n = line[0], int(line[1]) if len(line) > 1 else 0
        if what == b"stop":
            os.kill(os.getpid(), signal.SIGSTOP)  # as the rank is: a wrapper reads this process's state
        elif what == b"exit":
            os._exit(n)
        elif what == b"signal":
            if n not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(n, signal.SIG_DFL)
            os.kill(os.getpid(), n)
            os._exit(128 + n)


_ek_zygote()
del _ek_zygote
