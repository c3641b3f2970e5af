"""Ray shells around the runtime: one async actor per agent replica, and the run ledger actor.

Everything here is thin: the work happens in `agents.runtime`, which does not know about Ray.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import ActorUnavailableError, RayActorError

from agents.delegate import DelegateTool
from agents.ledger import RunLedger
from agents.messages import AgentResult, Delegation, Outcome
from agents.model import LiteLLMClient, configure_litellm
from agents.runtime import AgentRuntime
from agents.spec import AgentCard, AgentSpec, ModelSpec, TraceOptions
from agents.tools import Tool, load_function_tool
from tracing import (
    configure_tracing,
    lost_agent_span,
    secret_values_from_env,
    secret_values_in,
)

__all__ = ["AgentActor", "LedgerActor", "RayDispatcher", "RayLedger", "SystemRef"]


# Longest time an event waits in an actor before it is sent to the ledger.
EVENT_FLUSH_S = 0.05


@dataclass(frozen=True)
class SystemRef:
    """How to find the actors of one agent system on Ray."""

    namespace: str
    prefix: str
    replicas: dict[str, int]

    def actor_name(self, agent: str, replica: int) -> str:
        return f"{self.prefix}.{agent}.{replica}"

    @property
    def ledger_name(self) -> str:
        return f"{self.prefix}.ledger"


@ray.remote(num_cpus=0)
class LedgerActor:
    """Hosts the `RunLedger` of one system: budgets, progress events and late spans of its runs.

    An async actor, so that callers can wait here for news (events, spans) without polling.
    """

    def __init__(self) -> None:
        self._ledger = RunLedger()
        self._signals: dict[str, asyncio.Event] = {}

    def _changed(self, run_id: str) -> None:
        signal = self._signals.pop(run_id, None)
        if signal is not None:
            signal.set()

    async def _wait_for_change(self, run_id: str, until: float) -> bool:
        """Wait until the run changes or `until` (monotonic) passes; False on time-out."""
        signal = self._signals.setdefault(run_id, asyncio.Event())
        try:
            await asyncio.wait_for(signal.wait(), max(until - time.monotonic(), 0))
        except TimeoutError:
            return False
        return True

    def open(self, run_id: str, budget: int | None) -> None:
        self._ledger.open(run_id, budget)

    def close(self, run_id: str) -> None:
        self._ledger.close(run_id)
        self._changed(run_id)

    def tokens_left(self, run_id: str) -> int | None:
        return self._ledger.tokens_left(run_id)

    def charge(self, run_id: str, tokens: int) -> None:
        self._ledger.charge(run_id, tokens)

    def emit_many(
        self,
        events: list[tuple[str, dict[str, Any]]],
        spans: list[tuple[str, list[dict[str, Any]]]],
    ) -> None:
        changed = set()
        for run_id, event in events:
            self._ledger.emit(run_id, event)
            changed.add(run_id)
        for run_id, records in spans:
            self._ledger.keep_spans(run_id, records)
            changed.add(run_id)
        for run_id in changed:
            self._changed(run_id)

    async def events(
        self, run_id: str, after: int = 0, wait_s: float = 0.0
    ) -> list[dict[str, Any]]:
        """The run's events from index `after` on; with `wait_s`, wait that long for one."""
        until = time.monotonic() + wait_s
        while True:
            found = self._ledger.events(run_id, after)
            if found or not await self._wait_for_change(run_id, until):
                return found

    async def collect_spans(
        self, run_id: str, have: int, expected: int, wait_s: float
    ) -> tuple[list[dict[str, Any]], int]:
        """Take the spans agents sent for the run, once every invocation has sent its own.

        Args:
            have: `invoke_agent` spans the caller already holds (those of the entry agent).
            expected: invocations the caller knows of (its result tree); the ledger also
                counts every invocation that has started.
            wait_s: how long to wait for stragglers.

        Returns:
            The spans, and how many invocations' spans are still missing.
        """
        until = time.monotonic() + wait_s
        while True:
            started, sent = self._ledger.span_progress(run_id)
            missing = max(expected, started) - have - sent
            if missing <= 0 or not await self._wait_for_change(run_id, until):
                return self._ledger.take_spans(run_id), max(missing, 0)


class RayLedger:
    """The `Ledger` and `EventSink` protocols over a `LedgerActor` handle.

    Events and spans are batched: one actor call per flush instead of one per event, flushed
    when an invocation ends and otherwise at most `EVENT_FLUSH_S` after an event was emitted.
    """

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self._batch: list[tuple[str, dict[str, Any]]] = []
        self._spans: list[tuple[str, list[dict[str, Any]]]] = []
        self._timer: asyncio.TimerHandle | None = None

    async def tokens_left(self, run_id: str) -> int | None:
        left: int | None = await self._handle.tokens_left.remote(run_id)
        return left

    def charge(self, run_id: str, tokens: int) -> None:
        self._handle.charge.remote(run_id, tokens)  # fire and forget; ordered per caller

    def keep_spans(self, run_id: str, spans: list[dict[str, Any]]) -> None:
        if spans:
            self._spans.append((run_id, spans))

    def emit(self, run_id: str, event: dict[str, Any]) -> None:
        self._batch.append((run_id, event))
        if self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            self._timer = loop.call_later(EVENT_FLUSH_S, self.flush)

    def flush(self) -> None:
        self._send()

    def _send(self) -> Any:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not (self._batch or self._spans):
            return None
        events, self._batch = self._batch, []
        spans, self._spans = self._spans, []
        return self._handle.emit_many.remote(events, spans)


