"""A team of agents in this process, without Ray: for tests, benchmarks and notebooks.

Each delegation is handed over in a fresh context (`invoke_here`), so that, as between Ray
actors, only the W3C trace context inside the `Delegation` links the callee's spans to the
caller's. Agent hosts on Ray use the same function for agents that share a process.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping

from opentelemetry import context as otel_context

from agents.core.limits import Limits, TraceOptions
from agents.core.messages import AgentResult, Delegation, RunContext
from agents.core.spec import AgentSpec
from agents.models.client import LiteLLMClient
from agents.runtime.ledger import EventSink
from agents.runtime.loop import AgentRuntime
from agents.tools.delegate import build_tools
from tracing import inject_context

__all__ = ["LocalDispatcher", "LocalTeam", "invoke_here"]


async def invoke_here(
    invoke: Callable[[Delegation], Awaitable[AgentResult]], delegation: Delegation
) -> AgentResult:
    """Run `delegation` on an agent of this process, in a fresh context (as across actors).

    Only the W3C trace context inside the delegation links the callee's spans to the caller's,
    so a delegation in one process is traced exactly like one between processes.
    """
    token = otel_context.attach(otel_context.Context())
    try:
        return await invoke(delegation)
    finally:
        otel_context.detach(token)


class LocalDispatcher:
    """Dispatches delegations to runtimes in this process."""

    def __init__(self, runtimes: Mapping[str, AgentRuntime]) -> None:
        self._runtimes = runtimes

    async def dispatch(self, target: str, delegation: Delegation) -> AgentResult:
        """Run `delegation` on the target's runtime, in a fresh context (as across actors)."""
        return await invoke_here(self._runtimes[target].invoke, delegation)


class LocalTeam:
    """Runtimes for every agent of a system, delegating to each other in this process.

    Args:
        agents: the agents.
        delegates: for each agent, the agents it may delegate to.
        trace: what spans record.
        events: where the agents' progress events go.
    """

    def __init__(
        self,
        agents: list[AgentSpec],
        delegates: Mapping[str, list[str]],
        trace: TraceOptions | None = None,
        events: EventSink | None = None,
    ) -> None:
        self.runtimes: dict[str, AgentRuntime] = {}
        dispatcher = LocalDispatcher(self.runtimes)
        roster = [a.card() for a in agents]
        for spec in agents:
            tools, hidden = build_tools(
                spec, roster, list(delegates.get(spec.name, [])), dispatcher
            )
            self.runtimes[spec.name] = AgentRuntime(
                spec=spec,
                model=LiteLLMClient(spec.model),
                tools=tools,
                hidden_tools=hidden,
                events=events,
                trace_options=trace or TraceOptions(),
            )

    async def run(
        self, task: str, entry: str, *, run_id: str = "local", limits: Limits | None = None
    ) -> AgentResult:
        """Hand `task` to `entry`, under the current span (the caller opens the run's)."""
        limits = limits or Limits()
        ctx = RunContext(run_id=run_id, deadline=time.time() + limits.deadline_s, limits=limits)
        return await self.runtimes[entry].invoke(
            Delegation(task=task, context=ctx.enter(entry, inject_context()))
        )
