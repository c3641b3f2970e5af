"""The protocol endpoints (`/mcp`, `/a2a` and the agent card), built on their first request.

Importing the MCP SDK and the A2A SDK is about half of what `baton serve` spends starting (1.5 of
3.1 s of CPU on a 2-core machine), for endpoints many deployments never call. The routes exist
from the start, at fixed paths and behind the same guards; what answers at them is imported and
built the first time one is called (in a thread, so that the service's event loop keeps serving
meanwhile), once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from orchestrator.service import RunService
from orchestrator.system.config import AgentSystem

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["A2A_CARD_PATH", "A2A_RPC_PATH", "MCP_PATH", "LazyA2A", "LazyMcp"]

# The paths the SDKs serve them at (tests/orchestrator/mcp/test_server.py and test_a2a_server.py
# call them there).
MCP_PATH = "/mcp"
A2A_RPC_PATH = "/a2a"
A2A_CARD_PATH = "/.well-known/agent-card.json"

Current = Callable[[], Awaitable[RunService]]


class _Routes:
    """Routes built once by `build`, on the first request; concurrent requests wait for it."""

    def __init__(self, build: Callable[[], Awaitable[dict[str, ASGIApp]]]) -> None:
        self._build = build
        self._routes: dict[str, ASGIApp] | None = None
        self._lock = asyncio.Lock()

    async def routes(self) -> dict[str, ASGIApp]:
        if self._routes is None:
            async with self._lock:
                if self._routes is None:
                    self._routes = await self._build()
        return self._routes

    def endpoint(self, path: str) -> ASGIApp:
        """The ASGI app answering at `path` (once built)."""
        return _Endpoint(self, path)


class _Endpoint:
    """An ASGI app (not a function: Starlette would take one for a request handler)."""

    def __init__(self, built: _Routes, path: str) -> None:
        self._built, self._path = built, path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await (await self._built.routes())[self._path](scope, receive, send)


def _apps(routes: list[Route]) -> dict[str, ASGIApp]:
    return {route.path: route.app for route in routes}


class LazyA2A:
    """The agent card (public) and the JSON-RPC endpoint of `orchestrator.a2a`."""

    def __init__(
        self,
        system: AgentSystem,
        current: Current,
        base_url: str,
        secured: bool,
        blocking_wait_s: float | None = None,
        push_private: bool = False,
    ):
        self._args = (system, current, base_url, secured, blocking_wait_s, push_private)
        self._routes = _Routes(self._build)

    def endpoint(self, path: str) -> ASGIApp:
        """The ASGI app answering at `path` (built on the first request)."""
        return self._routes.endpoint(path)

    async def _build(self) -> dict[str, ASGIApp]:
        await asyncio.to_thread(__import__, "orchestrator.a2a")
        from orchestrator.a2a import RPC_PATH, a2a_routes

        card, rpc = a2a_routes(*self._args)
        routes = _apps([*card, *rpc])
        assert {A2A_CARD_PATH, A2A_RPC_PATH} <= set(routes) and RPC_PATH == A2A_RPC_PATH
        return routes


class LazyMcp:
    """Baton's MCP server over streamable HTTP (`orchestrator.mcp.server`).

    Its session manager runs from the first request until `close()`.
    """

    def __init__(self, current: Current) -> None:
        self._current = current
        self._stop = asyncio.Event()
        self._running: asyncio.Task[None] | None = None
        self._routes = _Routes(self._build)

    def endpoint(self, path: str) -> ASGIApp:
        """The ASGI app answering at `path` (built on the first request)."""
        return self._routes.endpoint(path)

    async def _build(self) -> dict[str, ASGIApp]:
        await asyncio.to_thread(__import__, "orchestrator.mcp.server")
        from orchestrator.mcp.server import build_mcp_server, mcp_http_app

        server = build_mcp_server(self._current)
        routes = _apps([r for r in mcp_http_app(server).routes if isinstance(r, Route)])
        assert MCP_PATH in routes
        started = asyncio.Event()
        # The manager's task group is entered and left by one task of its own (anyio requires
        # it), which lives until the service stops.
        running = self._running = asyncio.create_task(self._run(server, started))
        waiting = asyncio.create_task(started.wait())
        await asyncio.wait((running, waiting), return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if running.done():  # it failed to start: this request fails with its error
            self._running = None
            running.result()
        return routes

    async def _run(self, server: MCPServer, started: asyncio.Event) -> None:
        async with server.session_manager.run():
            started.set()
            await self._stop.wait()

    async def close(self) -> None:
        """Stop the session manager, if a request started it."""
        self._stop.set()
        if self._running is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._running
