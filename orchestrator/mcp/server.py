"""Baton as an MCP server: a team of agents as tools for MCP clients (IDEs, desktop assistants).

The same tools over streamable HTTP (mounted on the API at `/mcp`, behind the API's keys and an
Origin check: `orchestrator.api.guards.ProtocolGuard`) and over stdio (`baton mcp`): submit a task
(and wait a while for its answer, with progress; an agent's question goes to the client's user by
elicitation), answer a question, cancel a run, get a run, get a run's diagram, list the agents; a
prompt to hand the team a task, whose agent argument completes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Collection
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolResult,
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)
from mcp_types import (
    InputRequiredResult,
)
from mcp_types.version import is_version_at_least
from pydantic import Field
from starlette.applications import Starlette
from typing_extensions import override

from agents.core.events import AgentStarted, InputRequested, RunFinished
from agents.core.waits import Resolution
from orchestrator import __version__
from orchestrator.access import Access, Role
from orchestrator.errors import ServiceError
from orchestrator.mcp.runs import (
    ANSWER_SCHEMA,
    caller_of,
    elicitation,
    outcome,
    question,
    read_run,
    submit,
    summary,
    take_answers,
)
from orchestrator.mcp.tasks import RunTasks
from orchestrator.schemas import run_view
from orchestrator.service import RunService
from orchestrator.store import StoredRun

__all__ = ["build_mcp_server", "mcp_http_app"]

_MAX_WAIT_S = 600.0
# How long a tool call waits for its run: said in the tools' schema, checked before the call.
WaitSeconds = Annotated[float, Field(ge=0, le=_MAX_WAIT_S)]
# How long cancel_run waits for the run to stop before it answers with the run as it stands.
_CANCEL_WAIT_S = 15.0
# From this protocol version on, a tool asks its client's user by returning its questions
# (`InputRequiredResult`) and the client calls it again with the answers: no back channel is
# needed, so it works on the stateless `/mcp` (the multi-round-trip flow).
_ROUND_TRIPS = "2026-07-28"


async def _follow(
    runs: RunService, run: StoredRun, ctx: Context | None, answered: Collection[str] = ()
) -> InputRequested | None:
    """Follow a run to its end; each agent's start is a step of progress for `ctx`.

    An agent's question is asked through `ctx` where it can be (elicitation in the call); one it
    cannot ask stops the wait and is returned (the caller hands it to its client otherwise),
    but for those `answered` already (their ids).
    """
    started = 0
    if ctx is not None:
        await ctx.report_progress(0, message=f"run {run.id} accepted")
    async for item in runs.events.follow(run):
        event = item[1] if item is not None else None
        if ctx is None:
            if isinstance(event, RunFinished):
                return None
        elif isinstance(event, AgentStarted):
            started += 1
            said = f"{event.caller} → {event.agent}" if event.caller else f"→ {event.agent}"
            await ctx.report_progress(started, message=said)
        elif isinstance(event, InputRequested) and event.call_id not in answered:
            if not await _elicit(runs, run, event, ctx):
                return event
        elif isinstance(event, RunFinished):
            await ctx.report_progress(started + 1, started + 1, f"run {event.status.value}")
            return None
    return None


def _asks_by_round_trip(ctx: Context) -> bool:
    """Whether the client takes a tool's questions as its result and calls again with answers."""
    version = ctx.protocol_version
    capabilities = ctx.client_capabilities
    return (
        version is not None
        and is_version_at_least(version, _ROUND_TRIPS)
        and capabilities is not None
        and capabilities.elicitation is not None
    )


async def _elicit(runs: RunService, run: StoredRun, asked: InputRequested, ctx: Context) -> bool:
    """Ask the client's user `asked` in the call (elicitation); False when it cannot be.

    (Nor when the caller's key may not answer: the question waits for someone who may.)
    """
    capabilities = ctx.client_capabilities
    if (
        _asks_by_round_trip(ctx)
        or capabilities is None
        or capabilities.elicitation is None
        or not ctx.session.can_send_request
    ):
        return False
    try:
        who = f"mcp:{_who(ctx, 'approve').who}"
    except ToolError:
        return False
    try:
        result = await ctx.session.elicit_form(
            question(asked), ANSWER_SCHEMA, ctx.request_context.request_id
        )
    except MCPError:
        return False
    await take_answers(runs, run, {asked.call_id: result}, who)
    return True


