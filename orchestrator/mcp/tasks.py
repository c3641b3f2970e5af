"""`submit_task` as an MCP task: the tasks extension (`io.modelcontextprotocol/tasks`).

A client that declares the extension on its `submit_task` call gets the run back at once as a
task handle (`resultType: "task"`, its id the run's) instead of waiting in the call: it polls
`tasks/get` (the agents' questions as `inputRequests`, the answer as `result`), answers with
`tasks/update` and stops the run with `tasks/cancel`. The run is the task's whole state (nothing
is kept besides the run store), so any replica of the service answers for any task.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    CallToolRequestParams,
    CallToolResult,
    InputResponses,
    RequestParams,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from agents.core.events import InputRequested
from agents.core.messages import RunStatus
from orchestrator.access import Access, Role
from orchestrator.errors import ServiceError
from orchestrator.mcp.runs import (
    caller_of,
    elicitation,
    outcome,
    submit,
    take_answers,
)
from orchestrator.service import RunService
from orchestrator.store import StoredRun

__all__ = ["TASKS", "RunTasks"]

TASKS = "io.modelcontextprotocol/tasks"
# How often a client should ask (`pollIntervalMs`): a run's steps take seconds.
_POLL_MS = 1000
# The tasks' methods are 2026-07-28 vocabulary: older wires cannot carry a task handle.
_MODERN = frozenset(MODERN_PROTOCOL_VERSIONS)


class TaskRef(RequestParams):
    """`tasks/get` and `tasks/cancel`: which task."""

    task_id: str = Field(min_length=1, max_length=128)


class TaskAnswers(TaskRef):
    """`tasks/update`: answers to the task's `inputRequests`, by their keys."""

    input_responses: InputResponses = Field(default_factory=dict)


class RunTasks(Extension):
    """Runs as MCP tasks, over the run service that `service` gives.

    Roles as for the tools: `submit` to start and cancel, `read` to poll, `approve` to answer.
    """

    identifier = TASKS

    def __init__(self, service: Callable[[], Awaitable[RunService]]) -> None:
        self._service = service

    def methods(self) -> Sequence[MethodBinding]:
        """`tasks/get`, `tasks/update` and `tasks/cancel`, on 2026-07-28 wires."""
        return (
            MethodBinding("tasks/get", TaskRef, self._get, _MODERN),
            MethodBinding("tasks/update", TaskAnswers, self._update, _MODERN),
            MethodBinding("tasks/cancel", TaskRef, self._cancel, _MODERN),
        )

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        """`submit_task` from a client that takes tasks: the run as a task handle, at once."""
        arguments = params.arguments or {}
        task = arguments.get("task")
        if (
            params.name != "submit_task"
            or not _takes_tasks(ctx)
            or params.request_state is not None  # (a round trip's answers: the tool's own)
            or not isinstance(task, str)  # (the tool says what is wrong with it)
        ):
            return await call_next(ctx)
        runs = await self._service()
        try:
            run = await submit(
                runs,
                task,
                _text(arguments.get("agent")),
                ctx.meta or {},
                caller_of(ctx.request, "submit"),
                _text(arguments.get("thread")),
                arguments.get("input"),
            )
        except ToolError as exc:
            return CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)
        # (Recorded before the answer: a `tasks/get` for it resolves at once, as the spec asks.)
        return {"resultType": "task", **self._task(runs, run, "working", "the run is accepted")}

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskRef) -> HandlerResult:
        runs, run, _ = await self._run(ctx, params, "read")
        # (The ledger says a question waits before the store says the run is input_required.)
        if asked := await runs.desk.waiting(run, InputRequested):
            requests = {
                q.call_id: elicitation(q).model_dump(by_alias=True, mode="json", exclude_none=True)
                for q in asked
            }
            waiting = "the team asks: answer with tasks/update"
            return {**self._task(runs, run, "input_required", waiting), "inputRequests": requests}
        if not run.finished:
            return self._task(runs, run, "working", _going(run))
        if run.status == RunStatus.CANCELLED:
            return self._task(runs, run, "cancelled", run.error or "the run was cancelled")
        # Whatever way the run ended is the tool's answer (a failed run is no JSON-RPC error):
        # what submit_task would have returned had the client waited in the call.
        said = await outcome(runs, run)
        text = TextContent(type="text", text=json.dumps(said, indent=2))
        result = CallToolResult(content=[text], structured_content=said)
        return {
            **self._task(runs, run, "completed", f"the run {run.status.value}"),
            "result": result.model_dump(by_alias=True, mode="json", exclude_none=True),
        }

    async def _update(
        self, ctx: ServerRequestContext[Any, Any], params: TaskAnswers
    ) -> HandlerResult:
        runs, run, who = await self._run(ctx, params, "approve")
        await take_answers(runs, run, params.input_responses, f"mcp:{who.who}")
        return {}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskRef) -> HandlerResult:
        runs, run, who = await self._run(ctx, params, "submit")
        await runs.cancel(run.id, who)
        return {}

    async def _run(
        self, ctx: ServerRequestContext[Any, Any], params: TaskRef, role: Role
    ) -> tuple[RunService, StoredRun, Access]:
        """The task's run and the caller, if it has `role` and may see the run."""
        runs = await self._service()
        try:
            viewer = caller_of(ctx.request, role)
        except ToolError as exc:
            raise MCPError(code=INVALID_REQUEST, message=str(exc)) from None
        try:
            return runs, await runs.get(params.task_id, viewer), viewer
        except ServiceError:  # (another tenant's is unknown too: no existence leak)
            raise MCPError(code=INVALID_PARAMS, message=f"no task {params.task_id!r}") from None

    @staticmethod
    def _task(runs: RunService, run: StoredRun, status: str, message: str) -> dict[str, Any]:
        """The task's shape (`Task`): the run's id, the status, when, and how long it is kept."""
        days = runs.limits.retention_days
        return {
            "taskId": run.id,
            "status": status,
            "statusMessage": message,
            "createdAt": _iso(run.created_at),
            "lastUpdatedAt": _iso(run.finished_at or run.started_at or run.created_at),
            "ttlMs": None if days is None else int(days * 86_400_000),  # the retention's
            "pollIntervalMs": _POLL_MS,
        }


def _takes_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's client declared the extension (a task may answer it)."""
    capabilities = ctx.session.client_capabilities
    declared = capabilities.extensions if capabilities is not None else None
    return ctx.protocol_version in _MODERN and bool(declared) and TASKS in (declared or {})


def _going(run: StoredRun) -> str:
    if run.status == RunStatus.WAITING_FOR_APPROVAL:
        return "a call waits for a person's approval (the run's approvals on Baton's API or UI)"
    return f"the run is {run.status.value}"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
