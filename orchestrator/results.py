"""What a run produces: its outcome, the delegation tree, usage and spans."""

from __future__ import annotations

from pydantic import BaseModel, Field

from agents.core.messages import AgentResult, RunStatus, Usage
from orchestrator.routing import RoutingDecision
from tracing import SpanRecord

__all__ = ["RunResult"]


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
    spans: list[SpanRecord] = Field(default_factory=list)
