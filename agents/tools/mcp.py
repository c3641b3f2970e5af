"""Tools from MCP servers: one session per server per agent actor, kept open and reused.

A session lives in a keeper task (the mcp client's context must be entered and left by the same
task); calls from any invocation go through it. When the server dies, the call in flight fails
as a tool error (it may or may not have run, so it is not repeated), and the next call opens a
new session first.

The tools' descriptions and schemas are pinned when the agent first lists them. A server that
later lists a tool differently (after a restart, or announcing a changed list) has that tool
disabled: the model is told it is unavailable, and the change is logged. This is the defence
against a server rewriting a tool's description to steer the model ("rug pull").

Results are passed to the model as the tool's output, as data; Baton never acts on their text.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from agents.core.errors import describe_error
from agents.core.json_schema import schema_problem, value_problems
from agents.core.spec import McpServerSpec
from agents.tools.base import ToolCallContext, ToolOutput
from agents.tools.delegate import reserved_by

__all__ = [
    "McpServer",
    "McpTool",
    "McpUnavailable",
    "admit_mcp_tools",
    "open_mcp_tools",
    "result_text",
]

logger = logging.getLogger(__name__)

# What model providers accept as a function name.
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class McpUnavailable(Exception):
    """The server could not be started, reached, or listed."""


def _fingerprint(tool: types.Tool) -> str:
    shape = {"description": tool.description or "", "schema": tool.input_schema}
    return hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode()).hexdigest()


def result_text(result: types.CallToolResult) -> str:
    """A tool result as the text a model reads."""
    parts: list[str] = []
    for item in result.content:
        if isinstance(item, types.TextContent):
            parts.append(item.text)
        else:
            kind = getattr(item, "type", type(item).__name__)
            mime = getattr(item, "mime_type", None)
            parts.append(f"[{kind} content{f' ({mime})' if mime else ''} not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, default=str))
    return "\n".join(parts)


@dataclass
class McpServer:
    """One MCP server as one agent actor sees it.

    Args:
        spec: how to reach it and which of its tools to offer.
        environ: where the variables named by `env` and `headers` are read.
    """

    spec: McpServerSpec
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ), repr=False)
    # Where a stdio server's own stderr goes (None: this process's stderr, e.g. an agent's log).
    errlog: TextIO | None = field(default=None, repr=False)
    pinned: dict[str, str] = field(default_factory=dict)
    disabled: dict[str, str] = field(default_factory=dict)
    _client: Client | None = field(default=None, repr=False)
    _keeper: asyncio.Task[None] | None = field(default=None, repr=False)
    _stop: asyncio.Event | None = field(default=None, repr=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    _stale: bool = False

    def _stdio(self) -> StdioServerParameters:
        assert self.spec.command is not None
        env = get_default_environment()
        missing = [name for name in self.spec.env if name not in self.environ]
        if missing:
            raise McpUnavailable(f"environment variable(s) {', '.join(missing)} are not set")
        env.update({name: self.environ[name] for name in self.spec.env})
        return StdioServerParameters(
            command=self.spec.command, args=list(self.spec.args), env=env, cwd=self.spec.cwd
        )

    def _headers(self) -> dict[str, str]:
        missing = [var for var in self.spec.headers.values() if var not in self.environ]
        if missing:
            raise McpUnavailable(f"environment variable(s) {', '.join(missing)} are not set")
        return {header: self.environ[var] for header, var in self.spec.headers.items()}

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification) or (
            getattr(message, "method", None) == "notifications/tools/list_changed"
        ):
            self._stale = True

    async def _keep(self, ready: asyncio.Future[Client]) -> None:
        """Hold one session open until told to stop or the connection breaks."""
        assert self._stop is not None
        try:
            async with contextlib.AsyncExitStack() as stack:
                if self.spec.url is not None:
                    http = await stack.enter_async_context(
                        create_mcp_http_client(headers=self._headers())
                    )
                    target: Any = streamable_http_client(self.spec.url, http_client=http)
                else:
                    target = stdio_client(self._stdio(), errlog=self.errlog or sys.stderr)
                client = await stack.enter_async_context(
                    Client(
                        target,
                        read_timeout_seconds=self.spec.timeout_s,
                        message_handler=self._on_message,
                    )
                )
                ready.set_result(client)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            elif not isinstance(exc, asyncio.CancelledError):
                logger.warning("MCP server %s: session ended: %s", self.spec.name, exc)

    async def _open(self) -> Client:
        await self._close()
        self._stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Client] = loop.create_future()
        self._keeper = loop.create_task(self._keep(ready), name=f"mcp:{self.spec.name}")
        try:
            async with asyncio.timeout(self.spec.connect_timeout_s):
                self._client = await ready
        except TimeoutError:
            await self._close()
            raise McpUnavailable(
                f"no answer within {self.spec.connect_timeout_s:g}s (connect_timeout_s)"
            ) from None
        except McpUnavailable:
            await self._close()
            raise
        except Exception as exc:
            await self._close()
            raise McpUnavailable(describe_error(exc)) from exc
        return self._client

    async def _list(self, client: Client) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        include, exclude = set(self.spec.include), set(self.spec.exclude)
        return [t for t in tools if (not include or t.name in include) and t.name not in exclude]

    def _pin(self, tools: list[types.Tool]) -> None:
        """Pin on first sight; disable any tool whose description or schema changed since."""
        for tool in tools:
            seen = _fingerprint(tool)
            was = self.pinned.setdefault(tool.name, seen)
            if was != seen and tool.name not in self.disabled:
                self.disabled[tool.name] = (
                    f"its description or input schema changed since the agent started (was "
                    f"{was[:12]}, now {seen[:12]}); disabled until the agent restarts"
                )
                logger.warning("MCP server %s changed tool %s: disabled", self.spec.name, tool.name)

    async def connect(self) -> list[types.Tool]:
        """Open the session and list (and pin) the tools to offer."""
        async with self._lock:
            client = await self._open()
            try:
                tools = await self._list(client)
            except Exception as exc:
                await self._close()
                raise McpUnavailable(f"cannot list its tools: {describe_error(exc)}") from exc
            self._pin(tools)
            return tools

    def _alive(self) -> bool:
        return self._client is not None and self._keeper is not None and not self._keeper.done()

    async def session(self) -> Client:
        """The open session, reopened (and the tools checked against their pins) if it broke."""
        async with self._lock:
            if self._alive() and not self._stale:
                assert self._client is not None
                return self._client
            client = self._client if self._alive() else await self._open()
            assert client is not None
            self._stale = False
            self._pin(await self._list(client))
            return client

    async def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call the server's tool `name`, reconnecting first if the session broke."""
        client = await self.session()
        if name in self.disabled:
            raise McpUnavailable(f"tool {name} is disabled: {self.disabled[name]}")
        try:
            return await client.call_tool(name, arguments)
        except Exception:
            # The session may be broken (server crashed): the next call opens a new one.
            if self._keeper is not None and not self._keeper.done() and self._stop is not None:
                self._stop.set()
            self._client = None
            raise

    async def _close(self) -> None:
        if self._stop is not None:
            self._stop.set()
        if self._keeper is not None:
            keeper, self._keeper = self._keeper, None
            try:
                async with asyncio.timeout(5):
                    await keeper
            except (TimeoutError, asyncio.CancelledError):
                keeper.cancel()
        self._client = None

    async def close(self) -> None:
        """Close the session (a stdio server exits)."""
        async with self._lock:
            await self._close()


