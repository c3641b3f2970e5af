"""Baton as an MCP server: a team of agents as tools for MCP clients (IDEs, desktop assistants).

The same tools over streamable HTTP (mounted on the API at `/mcp`, behind the API's keys and an
Origin check: `orchestrator.api.guards.ProtocolGuard`) and over stdio (`baton mcp`): submit a task
(and wait a while for its answer, with progress), cancel a run, get a run, get a run's diagram,
list the agents; a prompt to hand the team a task, whose agent argument completes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)
from pydantic import ValidationError
from starlette.applications import Starlette

from agents.core.a2a_meta import TRACE_KEYS
from agents.core.events import AgentStarted, RunFinished
from orchestrator import __version__
from orchestrator.engine.submission import Origin
from orchestrator.errors import ServiceError
from orchestrator.schemas import RunRequest, run_view
from orchestrator.service import RunService
from orchestrator.store import StoredRun
from orchestrator.system.routing import AUTO

__all__ = ["build_mcp_server", "mcp_http_app"]

_MAX_WAIT_S = 600.0
# How long cancel_run waits for the run to stop before it answers with the run as it stands.
_CANCEL_WAIT_S = 15.0


def _summary(view: dict[str, Any]) -> dict[str, Any]:
    keep = (
        "id",
        "status",
        "entry_agent",
        "output",
        "error",
        "duration_s",
        "usage",
        "thread_id",
        "links",
    )
    return {k: view[k] for k in keep if k in view}


async def _follow(runs: RunService, run: StoredRun, ctx: Context | None) -> None:
    """Follow a run to its end; each agent's start is a step of progress for `ctx`."""
    started = 0
    if ctx is not None:
        await ctx.report_progress(0, message=f"run {run.id} accepted")
    async for item in runs.events.follow(run):
        event = item[1] if item is not None else None
        if ctx is None:
            if isinstance(event, RunFinished):
                return
        elif isinstance(event, AgentStarted):
            started += 1
            said = f"{event.caller} → {event.agent}" if event.caller else f"→ {event.agent}"
            await ctx.report_progress(started, message=said)
        elif isinstance(event, RunFinished):
            await ctx.report_progress(started + 1, started + 1, f"run {event.status.value}")
            return


async def _submit(
    runs: RunService,
    task: str,
    agent: str | None,
    meta: Mapping[str, Any],
    thread: str | None = None,
) -> StoredRun:
    """Start a run (a turn of `thread`, if given; `new`: of a new thread).

    A W3C trace context in the call's `_meta` (SEP-414) is the run's parent: the MCP host's
    trace goes on into the run's.
    """
    agents = {a.name for a in runs.system.config.agents}
    if agent is not None and agent != AUTO and agent not in agents:
        raise ToolError(f"unknown agent {agent!r}; agents: {', '.join(sorted(agents))}")
    carrier = {k: str(meta[k]) for k in TRACE_KEYS if isinstance(meta.get(k), str)}
    try:
        request = RunRequest(task=task, agent=agent).submission()
        if carrier:
            request = dataclasses.replace(request, origin=Origin(trace_context=carrier))
        if thread is None:
            run, _ = await runs.submit(request, principal="mcp")
        else:
            run, _ = await runs.threads.continue_or_start(thread, request, principal="mcp")
    except ValidationError as exc:
        raise ToolError(f"invalid task: {exc.errors()[0]['msg']}") from None
    except ServiceError as exc:
        raise ToolError(exc.message) from None
    return run


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
        task: str,
        ctx: Context,
        agent: str | None = None,
        wait_s: float = 60.0,
        thread: str | None = None,
    ) -> dict[str, Any]:
        """Give the team a task; wait up to wait_s seconds for the answer.

        While it waits, each agent's start is a progress notification (when the client asked
        for progress), and a cancellation of this call cancels the run.

        Args:
            task: what the team should do.
            ctx: the call (progress goes to it).
            agent: the entry agent, "auto" to route by capabilities, or none for the default.
            wait_s: how long to wait for the run to end (0: return at once with its id).
            thread: a conversation to continue (the id a former answer's thread_id gave), or
                "new" to start one: the team sees the earlier turns.
        """
        runs = await service()
        run = await _submit(runs, task, agent, ctx.request_context.meta or {}, thread)
        if wait_s > 0:
            try:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(wait_s, _MAX_WAIT_S)):
                        await _follow(runs, run, ctx)
            except asyncio.CancelledError:
                # The client cancelled the call (notifications/cancelled): the run with it.
                await asyncio.shield(runs.cancel(run.id))
                raise
        return _summary(run_view(await runs.get(run.id)).model_dump(mode="json"))

    @server.tool()
    async def cancel_run(run_id: str) -> dict[str, Any]:
        """Cancel a run that is still going (one that has ended stays as it ended).

        Args:
            run_id: the id submit_task returned.
        """
        runs = await service()
        try:
            run = await runs.cancel((await _run(runs, run_id)).id)
        except ServiceError as exc:
            raise ToolError(exc.message) from None
        if not run.finished:  # wait (bounded) for it to stop
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_CANCEL_WAIT_S):
                    await _follow(runs, run, None)
        return _summary(run_view(await runs.get(run.id)).model_dump(mode="json"))

    @server.prompt()
    def ask_team(task: str, agent: str = "") -> str:
        """Hand a task to the team (or to one of its agents) and report its answer.

        Args:
            task: what the team should do.
            agent: the agent to start with (default: the team's entry agent).
        """
        to = f' with agent "{agent}"' if agent else ""
        return f"Use the submit_task tool{to} for this task, then report its answer:\n\n{task}"

    @server.completion()  # type: ignore[no-untyped-call, untyped-decorator]  # the SDK leaves it untyped
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        """The team's agents whose names start with what was typed, for `ask_team`'s agent."""
        if isinstance(ref, PromptReference) and (ref.name, argument.name) == ("ask_team", "agent"):
            names = sorted(a.name for a in (await service()).system.config.agents)
            return Completion(values=[n for n in names if n.startswith(argument.value)])
        return None

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
