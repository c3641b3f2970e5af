"""A small MCP server for the tests, over stdio or streamable HTTP.

    python -m tests.mcp_server                      # stdio
    python -m tests.mcp_server --http PORT          # streamable HTTP on 127.0.0.1:PORT/mcp

Tools: `add` (counted: `calls_made`), `nap`, `odd` (its schema is invalid), `shout`, `whoami`
(which environment it got), `secret_header` (the Authorization header it was sent, over HTTP),
and `die` (the process exits mid-call). `add`'s description is read from the file named by
$MCP_TEST_DESCRIPTION_FILE when set, so a test can change it between server starts (a "rug
pull").
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Literal

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

server = MCPServer("baton-test-tools")


def _add_description() -> str:
    path = os.environ.get("MCP_TEST_DESCRIPTION_FILE")
    if path and Path(path).is_file():
        return Path(path).read_text().strip()
    return "Add two integers."


_calls: Counter[str] = Counter()


@server.tool(description=_add_description())
def add(a: int, b: int) -> int:
    _calls["add"] += 1
    return a + b


@server.tool()
def calls_made(name: str) -> int:
    """How many times this server process ran a tool."""
    return _calls[name]


@server.tool()
async def nap(seconds: float) -> str:
    """Sleep, then say so (for timeouts)."""
    await anyio.sleep(seconds)
    return "rested"


@server.tool(annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True))
def erase_notes(folder: str) -> str:
    """Erase the notes kept in a folder (declares itself destructive)."""
    _calls["erase_notes"] += 1
    return f"erased the notes in {folder}"


@server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
def list_notes(folder: str, order: Literal["newest", "oldest"], limit: int = 5) -> str:
    """List the notes kept in a folder (declares itself read-only)."""
    return f"{limit} {order} notes in {folder}"


@server.tool()
def odd(n: Annotated[int, Field(json_schema_extra={"minimum": "zero"})]) -> int:
    """Offered with an inputSchema that is not valid JSON Schema (`minimum` is no number)."""
    return n


@server.tool()
def shout(text: str) -> str:
    """Repeat the text in capitals."""
    return text.upper()


@server.tool()
def whoami() -> dict[str, str | None]:
    """Which process and environment the server runs with."""
    return {
        "pid": str(os.getpid()),
        "PATH": os.environ.get("PATH"),
        "MCP_TEST_SECRET": os.environ.get("MCP_TEST_SECRET"),
        "LEAKY": os.environ.get("LEAKY"),
    }


@server.tool()
def secret_header(ctx: Context) -> str:
    """The Authorization header this request came with."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", None) or {}
    return str(headers.get("authorization", "none"))


@server.tool()
def die() -> str:
    """Exit the server process in the middle of the call."""
    os._exit(3)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
