"""What a run produces: its outcome, the delegation tree, usage and spans."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from agents.core.events import RunFinished
from agents.core.messages import AgentResult, RunContext, RunStatus, Usage
from orchestrator.system.routing import RoutingDecision
from tracing import SpanRecord, lost_agent_span

__all__ = ["RunResult", "abandoned_entry", "final_event"]


class RunResult(BaseModel):
    """How a run ended, with the whole delegation tree."""

    run_id: str
    task: str
    entry_agent: str
    routing: RoutingDecision | None = None
    status: RunStatus
    output: str | None = None
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)
    started_at: float
    duration_s: float
    tree: AgentResult | None = None
    state: dict[str, Any] | None = Field(
        default=None, description="The shared state it ended with (None: it has none)."
    )
    cancelled_by: str | None = None  # who cancelled it (a key's name), when it was cancelled
    spans: list[SpanRecord] = Field(
        default_factory=list,
        description="Every span of the run, from every process that worked on it (as the "
        "ledger gathered them).",
    )


def final_event(result: RunResult | None, entry: str, error: str | None = None) -> RunFinished:
    """The `run_finished` event: how the run ended, its answer or error, usage and duration.

    With no result (the run broke off), a failure with `error`.
    """
    if result is None:
        return RunFinished(agent=entry, status=RunStatus.FAILED, error=error or "run broke off")
    return RunFinished(
        agent=entry,
        status=result.status,
        output=result.output,
        error=result.error,
        usage=result.usage,
        duration_s=result.duration_s,
        cancelled_by=result.cancelled_by,
    )


def abandoned_entry(entry: str, ctx: RunContext, grace_s: float) -> AgentResult:
    """The result of an entry agent that did not return within `grace_s` past the deadline.

    Its own spans are stuck with it: the span recorded here is what the orchestrator saw.
    """
    why = f"{entry} did not stop within {grace_s:g}s after the deadline"
    lost_agent_span(
        entry,
        "",
        ctx.run_id,
        ctx.chain,
        int(ctx.started_at * 1e9),
        "abandoned",
        why,
        ctx.thread_id,
    )
    return AgentResult(
        agent=entry,
        status=RunStatus.LIMIT_EXCEEDED,
        error=f"{entry} did not return within {grace_s:g}s after the deadline",
        started_at=ctx.started_at,
    )