async def _wait(
    runs: RunService,
    run: StoredRun,
    ctx: Context,
    wait_s: float,
    caller: Access,
    answered: Collection[str] = (),
) -> dict[str, Any] | InputRequiredResult:
    """The run once it ends (within `wait_s`) or asks what this call cannot ask in it.

    A cancellation of the call cancels the run. A question goes back as the tool's result: to a
    client of the round-trip flow as its input request (it calls again with the answer), to any
    other in the run's summary (`questions`; `answer_question` answers it).
    """
    asked = None
    if wait_s > 0:
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(wait_s, _MAX_WAIT_S)):
                    asked = await _follow(runs, run, ctx, answered)
        except asyncio.CancelledError:
            # The client cancelled the call (notifications/cancelled): the run with it.
            await asyncio.shield(runs.cancel(run.id, caller))
            raise
    if asked is not None and _asks_by_round_trip(ctx):
        return InputRequiredResult(
            input_requests={asked.call_id: elicitation(asked)}, request_state=run.id
        )
    return await outcome(runs, run)


def _who(ctx: Context, role: Role) -> Access:
    """Who calls the tool, if they have `role` (see `caller`)."""
    return caller_of(ctx.request_context.request, role)


class TeamTools:
    """The team as MCP tools, a prompt and its completion.

    Over the run service that `service` gives when one is called (it may wait for it to start).
    """

    def __init__(self, service: Callable[[], Awaitable[RunService]]) -> None:
        self._service = service

    def register(self, server: MCPServer) -> None:
        """Offer them on `server`."""
        for tool in (
            self.submit_task,
            self.answer_question,
            self.cancel_run,
            self.get_run,
            self.get_run_diagram,
            self.list_agents,
        ):
            server.tool()(tool)
        server.prompt()(self.ask_team)
        server.completion()(self.complete)  # type: ignore[no-untyped-call]  # the SDK leaves it untyped

    async def submit_task(
        self,
        task: str,
        ctx: Context,
        agent: str | None = None,
        wait_s: WaitSeconds = 60.0,
        thread: str | None = None,
        input: dict[str, Any] | list[Any] | None = None,
    ) -> dict[str, Any] | InputRequiredResult:
        """Give the team a task; wait up to wait_s seconds for the answer.

        While it waits, each agent's start is a progress notification (when the client asked
        for progress), and a cancellation of this call cancels the run. An agent's question is
        asked through elicitation when the client offers it; else the run comes back
        `input_required` with its questions, for answer_question.

        Args:
            task: what the team should do.
            ctx: the call (progress goes to it).
            agent: the entry agent, "auto" to route by capabilities, or none for the default.
            wait_s: how long to wait for the run to end (0: return at once with its id).
            thread: a conversation to continue (the id a former answer's thread_id gave), or
                "new" to start one: the team sees the earlier turns.
            input: structured input for the entry agent (JSON), checked against its schema.
        """
        runs = await self._service()
        answered: tuple[str, ...] = ()
        if ctx.request_state:  # called again with the answers to the run's questions
            caller = _who(ctx, "approve")
            run = await read_run(runs, ctx.request_state, caller)
            answers = ctx.input_responses or {}
            answered = await take_answers(runs, run, answers, f"mcp:{caller.who}")
        else:
            caller = _who(ctx, "submit")
            meta = ctx.request_context.meta or {}
            run = await submit(runs, task, agent, meta, caller, thread, input)
        return await _wait(runs, run, ctx, wait_s, caller, answered)

    async def answer_question(
        self,
        run_id: str,
        answer: str,
        ctx: Context,
        question_id: str | None = None,
        wait_s: WaitSeconds = 60.0,
    ) -> dict[str, Any] | InputRequiredResult:
        """Answer a question a run's agent asked (the run is input_required); wait for the run.

        Args:
            run_id: the run that asks (submit_task's id).
            answer: what the agent is told.
            ctx: the call (progress goes to it).
            question_id: which question (needed only when the run asks several).
            wait_s: how long to wait for the run to end, as for submit_task.
        """
        runs = await self._service()
        caller = _who(ctx, "approve")
        run = await read_run(runs, run_id, caller)
        try:
            who = f"mcp:{caller.who}"
            answered = await runs.desk.resolve(run, Resolution.reply(answer, who=who), question_id)
        except ServiceError as exc:
            raise ToolError(exc.message) from None
        return await _wait(runs, run, ctx, wait_s, caller, (str(answered["question_id"]),))

    async def cancel_run(self, run_id: str, ctx: Context) -> dict[str, Any]:
        """Cancel a run that is still going (one that has ended stays as it ended).

        Args:
            run_id: the id submit_task returned.
            ctx: the call.
        """
        runs = await self._service()
        caller = _who(ctx, "submit")
        try:
            run = await runs.cancel((await read_run(runs, run_id, caller)).id, caller)
        except ServiceError as exc:
            raise ToolError(exc.message) from None
        if not run.finished:  # wait (bounded) for it to stop
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_CANCEL_WAIT_S):
                    await _follow(runs, run, None)
        return summary(run_view(await runs.get(run.id)).model_dump(mode="json"))

    def ask_team(self, task: str, agent: str = "") -> str:
        """Hand a task to the team (or to one of its agents) and report its answer.

        Args:
            task: what the team should do.
            agent: the agent to start with (default: the team's entry agent).
        """
        to = f' with agent "{agent}"' if agent else ""
        return f"Use the submit_task tool{to} for this task, then report its answer:\n\n{task}"

    async def complete(
        self,
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        """The team's agents whose names start with what was typed, for `ask_team`'s agent."""
        if isinstance(ref, PromptReference) and (ref.name, argument.name) == ("ask_team", "agent"):
            names = sorted(a.name for a in (await self._service()).system.config.agents)
            return Completion(values=[n for n in names if n.startswith(argument.value)])
        return None

    async def get_run(self, run_id: str, ctx: Context) -> dict[str, Any]:
        """A run's status, answer or error, usage and timings.

        Args:
            run_id: the id submit_task returned.
            ctx: the call.
        """
        run = await read_run(await self._service(), run_id, _who(ctx, "read"))
        return summary(run_view(run).model_dump(mode="json"))

    async def get_run_diagram(
        self, run_id: str, ctx: Context, detail: Literal["agents", "tools", "full"] = "agents"
    ) -> str:
        """A run as a Mermaid sequence diagram (who delegated what to whom, and what came back).

        Args:
            run_id: the id submit_task returned.
            ctx: the call.
            detail: agents only; tools: tool calls too; full: model calls too.
        """
        runs = await self._service()
        run = await read_run(runs, run_id, _who(ctx, "read"))
        return (await runs.views.diagram(run, detail)).text

    async def list_agents(
        self,
    ) -> str:
        """The team: each agent with what it is for and whom it may delegate to."""
        system = (await self._service()).system
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


class _Server(MCPServer):
    """The SDK's server, but for a call to a tool it does not have.

    An unknown tool is a protocol error (JSON-RPC -32602, the MCP spec's tools "Error Handling"),
    not a tool's failure: the SDK answers `isError: true`, which a client takes for a call made.
    (Arguments that do not fit a tool stay a tool's failure: the model can correct them.)
    """

    @override
    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        if name not in {t.name for t in await self.list_tools()}:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {name}")
        return await super().call_tool(name, arguments, context)


def build_mcp_server(service: Callable[[], Awaitable[RunService]]) -> MCPServer:
    """The team's MCP server (`TeamTools`), over the run service that `service` gives."""
    server = _Server(
        "baton",
        version=__version__,
        # The SDK configures the root logger at this level: INFO would print its chatter (and
        # Alembic's) on every `baton serve` start.
        log_level="WARNING",
        instructions="Baton runs tasks through a team of AI agents. submit_task hands the team "
        "a task and returns its answer (or the run id to ask about later with get_run).",
        # A client that takes MCP tasks gets submit_task's run as one (`orchestrator.mcp.tasks`).
        extensions=[RunTasks(service)],
    )
    TeamTools(service).register(server)
    return server


def mcp_http_app(server: MCPServer) -> Starlette:
    """The streamable-HTTP app at `/mcp` (Baton's own guard does the transport checks)."""
    return server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