class RayDispatcher:
    """Dispatches delegations to agent actors, spreading them round-robin over replicas."""

    def __init__(self, system: SystemRef) -> None:
        self._system = system
        self._handles: dict[str, list[Any]] = {}
        self._turns = {name: itertools.cycle(range(n)) for name, n in system.replicas.items()}

    def _handle(self, target: str) -> tuple[str, Any]:
        replica = next(self._turns[target])
        name = self._system.actor_name(target, replica)
        handles = self._handles.setdefault(target, [None] * self._system.replicas[target])
        if handles[replica] is None:
            handles[replica] = ray.get_actor(name, namespace=self._system.namespace)
        return name, handles[replica]

    def submit(self, target: str, delegation: Delegation) -> tuple[str, ray.ObjectRef[AgentResult]]:
        """Start the delegation on a replica of `target`; the ref can be `ray.cancel`led."""
        name, handle = self._handle(target)
        return name, handle.invoke.remote(delegation)

    async def dispatch(
        self,
        target: str,
        delegation: Delegation,
        on_submit: Callable[[ray.ObjectRef[AgentResult]], None] | None = None,
    ) -> AgentResult:
        name = target
        submitted_ns = time.time_ns()
        try:
            name, ref = self.submit(target, delegation)
            if on_submit is not None:
                on_submit(ref)
            try:
                result: AgentResult = await ref
                return result
            except asyncio.CancelledError:
                # The caller stopped waiting (timeout, cancellation): stop the work too.
                ray.cancel(ref, recursive=True)
                raise
        except (RayActorError, ActorUnavailableError, ValueError) as exc:
            # A dead or missing actor is the caller's tool error, never a hung run.
            self._handles.pop(target, None)
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            # Its own spans died with it: record what the caller saw, where it saw it.
            ctx = delegation.context
            lost_agent_span(
                target,
                name,
                ctx.run_id,
                ctx.chain,
                submitted_ns,
                type(exc).__name__,
                f"actor unavailable: {type(exc).__name__}",
            )
            return AgentResult(
                agent=target,
                status=Outcome.FAILED,
                call_id=delegation.call_id,
                actor=name,
                error=f"agent actor {name} is unavailable ({type(exc).__name__}: {detail[:300]})",
            )


def _build_tools(
    spec: AgentSpec,
    roster: list[AgentCard],
    delegates: list[str],
    dispatcher: RayDispatcher,
    ledger: RayLedger,
) -> tuple[list[Tool], dict[str, Tool]]:
    offered: list[Tool] = [load_function_tool(path) for path in spec.tools]
    hidden: dict[str, Tool] = {}
    for card in roster:
        if card.name == spec.name:
            continue
        tool = DelegateTool(
            caller=spec.name,
            target=card,
            allowed=card.name in delegates,
            dispatcher=dispatcher,
            ledger=ledger,
        )
        if tool.allowed:
            offered.append(tool)
        else:
            hidden[tool.name] = tool
    return offered, hidden


@ray.remote
class AgentActor:
    """One replica of one agent: an async actor, so delegations (even re-entrant ones) overlap."""

    def __init__(
        self,
        spec: AgentSpec,
        roster: list[AgentCard],
        delegates: list[str],
        system: SystemRef,
        replica: int,
        trace: TraceOptions,
        env: dict[str, str] | None = None,
    ) -> None:
        self._name = system.actor_name(spec.name, replica)
        # The config's forwarded variables (provider keys), for litellm and tools to read.
        os.environ.update(env or {})
        # Those values and the model's own credentials never reach a span, a log line or a
        # result.
        secrets = secret_values_from_env(os.environ, env or ()) | secret_values_in(
            spec.model.params
        )
        collector = configure_tracing(self._name, secrets)
        dispatcher = RayDispatcher(system)
        ledger = RayLedger(ray.get_actor(system.ledger_name, namespace=system.namespace))
        tools, hidden = _build_tools(spec, roster, delegates, dispatcher, ledger)
        self._runtime = AgentRuntime(
            spec=spec,
            model=LiteLLMClient(spec.model),
            tools=tools,
            hidden_tools=hidden,
            ledger=ledger,
            events=ledger,
            span_source=collector,
            actor_id=self._name,
            trace_options=trace,
            redactor=collector.redactor,
        )

    async def ready(self) -> dict[str, Any]:
        """Warm litellm's lazy imports now rather than inside the first run."""
        configure_litellm()
        warm = LiteLLMClient(ModelSpec())
        # With a tool, so that litellm's tool-call code paths are imported too.
        tool = {
            "type": "function",
            "function": {"name": "warm_up", "description": "warm up", "parameters": {}},
        }
        reply = await warm.complete([{"role": "user", "content": "warm up"}], [tool])
        await warm.complete(
            [
                {"role": "user", "content": "warm up"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        }
                        for c in reply.tool_calls
                    ],
                },
                *[
                    {"role": "tool", "tool_call_id": c.id, "content": "ok"}
                    for c in reply.tool_calls
                ],
            ],
            [tool],
        )
        context = ray.get_runtime_context()
        return {"actor": self._name, "pid": os.getpid(), "node_id": context.get_node_id()}

    async def invoke(self, delegation: Delegation) -> AgentResult:
        return await self._runtime.invoke(delegation)
