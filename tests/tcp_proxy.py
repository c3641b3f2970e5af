"""A TCP proxy in a process of its own, which a test tells to slow, stall or cut what it carries.

`python -m tests.tcp_proxy UPSTREAM_PORT` listens on a free port of 127.0.0.1 for clients and on
another for orders, prints `LISTEN CONTROL` and forwards every connection to UPSTREAM_PORT.
Orders, one line each on the control port, answered `ok`:

- `delay S`: every chunk either way is held S seconds first (a store answering after seconds);
- `stall`: nothing is forwarded any more (a store that stops answering, connections open);
- `flow`: forward again, at once (held chunks go on in order);
- `cut-after-commit N`: the next N times a client sends PostgreSQL's `COMMIT`, the statement
  reaches the server, and the connection is closed before the server's answer reaches the
  client (a write that succeeded but was reported failed);
- `count`: answers the cuts made so far.

`ProxyProcess` starts it and gives the orders from a test.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from dataclasses import dataclass, field

__all__ = ["ProxyProcess"]


@dataclass
class _Orders:
    delay_s: float = 0.0
    flowing: asyncio.Event = field(default_factory=asyncio.Event)
    cuts_left: int = 0
    cuts_made: int = 0


async def _pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    orders: _Orders,
    from_client: bool,
    cut: asyncio.Event,
) -> None:
    try:
        while not cut.is_set():
            chunk = await reader.read(65536)
            if not chunk:
                break
            await orders.flowing.wait()
            if orders.delay_s:
                await asyncio.sleep(orders.delay_s)
                await orders.flowing.wait()
            writer.write(chunk)
            await writer.drain()
            if from_client and orders.cuts_left and b"COMMIT" in chunk.upper():
                # The commit is on its way to the server: let it arrive, never its answer.
                orders.cuts_left -= 1
                orders.cuts_made += 1
                cut.set()
    except (ConnectionError, OSError):
        pass
    finally:
        cut.set()
        writer.close()


async def _serve(upstream: int) -> None:
    orders = _Orders()
    orders.flowing.set()

    async def carry(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            client_w.close()
            return
        cut = asyncio.Event()
        up = asyncio.ensure_future(_pipe(client_r, server_w, orders, True, cut))
        down = asyncio.ensure_future(_pipe(server_r, client_w, orders, False, cut))
        await cut.wait()
        await asyncio.sleep(0)  # the commit's bytes are written before both ends close
        for end in (server_w, client_w):
            end.close()
        for task in (up, down):
            task.cancel()

    async def obey(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async for line in reader:
            order, _, argument = line.decode().strip().partition(" ")
            answer = "ok"
            if order == "delay":
                orders.delay_s = float(argument)
            elif order == "stall":
                orders.flowing.clear()
            elif order == "flow":
                orders.flowing.set()
            elif order == "cut-after-commit":
                orders.cuts_left = int(argument)
            elif order == "count":
                answer = str(orders.cuts_made)
            else:
                answer = f"unknown order {order!r}"
            writer.write(f"{answer}\n".encode())
            await writer.drain()

    clients = await asyncio.start_server(carry, "127.0.0.1", 0)
    control = await asyncio.start_server(obey, "127.0.0.1", 0)
    ports = [s.sockets[0].getsockname()[1] for s in (clients, control)]
    print(*ports, flush=True)
    await asyncio.gather(clients.serve_forever(), control.serve_forever())


class ProxyProcess:
    """The proxy started as a process of its own, in front of `upstream_port` on 127.0.0.1."""

    def __init__(self, upstream_port: int) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.tcp_proxy", str(upstream_port)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        self.port, self._control_port = map(int, self._process.stdout.readline().split())
        self._control = socket.create_connection(("127.0.0.1", self._control_port), timeout=10)
        self._answers = self._control.makefile("r")

    def order(self, line: str) -> str:
        """Give an order (see the module); its answer."""
        self._control.sendall(f"{line}\n".encode())
        return self._answers.readline().strip()

    def stop(self) -> None:
        """Stop the proxy (its connections close)."""
        self._control.close()
        self._process.kill()
        self._process.wait()


if __name__ == "__main__":
    asyncio.run(_serve(int(sys.argv[1])))
