"""What Baton's MCP doors do with runs: start one, read one, take the client's answers.

Shared by the tools (`orchestrator.mcp.server`) and the tasks extension (`orchestrator.mcp.tasks`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputResponses
from pydantic import ValidationError

from agents.core.a2a_meta import TRACE_KEYS
from agents.core.events import InputRequested
from agents.core.waits import Resolution
from orchestrator.access import LOCAL, Access, Role
from orchestrator.engine.submission import Origin
from orchestrator.errors import ServiceError
from orchestrator.schemas import RunRequest, run_view
from orchestrator.service import RunService
from orchestrator.store import StoredRun
from orchestrator.system.routing import AUTO

__all__ = [
    "ANSWER_SCHEMA",
    "caller_of",
    "elicitation",
    "outcome",
    "question",
    "read_run",
    "submit",
    "summary",
    "take_answers",
]

# What a client's user fills in to answer an agent's question (elicitation's form).
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "title": "Your answer"}},
    "required": ["answer"],
}


def summary(view: dict[str, Any]) -> dict[str, Any]:
    """A run's view as the tools answer it: status, answer or error, usage, links."""
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


async def outcome(runs: RunService, run: StoredRun) -> dict[str, Any]:
    """The run as it stands now (`summary`), with the questions its agents wait on."""
    now = await runs.get(run.id)
    said = summary(run_view(now).model_dump(mode="json"))
    waiting = await runs.desk.waiting(now, InputRequested)
    if waiting:
        said["status"] = "input_required"  # the ledger says it before the store does
        said["questions"] = [
            {"question_id": q.call_id, "agent": q.agent, "question": q.question,
             "choices": q.choices}
            for q in waiting
        ]  # fmt: skip
    return said


def question(asked: InputRequested) -> str:
    """An agent's question as its client's user reads it."""
    choices = f" ({' / '.join(asked.choices)})" if asked.choices else ""
    return f"{asked.agent} asks: {asked.question}{choices}"


def elicitation(asked: InputRequested) -> ElicitRequest:
    """An agent's question as an input request for the client's user (a round trip's, a task's)."""
    return ElicitRequest(
        params=ElicitRequestFormParams(message=question(asked), requested_schema=ANSWER_SCHEMA)
    )


async def take_answers(
    runs: RunService, run: StoredRun, answers: InputResponses, who: str
) -> tuple[str, ...]:
    """Give the run the client's answers (a declined or cancelled question: no answer).

    Returns the questions answered.
    """
    for question_id, result in answers.items():
        if not isinstance(result, ElicitResult):
            continue
        said = (result.content or {}).get("answer") if result.action == "accept" else None
        with contextlib.suppress(ServiceError):  # answered already (or the run is over)
            reply = (
                Resolution.expired("question")
                if said is None
                else Resolution.reply(str(said), who=who)
            )
            await runs.desk.resolve(run, reply, question_id)
    return tuple(answers)


async def submit(
    runs: RunService,
    task: str,
    agent: str | None,
    meta: Mapping[str, Any],
    who: Access,
    thread: str | None = None,
    given: Any = None,
) -> StoredRun:
    """Start a run (a turn of `thread`, if given; `new`: of a new thread); `given`: its input.

    A W3C trace context in the call's `_meta` (SEP-414) is the run's parent: the MCP host's
    trace goes on into the run's.
    """
    agents = {a.name for a in runs.system.config.agents}
    if agent is not None and agent != AUTO and agent not in agents:
        raise ToolError(f"unknown agent {agent!r}; agents: {', '.join(sorted(agents))}")
    carrier = {k: str(meta[k]) for k in TRACE_KEYS if isinstance(meta.get(k), str)}
    try:
        request = RunRequest(task=task, agent=agent, input=given).submission()
        if carrier:
            request = dataclasses.replace(request, origin=Origin(trace_context=carrier))
        if thread is None:
            run, _ = await runs.submit(request, caller=who)
        else:
            run, _ = await runs.threads.continue_or_start(thread, request, who)
    except ValidationError as exc:
        raise ToolError(f"invalid task: {exc.errors()[0]['msg']}") from None
    except ServiceError as exc:
        raise ToolError(exc.message) from None
    return run


async def read_run(runs: RunService, run_id: str, viewer: Access) -> StoredRun:
    """The run, if the viewer may see it (else the tool's error says why)."""
    try:
        return await runs.get(run_id, viewer)
    except ServiceError as exc:
        raise ToolError(exc.message) from None


def caller_of(request: Any, role: Role) -> Access:
    """Who calls, if they have `role`.

    `request`: the HTTP request (None over stdio). Over HTTP, the key `KeyCheck` named; over
    stdio, the person who started `baton mcp`.
    """
    if request is None:
        return LOCAL
    access = request.scope.get("auth")
    if not isinstance(access, Access):
        raise ToolError("no caller: this endpoint is served behind baton's key check")
    if refusal := access.lacks(role):
        raise ToolError(refusal)
    return access
