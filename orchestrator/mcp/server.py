"""Baton as an MCP server: a team of agents as tools for MCP clients (IDEs, desktop assistants).

The same tools over streamable HTTP (mounted on the API at `/mcp`, behind the API's keys and an
Origin check: `orchestrator.api.guards.ProtocolGuard`) and over stdio (`baton mcp`): submit a task
(and wait a while for its answer), get a run, get a run's diagram, list the agents.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ValidationError
from starlette.applications import Starlette

from agents.core.events import RunFinished
from orchestrator import __version__
from orchestrator.errors import ServiceError
from orchestrator.schemas import RunRequest, run_view
from orchestrator.service import RunService
from orchestrator.store import StoredRun
from orchestrator.system.routing import AUTO

__all__ = ["build_mcp_server", "mcp_http_app"]

_MAX_WAIT_S = 600.0


def _summary(view: dict[str, Any]) -> dict[str, Any]:
    keep = ("id", "status", "entry_agent", "output", "error", "duration_s", "usage", "links")
    return {k: view[k] for k in keep if k in view}


async def _run(runs: RunService, run_id: str) -> StoredRun:
    try:
        return await runs.get(run_id)
    except ServiceError as exc:
        raise ToolError(exc.message) from None


def build_mcp_server(service: Callable[[], Awaitable[RunService]]) -> MCPServer:
    """The tools, over the run service that `service` gives when a tool is called.

    It may wait for the service to start.
    """
    server = MCPServer(
        "baton",
        version=__version__,
        # The SDK configures the root logger at this level: INFO would print its chatter (and
        # Alembic's) on every `baton serve` start.
        log_level="WARNING",
        instructions="Baton runs tasks through a team of AI agents. submit_task hands the team "
        "a task and returns its answer (or the run id to ask about later with get_run).",
    )

    @server.tool()
    async def submit_task(
        task: str, agent: str | None = None, wait_s: float = 60.0
    ) -> dict[str, Any]:
        """Give the team a task; wait up to wait_s seconds for the answer.

        Args:
            task: what the team should do.
            agent: the entry agent, "auto" to route by capabilities, or none for the default.
            wait_s: how long to wait for the run to end (0: return at once with its id).
        """
        runs = await service()
        agents = {a.name for a in runs.system.config.agents}
        if agent is not None and agent != AUTO and agent not in agents:
            raise ToolError(f"unknown agent {agent!r}; agents: {', '.join(sorted(agents))}")
        try:
            request = RunRequest(task=task, agent=agent)
            run, _ = await runs.submit(request.submission(), principal="mcp")
        except ValidationError as exc:
            raise ToolError(f"invalid task: {exc.errors()[0]['msg']}") from None
        except ServiceError as exc:
            raise ToolError(exc.message) from None
        if wait_s > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(wait_s, _MAX_WAIT_S)):
                    async for item in runs.events.follow(run):
                        if item is not None and isinstance(item[1], RunFinished):
                            break
        return _summary(run_view(await runs.get(run.id)).model_dump(mode="json"))

    @server.tool()
    async def get_run(run_id: str) -> dict[str, Any]:
        """A run's status, answer or error, usage and timings.

        Args:
            run_id: the id submit_task returned.
        """
        return _summary(run_view(await _run(await service(), run_id)).model_dump(mode="json"))

    @server.tool()
    async def get_run_diagram(
        run_id: str, detail: Literal["agents", "tools", "full"] = "agents"
    ) -> str:
        """A run as a Mermaid sequence diagram (who delegated what to whom, and what came back).

        Args:
            run_id: the id submit_task returned.
            detail: agents only; tools: tool calls too; full: model calls too.
        """
        runs = await service()
        return (await runs.views.diagram(await _run(runs, run_id), detail)).text

    @server.tool()
    async def list_agents() -> str:
        """The team: each agent with what it is for and whom it may delegate to."""
        system = (await service()).system
        return json.dumps(
            [
                {
                    "name": a.name,
                    "description": a.description,
                    "capabilities": list(a.capabilities),
                    "delegates": system.topology.delegates(a.name),
                }
                for a in system.config.agents
            ]
        )

    return server


def mcp_http_app(server: MCPServer) -> Starlette:
    """The streamable-HTTP app at `/mcp` (Baton's own guard does the transport checks)."""
    return server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
