"""A TCP port for a server a test starts (a rank's store at MASTER_PORT, an agent, a
watcher, Prometheus): tests/conftest.py puts this folder on sys.path for every suite.

The port is picked at random below the kernel's ephemeral range (ip_local_port_range)
and checked free. A port from bind(("", 0)) lies inside that range, where between the
test's close and the server's own bind any process's bind(0) or outgoing connection may
be given it; under scripts/test.sh the background stages (the unit tests under the
sanitizers, the browser) open hundreds of those beside the slow suite. Below the range
only a server that names its port can take it.
"""

from __future__ import annotations

import errno
import random
import socket
from pathlib import Path

_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_SPAN = 12000  # ports below the ephemeral range to pick from
_rng = random.SystemRandom()  # not `random`: a test that seeds it must not make two workers agree


def _ephemeral_low() -> int:
    try:
        return int(_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _free(port: int) -> bool:
    """Nothing is bound to `port` on any IPv4 or IPv6 address (no SO_REUSEADDR: a
    connection still in TIME_WAIT there counts as taken)."""
    for family, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                if family == socket.AF_INET6:
                    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                s.bind((addr, port))
        except OSError as e:
            if family == socket.AF_INET6 and e.errno in (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL):  # no IPv6 here
                continue
            return False
    return True


def free_port() -> int:
    low = _ephemeral_low()
    lo, hi = max(1024, low - _SPAN), low
    if hi - lo < 1000:
        raise RuntimeError(f"{_RANGE} starts at {low}: too few ports below it for the tests' servers")
    for _ in range(500):
        port = _rng.randrange(lo, hi)
        if _free(port):
            return port
    raise RuntimeError(f"no free TCP port found in {lo}-{hi - 1} after 500 tries")
