"""A team of agents in this process, without Ray: for tests, benchmarks and notebooks.

Each delegation is handed over by `agents.runtime.handoff.invoke_here`, as between agents that
share a host on Ray: traced exactly as if it crossed processes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from agents.core.gate_spec import GateSpec
from agents.core.limits import Limits, TraceOptions
from agents.core.messages import AgentResult, Delegation, RunContext
from agents.core.ports import EventSink
from agents.core.spec import AgentSpec
from agents.models.client import LiteLLMClient
from agents.models.gated import ModelMaker
from agents.runtime.agent import AgentRuntime
from agents.runtime.gates import GateKeeper
from agents.runtime.handoff import invoke_here
from agents.tools.delegate import build_tools
from tracing import inject_context

__all__ = ["LocalDispatcher", "LocalTeam"]


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
        gates: provider gates, held in this process.
    """

    def __init__(
        self,
        agents: list[AgentSpec],
        delegates: Mapping[str, list[str]],
        trace: TraceOptions | None = None,
        events: EventSink | None = None,
        gates: tuple[GateSpec, ...] = (),
    ) -> None:
        self.runtimes: dict[str, AgentRuntime] = {}
        self.gates = GateKeeper(gates)
        dispatcher = LocalDispatcher(self.runtimes)
        roster = [a.card() for a in agents]
        for spec in agents:
            tools, hidden = build_tools(
                spec, roster, list(delegates.get(spec.name, [])), dispatcher
            )
            models = ModelMaker(LiteLLMClient, self.gates, gates, spec.timeouts.model)
            self.runtimes[spec.name] = AgentRuntime(
                spec=spec,
                model=models(spec.model),
                models=models,
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
