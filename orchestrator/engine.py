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
from tracing import (
    OtlpExport,
    SpanCollector,
    SpanRecord,
    configure_tracing,
    inject_context,
    lost_agent_span,
    workflow_span,
)

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
        export: OtlpExport | None = None,
    ) -> None:
        """
        Args:
            system: the validated agent system.
            namespace: the Ray namespace of the system's actors.
            env: environment variables for the agent actors (the config's `env:`, read by the
                caller); their values are secrets, never recorded.
            entry_grace_s: how long past the deadline to wait for an entry agent that has not
                stopped by itself.
            export: where finished runs' spans go besides the result (an OTLP backend).
        """
        self.system = system
        self.namespace = namespace
        self._env = dict(env or {})
        self._pool: AgentPool | None = None
        self._inflight: dict[str, ray.ObjectRef[AgentResult]] = {}
        self._entry_grace_s = entry_grace_s
        self._export = export
        self._collector: SpanCollector = configure_tracing(
            "orchestrator", system.secrets(self._env)
        )

    @property
    def pool(self) -> AgentPool:
        if self._pool is None:
            raise RuntimeError("Engine.start() has not been called")
        return self._pool

    def start(self) -> AgentPool:
        """Start (or find) the system's actors on the connected Ray cluster."""
        if self._pool is None:
            config = self.system.config
            self._pool = start_pool(
                list(config.agents),
                {a.name: self.system.topology.delegates(a.name) for a in config.agents},
                namespace=self.namespace,
                prefix=f"{config.name}-{self.system.fingerprint}",
                env=self._env,
                trace=config.tracing,
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
        recorded = self.system.config.tracing.enabled
        try:
            with workflow_span(run_id, entry, self.system.config.name, record=recorded) as span:
                trace_id = span.get_span_context().trace_id
                tree = await self._dispatch_entry(task, entry, ctx)
            spans = await self._gather_spans(run_id, trace_id, tree) if recorded else []
        finally:
            pool.ledger_handle.close.remote(run_id)  # ordered after open: same caller
        if self._export is not None and spans:
            self._export.export(spans)
        redact = self._collector.redactor
        return RunResult(
            run_id=run_id,
            task=task,
            entry_agent=entry,
            routing=decision,
            status=tree.status,
            output=redact.text(tree.output) if tree.output is not None else None,
            error=redact.text(tree.error) if tree.error is not None else None,
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
            # Its own spans are stuck with it: record what the orchestrator saw.
            lost_agent_span(
                entry,
                "",
                run_id,
                delegation.context.chain,
                int((ctx.deadline - ctx.limits.deadline_s) * 1e9),
                "abandoned",
                f"{entry} did not stop within {self._entry_grace_s:g}s after the deadline",
            )
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
        spans = self._collector.drain(trace_id) + tree.spans
        tree.spans = []
        have = sum(s["name"].startswith("invoke_agent ") for s in spans)
        # Results made here (refused entry, cancellation) have no actor and no span of their own.
        expected = sum(1 for node in tree.walk() if node.actor is not None)
        if tree.status != Outcome.CANCELLED and have >= expected:
            return spans  # a single agent: complete without asking the ledger
        # Sent before the results were, but from other processes: wait (bounded) for them.
        collected: tuple[
            list[SpanRecord], int
        ] = await self.pool.ledger_handle.collect_spans.remote(run_id, have, expected, SPANS_WAIT_S)
        kept, missing = collected
        if missing:
            logger.warning("run %s: spans of %d invocations did not arrive", run_id, missing)
        return spans + kept

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

    async def events(
        self, run_id: str, after: int = 0, wait_s: float = 0.0
    ) -> list[dict[str, Any]]:
        """Progress events of a run in flight, from index `after` on; with `wait_s`, wait up to
        that long for the next one rather than return nothing."""
        events: list[dict[str, Any]] = await self.pool.ledger_handle.events.remote(
            run_id, after, wait_s
        )
        return events
