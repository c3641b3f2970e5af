"""Ports for the servers the tests and the benchmarks start."""

from __future__ import annotations

import random
import socket

__all__ = ["free_port"]

# Below the kernel's ephemeral range (32768 and up on Linux) and above Ray's worker ports
# (10002-19999): no outgoing connection and no `bind(("", 0))` is given one of these.
_PORTS = range(20000, 32768)


def free_port() -> int:
    """A port free on 127.0.0.1 now, that nothing else is handed before our server binds it.

    A port from `bind(0)` is an ephemeral one: until the server binds it (`baton serve` does
    so only once its agents are up, seconds later), the kernel may give it to any outgoing
    connection, and a Ray cluster makes many.
    """
    for port in random.sample(_PORTS, 64):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {_PORTS}")
