"""How an agent's runtime is put together, the same on a Ray host and in one process.

Its tools (function, file, question, and a delegation tool per other agent), its model clients
(gated where the config says), and the run-wide record it reports to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from agents.core.gate_spec import GateSpec
from agents.core.limits import TraceOptions
from agents.core.ports import EventSink, Gates, Memory, RunRecord, SpanSource
from agents.core.spec import AgentCard, AgentSpec, ModelSpec
from agents.models.base import ModelClient
from agents.models.gated import ModelMaker
from agents.runtime.agent import AgentRuntime
from agents.tools.delegate import Dispatcher, build_tools
from tracing import Redactor

__all__ = ["Assembly"]


@dataclass(frozen=True)
class Assembly:
    """What the agents of one process share, and how each one's runtime is made (`agent`).

    Attributes:
        roster: every agent of the system, as delegation tools describe them.
        delegates: whom each agent may delegate to.
        dispatcher: where delegations go (other processes, or this one).
        client: makes the plain client of one model (`LiteLLMClient`).
        record: the run-wide record (None: a bare runtime with no budget, waits or log).
        memory: long-term memory, for agents with `long_term_memory` (None: their tools say
            there is none).
        events: where events go when there is no record.
        gates: the provider gates (None: none), and their declarations.
        span_source: this process's span collector (finished spans go with the events).
        actor_id: which worker this is, for results and spans.
        trace: what spans record.
        redactor: what is never recorded.
    """

    roster: list[AgentCard]
    delegates: Mapping[str, list[str]]
    dispatcher: Dispatcher
    client: Callable[[ModelSpec], ModelClient]
    record: RunRecord | None = None
    memory: Memory | None = None
    events: EventSink | None = None
    gates: Gates | None = None
    gate_specs: tuple[GateSpec, ...] = ()
    span_source: SpanSource | None = None
    actor_id: str = "local"
    trace: TraceOptions = field(default_factory=TraceOptions)
    redactor: Redactor = field(default_factory=Redactor)

    def agent(self, spec: AgentSpec) -> AgentRuntime:
        """The runtime of one agent of the system."""
        delegates = list(self.delegates.get(spec.name, ()))
        tools, hidden = build_tools(
            spec, self.roster, delegates, self.dispatcher, self.record, self.memory
        )
        models = ModelMaker(self.client, self.gates, self.gate_specs, spec.timeouts.model)
        return AgentRuntime(
            spec=spec,
            model=models(spec.model),
            models=models,
            tools=tools,
            hidden_tools=hidden,
            record=self.record,
            events=self.events,
            span_source=self.span_source,
            actor_id=self.actor_id,
            trace_options=self.trace,
            redactor=self.redactor,
        )
