"""A team of agents in this process, without Ray: for tests, benchmarks and notebooks.

Each delegation is handed over by `agents.runtime.handoff.invoke_here`, as between agents that
share a host on Ray: traced exactly as if it crossed processes. The run-wide record is a
`RunLedger` in this process (`LocalRecord`): budgets, caps and waits for a person work as on
Ray; there is no step log (nothing to resume from).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

from agents.core.events import Event, WaitOpened
from agents.core.gate_spec import GateSpec
from agents.core.limits import Limits, TraceOptions
from agents.core.messages import AgentResult, Delegation, RunContext
from agents.core.ports import EventSink
from agents.core.spec import AgentSpec
from agents.core.state import StateSpec
from agents.core.steps import Step
from agents.core.waits import Outcome, Resolution
from agents.gates.book import GateKeeper
from agents.ledger.book import RunLedger
from agents.ledger.steps import StepBook
from agents.models.client import LiteLLMClient
from agents.runtime.agent import AgentRuntime
from agents.runtime.assembly import Assembly
from agents.runtime.handoff import invoke_here
from tracing import SpanRecord, inject_context

__all__ = ["LocalDispatcher", "LocalRecord", "LocalTeam"]


class _LedgerSink:
    """Events and spans straight into the ledger (no batches: it is in this process)."""

    def __init__(self, ledger: RunLedger, changed: Callable[[], None]) -> None:
        self._ledger = ledger
        self._changed = changed

    def emit(self, run_id: str, event: Event) -> None:
        self._ledger.emit(run_id, event)
        self._changed()

    def keep_spans(self, run_id: str, spans: list[SpanRecord]) -> None:
        self._ledger.keep_spans(run_id, spans)

    def flush(self, run_id: str) -> None:
        pass


class LocalRecord:
    """The run-wide record of runs in this process: a `RunLedger`, as the agents' `RunRecord`.

    `ledger` is the book itself (read its events, resolve its waits: `resolve`); events also
    go to `also`, if given (a test's recorder, a notebook's printer).
    """

    def __init__(self, also: EventSink | None = None) -> None:
        self.ledger = RunLedger()
        self.steps = StepBook()  # effects only: no step log in this process
        self._changed = asyncio.Event()
        inner = _LedgerSink(self.ledger, self._signal)
        self.sink: EventSink = inner if also is None else _Both(inner, also)

    def _signal(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def changed(self) -> None:
        """Return once anything changes (an event, a wait opened or resolved)."""
        await self._changed.wait()

    async def tokens_left(self, run_id: str) -> int | None:
        """Tokens the run may still spend (None: no budget)."""
        return self.ledger.tokens_left(run_id)

    def charge(self, run_id: str, tokens: int, key: str) -> None:
        """Count tokens the run spent, once per `key`."""
        self.ledger.charge(run_id, tokens, key)

    async def spend_check(self, run_id: str) -> tuple[str | None, list[tuple[str, str]]]:
        """Whether the run may make another model call under its caps."""
        return self.ledger.spend_check(run_id)

    async def record_effect(self, run_id: str, attempts: tuple[str, ...], tool: str) -> None:
        """Note that an at-most-once tool is about to run."""
        self.steps.record_effect(run_id, attempts, tool)

    async def open_wait(self, run_id: str, event: WaitOpened, again: bool = False) -> str:
        """Register a wait for a person and announce it; its id."""
        wait_id = self.ledger.open_wait(run_id, event, again)
        self._signal()
        return wait_id

    async def await_resolution(
        self, run_id: str, wait_id: str, wait_s: float
    ) -> dict[str, Any] | None:
        """How a wait was resolved, waiting up to `wait_s`."""
        deadline = time.monotonic() + wait_s
        while (resolution := self.ledger.desk(run_id).resolution(wait_id)) is None:
            changed = self._changed
            try:
                async with asyncio.timeout(max(deadline - time.monotonic(), 0)):
                    await changed.wait()
            except TimeoutError:
                return self.ledger.desk(run_id).resolution(wait_id)
        return resolution

    async def resolve(
        self, run_id: str, wait_id: str, resolution: Resolution
    ) -> tuple[Outcome, dict[str, Any] | None]:
        """Resolve a wait; the first word counts."""
        outcome = self.ledger.resolve(run_id, wait_id, resolution)
        self._signal()
        return outcome

    def record(self, run_id: str, step: Step) -> None:
        """Nothing: no step log in this process (`RunContext.step_log` is never set here)."""

    async def commit(self, run_id: str, step: Step) -> bool:
        """Nothing to store: the run goes on."""
        return True

    async def recorded(self, run_id: str, invocation: str) -> dict[str, Step]:
        """No recorded steps."""
        return {}


class _Both:
    """Two event sinks as one."""

    def __init__(self, first: EventSink, second: EventSink) -> None:
        self._sinks = (first, second)

    def emit(self, run_id: str, event: Event) -> None:
        for sink in self._sinks:
            sink.emit(run_id, event)

    def keep_spans(self, run_id: str, spans: list[SpanRecord]) -> None:
        for sink in self._sinks:
            sink.keep_spans(run_id, spans)

    def flush(self, run_id: str) -> None:
        for sink in self._sinks:
            sink.flush(run_id)


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
        events: where the agents' progress events go, besides the team's record (`record`).
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
        self.record = LocalRecord(also=events)
        assembly = Assembly(
            [a.card() for a in agents],
            delegates,
            LocalDispatcher(self.runtimes),
            LiteLLMClient,
            record=self.record,
            gates=self.gates,
            gate_specs=gates,
            trace=trace or TraceOptions(),
        )
        for spec in agents:
            self.runtimes[spec.name] = assembly.agent(spec)

    async def run(
        self,
        task: str,
        entry: str,
        *,
        run_id: str = "local",
        limits: Limits | None = None,
        given: Any = None,
        state_spec: StateSpec | None = None,
        state: dict[str, Any] | None = None,
    ) -> AgentResult:
        """Hand `task` (and structured input, `given`) to `entry`, under the current span.

        `state_spec`: the team's shared state rules; `state`: what the run begins with. (The
        caller opens the run's span.)
        """
        limits = limits or Limits()
        ctx = RunContext(
            run_id=run_id,
            deadline=time.time() + limits.deadline_s,
            limits=limits,
            state_spec=state_spec,
        )
        self.record.ledger.open(run_id, limits.token_budget)
        try:
            return await self.runtimes[entry].invoke(
                Delegation(
                    task=task,
                    input=given,
                    context=ctx.enter(entry, inject_context()),
                    state=state or {},
                )
            )
        finally:
            self.record.ledger.close(run_id)
