"""The run lifecycle: pick the entry agent, open the run's budget and root span, hand the task
to the entry agent's actor, and collect the result tree.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any

import ray
from pydantic import BaseModel, Field
from ray.exceptions import TaskCancelledError

from agents.errors import DelegationRefused
from agents.guard import check_delegation
from agents.messages import AgentResult, Delegation, Outcome, RunContext, Usage
from agents.pool import AgentPool, start_pool
from orchestrator.config import AgentSystem
from orchestrator.routing import RoutingDecision, route
from tracing import SpanCollector, SpanRecord, configure_tracing, inject_context, workflow_span

__all__ = ["AUTO", "Engine", "RunResult", "connect_ray"]

logger = logging.getLogger(__name__)

AUTO = "auto"
# How long past the run deadline the orchestrator waits for an entry agent that has not stopped.
ENTRY_GRACE_S = 5.0
# How long a finished run waits for spans still on their way from agent actors.
SPANS_WAIT_S = 3.0


class RunResult(BaseModel):
    """How a run ended, with the whole delegation tree."""

    run_id: str
    task: str
    entry_agent: str
    routing: RoutingDecision | None = None
    status: Outcome
    output: str | None = None
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)
    started_at: float
    duration_s: float
    tree: AgentResult | None = None
    spans: list[SpanRecord] = Field(default_factory=list)


def connect_ray(address: str | None, namespace: str) -> None:
    """Join the cluster at `address`, or start a local Ray instance when it is None."""
    if ray.is_initialized():
        return
    ray.init(
        address=address,
        namespace=namespace,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
        configure_logging=True,
    )


class Engine:
    """Runs tasks through one agent system on Ray."""

    def __init__(
        self,
        system: AgentSystem,
        *,
        namespace: str = "baton",
        env: Mapping[str, str] | None = None,
        entry_grace_s: float = ENTRY_GRACE_S,
    ) -> None:
        self.system = system
        self.namespace = namespace
        self._env = dict(env or {})
        self._pool: AgentPool | None = None
        self._inflight: dict[str, ray.ObjectRef[AgentResult]] = {}
        self._entry_grace_s = entry_grace_s
        self._collector: SpanCollector | None = None

    @property
    def pool(self) -> AgentPool:
        if self._pool is None:
            raise RuntimeError("Engine.start() has not been called")
        return self._pool

    def start(self) -> AgentPool:
        """Start (or find) the system's actors on the connected Ray cluster."""
        if self._pool is None:
            self._collector = configure_tracing("orchestrator")
            config = self.system.config
            self._pool = start_pool(
                list(config.agents),
                {a.name: self.system.topology.delegates(a.name) for a in config.agents},
                namespace=self.namespace,
                prefix=f"{config.name}-{self.system.fingerprint}",
                env=self._env,
            )
            self._dispatcher = self._pool.dispatcher()
        return self._pool

    def stop(self) -> None:
        """Kill this system's actors (a CLI run's actors die with the driver anyway)."""
        if self._pool is None:
            return
        for handles in self._pool.actors.values():
            for handle in handles:
                ray.kill(handle)
        ray.kill(self._pool.ledger_handle)
        self._pool = None

    def choose_entry(self, task: str, agent: str | None) -> tuple[str, RoutingDecision | None]:
        if agent == AUTO:
            decision = route(task, [a.card() for a in self.system.config.agents], self.system.entry)
            return decision.agent, decision
        return agent or self.system.entry, None

    async def run(
        self,
        task: str,
        *,
        agent: str | None = None,
        run_id: str | None = None,
        token_budget: int | None = None,
        deadline_s: float | None = None,
    ) -> RunResult:
        """Run `task` to its end; refusals and failures are results, not exceptions."""
        pool = self.start()
        run_id = run_id or uuid.uuid4().hex
        limits = self.system.config.limits
        overrides: dict[str, Any] = {}
        if token_budget is not None:
            overrides["token_budget"] = token_budget
        if deadline_s is not None:
            overrides["deadline_s"] = deadline_s
        limits = limits.model_copy(update=overrides)
        entry, decision = self.choose_entry(task, agent)
        started, clock = time.time(), time.perf_counter()
        ctx = RunContext(run_id=run_id, deadline=started + limits.deadline_s, limits=limits)
        opened = pool.ledger_handle.open.remote(run_id, limits.token_budget)
        if limits.token_budget is not None:
            # Agents on other processes ask the ledger; it must know the budget first.
            await opened
        try:
            with workflow_span(run_id, entry) as span:
                trace_id = span.get_span_context().trace_id
                tree = await self._dispatch_entry(task, entry, ctx)
            spans = await self._gather_spans(run_id, trace_id, tree)
        finally:
            pool.ledger_handle.close.remote(run_id)  # ordered after open: same caller
        return RunResult(
            run_id=run_id,
            task=task,
            entry_agent=entry,
            routing=decision,
            status=tree.status,
            output=tree.output,
            error=tree.error,
            usage=tree.total_usage(),
            started_at=started,
            duration_s=time.perf_counter() - clock,
            tree=tree,
            spans=spans,
        )

    async def _dispatch_entry(self, task: str, entry: str, ctx: RunContext) -> AgentResult:
        known = entry in self.system.topology.graph
        try:
            check_delegation(
                caller=None,
                target=entry,
                known=known,
                allowed=True,
                ctx=ctx,
                tokens_left=ctx.limits.token_budget,
            )
        except DelegationRefused as refused:
            return AgentResult(agent=entry, status=Outcome.FAILED, error=refused.message)
        delegation = Delegation(task=task, context=ctx.enter(entry, inject_context()))
        run_id = ctx.run_id
        try:
            # Agents stop themselves at the deadline; this bound is for an agent that cannot.
            return await asyncio.wait_for(
                self._dispatcher.dispatch(
                    entry,
                    delegation,
                    on_submit=lambda ref: self._inflight.__setitem__(run_id, ref),
                ),
                ctx.time_left() + self._entry_grace_s,
            )
        except TimeoutError:
            return AgentResult(
                agent=entry,
                status=Outcome.LIMIT_EXCEEDED,
                error=f"{entry} did not return within {self._entry_grace_s:g}s after the deadline",
                started_at=ctx.deadline - ctx.limits.deadline_s,
            )
        except TaskCancelledError:
            return AgentResult(
                agent=entry,
                status=Outcome.CANCELLED,
                error="run cancelled",
                started_at=ctx.deadline - ctx.limits.deadline_s,
            )
        finally:
            self._inflight.pop(run_id, None)

    async def _gather_spans(
        self, run_id: str, trace_id: int, tree: AgentResult
    ) -> list[SpanRecord]:
        """Every span of the run: the orchestrator's own, the entry agent's (in its result), and
        those the sub-agents sent to the ledger before they returned (or were cancelled)."""
        spans = self._collector.drain(trace_id) if self._collector else []
        spans += tree.spans
        tree.spans = []

        def finished(records: list[SpanRecord]) -> int:
            return sum(s["name"].startswith("invoke_agent ") for s in records)

        # Results made here (refused or abandoned entry, cancellation) have no actor and no span.
        invocations = sum(1 for node in tree.walk() if node.actor is not None)
        if tree.status != Outcome.CANCELLED and finished(spans) >= invocations:
            return spans  # a single agent: complete without asking the ledger
        deadline = time.monotonic() + SPANS_WAIT_S
        while True:
            state: tuple[list[SpanRecord], int] = await self.pool.ledger_handle.trace_state.remote(
                run_id
            )
            kept, started = state
            # Sent before the results were, but from other processes: wait (bounded) for them.
            if finished(spans) + finished(kept) >= max(invocations, started):
                return spans + kept
            if time.monotonic() > deadline:
                logger.warning(
                    "run %s: spans of %d invocations did not arrive",
                    run_id,
                    max(invocations, started) - finished(spans) - finished(kept),
                )
                return spans + kept
            await asyncio.sleep(0.005)

    def cancel(self, run_id: str) -> bool:
        """Cancel a run in flight: every agent working on it, across actors, is stopped.

        Returns False when the run is not (or no longer) running here.
        """
        ref = self._inflight.get(run_id)
        if ref is None:
            return False
        # recursive: the delegations the entry agent started are cancelled too.
        ray.cancel(ref, recursive=True)
        return True

    async def events(self, run_id: str, after: int = 0) -> list[dict[str, Any]]:
        """Progress events of a run in flight, from index `after` on."""
        events: list[dict[str, Any]] = await self.pool.ledger_handle.events.remote(run_id, after)
        return events