@dataclass
class McpTool:
    """One tool of an MCP server, offered to the model under `prefix + name`."""

    server: McpServer
    remote_name: str
    description: str
    parameters: dict[str, Any]
    # The server's annotations say the tool writes (readOnlyHint false) or destroys
    # (destructiveHint true); tools that say nothing are not assumed either way.
    changes_state: bool = False

    @property
    def name(self) -> str:
        """The prefixed name the model calls the tool by."""
        return f"{self.server.spec.prefix}{self.remote_name}"

    @property
    def confirm(self) -> bool:
        """Whether calls wait for a person's approval (the server's `confirm`)."""
        return self.server.spec.confirm

    async def call(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolOutput:
        """Call the tool on its server; a server error is an error result, never repeated.

        Arguments that do not fit the tool's schema are not sent: the model is told where.
        """
        if problems := value_problems(self.parameters, arguments):
            return ToolOutput(
                f"error: the arguments do not fit {self.name}'s schema: {'; '.join(problems)}",
                is_error=True,
            )
        try:
            # The session's own read timeout ends the call first (and marks its span an
            # error); this one is a backstop for a session that does not.
            async with asyncio.timeout(self.server.spec.timeout_s + 1):
                result = await self.server.call(self.remote_name, arguments)
        except McpUnavailable as exc:
            return ToolOutput(f"error: {exc}", is_error=True)
        except Exception as exc:
            timed_out = isinstance(exc, TimeoutError) or (
                isinstance(exc, MCPError) and exc.code == types.REQUEST_TIMEOUT
            )
            if timed_out:
                return ToolOutput(
                    f"error: MCP server {self.server.spec.name} did not answer within "
                    f"{self.server.spec.timeout_s:g}s",
                    is_error=True,
                )
            return ToolOutput(
                f"error: MCP server {self.server.spec.name} failed: {describe_error(exc)}",
                is_error=True,
            )
        return ToolOutput(result_text(result), is_error=bool(result.is_error))


def _changes_state(annotations: types.ToolAnnotations | None) -> bool:
    if annotations is None:
        return False
    return annotations.read_only_hint is False or annotations.destructive_hint is True


async def open_mcp_tools(
    specs: tuple[McpServerSpec, ...],
    environ: Mapping[str, str] | None = None,
    errlog: TextIO | None = None,
) -> tuple[list[McpServer], list[McpTool], dict[str, str]]:
    """Connect to every server at once; the servers, their tools, and each failure by server.

    `errlog`: where stdio servers' own stderr goes (a file: it needs a descriptor).
    """
    env = dict(environ if environ is not None else os.environ)
    servers = [McpServer(spec, env, errlog=errlog) for spec in specs]
    listed = await asyncio.gather(*(s.connect() for s in servers), return_exceptions=True)
    tools: list[McpTool] = []
    problems: dict[str, str] = {}
    for server, outcome in zip(servers, listed, strict=True):
        if isinstance(outcome, BaseException):
            problems[server.spec.name] = (
                str(outcome) if isinstance(outcome, McpUnavailable) else describe_error(outcome)
            )
            continue
        tools.extend(
            McpTool(
                server,
                t.name,
                t.description or t.name,
                t.input_schema or {"type": "object", "properties": {}},
                _changes_state(t.annotations),
            )
            for t in outcome
        )
    return servers, tools, problems


def admit_mcp_tools(tools: list[McpTool], taken: set[str]) -> tuple[list[McpTool], list[str]]:
    """The tools an agent may offer beside the names it has (`taken`, updated), and the skipped.

    Each skipped tool says why: an inputSchema that is no JSON Schema, a name providers refuse,
    or one already taken or reserved.
    """
    usable, problems = [], []
    for tool in tools:
        server = tool.server.spec.name
        if problem := schema_problem(tool.parameters):
            problems.append(
                f"MCP server {server}: tool {tool.name!r} has an inputSchema that is not a "
                f"valid JSON Schema ({problem}); skipped"
            )
        elif not _TOOL_NAME.match(tool.name):
            problems.append(
                f"MCP server {server}: tool name {tool.name!r} is not a valid tool name "
                "(letters, digits, _ and -, at most 64); skipped"
            )
        elif tool.name in taken or reserved_by(tool.name):
            problems.append(
                f"MCP server {server}: tool {tool.name!r} collides with another or a reserved "
                "tool name; skipped (set a prefix)"
            )
        else:
            taken.add(tool.name)
            usable.append(tool)
    return usable, problems
