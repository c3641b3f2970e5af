"""The run lifecycle: entry agent, budget and root span, the entry's actor, result and spans."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import replace
from typing import Any

import ray
from ray.exceptions import TaskCancelledError

from agents.core.errors import DelegationRefused
from agents.core.events import Event, RunStarted
from agents.core.guard import check_delegation
from agents.core.limits import SpendCap
from agents.core.messages import AgentResult, Delegation, RunContext, RunStatus
from agents.core.spec import AgentCard
from agents.core.steps import entry_invocation
from agents.ray.dispatch import RayDispatcher
from agents.ray.ledger_client import LedgerClient
from agents.ray.pool import AgentPool, PoolOptions, start_pool
from agents.ray.wire import Closed, RunSettle
from agents.runtime.guardrails import Guardrails
from agents.tools.delegate import input_problems
from orchestrator.engine.results import RunResult, abandoned_entry, final_event
from orchestrator.engine.submission import LAST, Execution, Lineage, Origin, Submission
from orchestrator.system.config import AgentSystem
from orchestrator.system.routing import AUTO, RoutingDecision, route
from tracing import (
    OtlpExport,
    Redactor,
    SpanCollector,
    SpanRecord,
    configure_tracing,
    end_workflow,
    extract_context,
    inject_context,
    span_ids,
    workflow_span,
)
from tracing import attributes as attr

__all__ = ["Engine"]

# How a run ends whose entry agent the guard refused, by the refusal's reason.
_REFUSED_AS = {
    "deadline": RunStatus.LIMIT_EXCEEDED,
    "depth": RunStatus.LIMIT_EXCEEDED,
    "budget": RunStatus.BUDGET_EXCEEDED,
}

logger = logging.getLogger(__name__)

# How long past the run deadline the orchestrator waits for an entry agent that has not stopped.
ENTRY_GRACE_S = 5.0


class Engine:
    """Runs tasks through one agent system on Ray."""

    def __init__(
        self,
        system: AgentSystem,
        options: PoolOptions | None = None,
        *,
        entry_grace_s: float = ENTRY_GRACE_S,
        export: OtlpExport | None = None,
    ) -> None:
        """Set up the engine; `start` starts (or finds) the agents.

        Args:
            system: the validated agent system.
            options: where and how its actors run (`PoolOptions`). With a run store
                (`store_url`), every run's steps and events are written there as they happen,
                so that a run can resume (`run(..., lineage=...)`); its runs must be recorded
                there first.
            entry_grace_s: how long past the deadline to wait for an entry agent that has not
                stopped by itself.
            export: where finished runs' spans go besides the result (an OTLP backend).
        """
        self.system = system
        self.options = options or PoolOptions()
        self._pool: AgentPool | None = None
        self._ledger: LedgerClient | None = None
        self._dispatcher: RayDispatcher | None = None
        self._cards: dict[str, AgentCard] = {}  # (their input schemas, imported once)
        self._inflight: dict[str, ray.ObjectRef[bytes]] = {}
        self._active: set[str] = set()  # runs between the start and the end of `run`
        self._cancelled: dict[str, str | None] = {}  # active runs asked to stop, and by whom
        # First events of runs left open (`finish=False`) that `finish` must be sure of.
        self._openings: dict[str, RunStarted] = {}
        # How to settle runs left open (`finish=False`): what each process counted, and more.
        self._settling: dict[str, RunSettle] = {}
        self._closed = False  # leaving Ray: no more calls to it from timers
        self._guardrails: dict[str, Guardrails] = {}  # entry agents' (`screen`)
        self._entry_grace_s = entry_grace_s
        self._export = export
        self._collector: SpanCollector = configure_tracing(
            "orchestrator", system.secrets(self.options.env)
        )

    @property
    def redactor(self) -> Redactor:
        """What this process never records: the system's secrets, forwarded values, API keys."""
        return self._collector.redactor

    @property
    def pool(self) -> AgentPool:
        """The system's agents on Ray (once `start` was called)."""
        if self._pool is None:
            raise RuntimeError("Engine.start() has not been called")
        return self._pool

    def start(self, ledger: LedgerClient | None = None) -> AgentPool:
        """Start (or find) the system's actors on the connected Ray cluster.

        `ledger`: another engine's, whose runs' events, approvals and step log this engine's
        runs share (a new version of the team beside the one serving); None: the system's own.
        """
        if self._pool is None:
            config = self.system.config
            self._pool = start_pool(
                list(config.agents),
                {a.name: self.system.topology.delegates(a.name) for a in config.agents},
                self.options,
                prefix=self.system.actor_prefix(self.options.store_url),
                trace=config.tracing,
                shared_replicas=config.shared_host.replicas,
                shared_autoscale=config.shared_host.autoscale,
                supervision=config.supervision,
                gates=config.gates,
                ledger=ledger.handles if ledger is not None else None,
            )
            self._ledger = ledger if ledger is not None else self._pool.ledger
            self._dispatcher = self._pool.dispatcher(self._ledger)
        return self._pool

    @property
    def ledger(self) -> LedgerClient:
        """The system's run ledger: events, approvals, late spans (once `start` was called)."""
        if self._ledger is None:
            raise RuntimeError("Engine.start() has not been called")
        return self._ledger

    @property
    def ledger_shards(self) -> int:
        """How many shards the ledger has (1 until `start` found or made it)."""
        return self._ledger.shards if self._ledger is not None else 1

    @property
    def trace_export(self) -> str | None:
        """Where runs' spans are exported over OTLP (None: they are not)."""
        if self._export is None:
            return None
        return self._export.destination or "an OTLP endpoint"

    @property
    def logs_steps(self) -> bool:
        """Whether runs keep a step log (and can resume)."""
        return self.options.store_url is not None

    @property
    def started(self) -> bool:
        """Whether the agents have been started (or found)."""
        return self._pool is not None

    async def placement(self, timeout_s: float = 2.0) -> list[dict[str, Any]]:
        """Each agent's replicas, asked now (see `AgentPool.ask`)."""
        return await self.pool.ask(timeout_s)

    def close(self) -> None:
        """Make no more Ray calls of our own: send the ledger's batch, ask no more cancellations.

        Called before this process leaves Ray (`ray.shutdown`): a timer that calls Ray after
        that ends the process (Ray's core worker exits it with status 1).
        """
        self._closed = True
        if self._dispatcher is not None:
            self._dispatcher.stop_following()
        if self._ledger is not None:
            self._ledger.close()

    def stop(self) -> None:
        """Kill this system's actors (a CLI run's actors die with the driver anyway)."""
        self.close()
        if self._pool is None:
            return
        ledger = self._pool.ledger_handles
        self.retire()
        for shard in ledger:
            ray.kill(shard)
        self._ledger = None

    def retire(self) -> None:
        """Kill this system's agents, but not its ledger: a newer version's runs use it.

        The version's runs have ended; its scaler, supervisor and hosts go (they may be
        detached: nothing else would stop them).
        """
        self._closed = True
        if self._dispatcher is not None:
            self._dispatcher.stop_following()
        if self._pool is None:
            return
        pool = self._pool
        if pool.scaler is not None:  # first, or it would start replicas again
            ray.kill(pool.scaler)
        if pool.supervisor is not None:  # first, or it would start the hosts again
            ray.kill(pool.supervisor)
        everyone = [
            pool.current(host, i) for host, hs in pool.hosts.items() for i in range(len(hs))
        ]
        everyone += pool.scaled_replicas()
        # Let them close their MCP sessions (stdio servers exit) before they are killed.
        with contextlib.suppress(Exception):
            ray.get([h.close.remote() for h in everyone], timeout=5)
        for handle in everyone:
            ray.kill(handle)
        self._pool = None

    async def screen(self, request: Submission) -> Submission:
        """The request as its entry agent's input guardrails let it be recorded.

        Those that decide without a model (regular expressions, functions) check the task
        before anything keeps it: one that trips leaves only what it lets through, and the run
        ends as the guardrail ends it (`Submission.input_tripped`). A judge's check is a model
        call: it is made by the agent, as it starts.
        """
        entry, _ = self.choose_entry(request.task, request.agent)
        spec = self.system.agent(entry) if entry in self.system.topology.graph else None
        if spec is None or not spec.guardrails.input:
            return request
        guardrails = self._guardrails.get(entry)
        if guardrails is None:
            guardrails = self._guardrails[entry] = Guardrails(spec.guardrails)
        tripped = await guardrails.screen("input", request.task)
        if tripped is None:
            return request
        verdict = {"guardrail": tripped.guardrail, "reason": tripped.reason}
        return replace(request, task=tripped.kept, input_tripped=verdict)

    def input_problems(self, agent: str | None, given: Any) -> list[str]:
        """What in `given` the entry agent `agent` asks for does not take (each at its place).

        None for `auto` (routed at run time: the agent checks its input on arrival).
        """
        if agent == AUTO:
            return []
        name = agent or self.system.entry
        if name not in self._cards:
            spec = next((a for a in self.system.config.agents if a.name == name), None)
            if spec is None:
                return []  # (an unknown agent is refused by the door's own check)
            self._cards[name] = spec.card()
        return input_problems(self._cards[name], given)

    def choose_entry(self, task: str, agent: str | None) -> tuple[str, RoutingDecision | None]:
        """The entry agent for `task`: the one asked for, routed (`auto`), or the config's."""
        if agent == AUTO:
            decision = route(task, [a.card() for a in self.system.config.agents], self.system.entry)
            return decision.agent, decision
        return agent or self.system.entry, None

    async def left_down(self, agent: str | None) -> tuple[str, str] | None:
        """The entry agent a run asking for `agent` would have, if it cannot be called, and why.

        It cannot once every replica of its host was left down in a crash loop (until a new
        version of the team, or a restart, creates them again). Asked of the supervisor only
        after a run found that host so: nothing is asked on the way of other runs.
        """
        if agent == AUTO or self._dispatcher is None:
            return None
        entry = agent or self.system.entry
        if entry not in self._dispatcher.left_down:
            return None
        cause = await self.pool.left_down(entry)
        if cause is None:  # (one answers again)
            self._dispatcher.left_down.pop(entry, None)
            return None
        return entry, cause

    async def run(
        self, request: Submission, execution: Execution | None = None, *, finish: bool = True
    ) -> RunResult:
        """Run a request to its end; refusals and failures are results, not exceptions.

        Args:
            request: what to run, and how.
            execution: this life of the run: its id, lineage, thread turns and spending caps
                (None: a new run with a new id).
            finish: close the run's event log when it ends. False leaves it open for the
                caller to record the result first and then call `finish` (so that
                whoever sees the `run_finished` event finds the run recorded).
        """
        self.start()
        execution = execution or Execution(uuid.uuid4().hex)
        run_id, lineage = execution.run_id, execution.lineage
        asked = request.agent
        if asked == LAST:  # the agent that answered the thread's last turn goes on
            asked = execution.turns.answered_last if execution.turns else None
        entry, decision = self.choose_entry(request.task, asked)
        ctx, caps = self._context(request, execution)
        recorded = self.system.config.tracing.enabled
        result: RunResult | None = None
        settle: RunSettle | None = None
        riding: RunStarted | None = None  # the first event, if the entry agent sends it
        self._active.add(run_id)
        try:
            origin = request.origin or Origin()
            with workflow_span(
                run_id,
                entry,
                self.system.config.name,
                record=recorded,
                epoch=lineage.epoch,
                parent=extract_context(origin.trace_context),
                thread_id=ctx.thread_id,
            ) as span:
                span.set_attribute(attr.BATON_TENANT, request.tenant)
                span.set_attribute(attr.BATON_SYSTEM_VERSION, self.system.version)
                if request.submitted_by:
                    span.set_attribute(attr.BATON_SUBMITTED_BY, request.submitted_by)
                first = RunStarted(
                    agent=entry,
                    routing=decision.model_dump(mode="json") if decision else None,
                    tenant=request.tenant,
                    submitted_by=request.submitted_by,
                    epoch=lineage.epoch,
                    token_budget=ctx.limits.token_budget,
                    caps=list(caps),
                    **span_ids(span),
                )
                riding = await self._open(ctx, first, lineage, caps)
                tree = await self._dispatch_entry(request, entry, ctx, execution, riding)
                failure = None if tree.status == RunStatus.SUCCEEDED else tree.status.value
                # An input guardrail of the entry agent blocked part of the task: the run keeps
                # only the rest, anywhere it records the task.
                task = tree.input_kept if tree.input_kept is not None else request.task
                cancelled_by = self._cancelled.get(run_id)
                if tree.status == RunStatus.CANCELLED and cancelled_by:
                    span.set_attribute(attr.BATON_CANCELLED_BY, cancelled_by)
                options = self.system.config.tracing
                end_workflow(span, options, task, tree.output, failure=failure, error=tree.error)
            result = self._result(ctx, task, entry, decision, tree, cancelled_by)
            # Every process sent its spans to the ledger; the run's come from there, once all
            # the items each process counted are in (this process's own go along).
            settle = RunSettle(
                run_id,
                self.ledger.outbox.forget(run_id),
                riding,
                self._collector.drain(span.get_span_context().trace_id),
                traced=recorded,
                epoch=lineage.epoch,
            )
        finally:
            self._active.discard(run_id)
            self._cancelled.pop(run_id, None)
            if finish:
                # No events come back: they stay readable in the ledger (`events`).
                closed = await self.ledger.finish(
                    run_id,
                    final_event(result, entry),
                    first=riding,
                    settle=settle,
                    returning=False,
                )
                if result is not None:
                    result.spans = closed.spans
                    await self.export_spans(closed.spans)
            else:
                if riding is not None:
                    self._openings[run_id] = riding
                if settle is not None:
                    self._settling[run_id] = settle
        return result

    def _context(
        self, request: Submission, execution: Execution
    ) -> tuple[RunContext, tuple[SpendCap, ...]]:
        """The run's context for its agents (limits as asked), and every cap it is under."""
        overrides: dict[str, Any] = {}
        if request.token_budget is not None:
            overrides["token_budget"] = request.token_budget
        if request.deadline_s is not None:
            overrides["deadline_s"] = request.deadline_s
        limits = self.system.config.limits.model_copy(update=overrides)
        caps = execution.caps
        if limits.cost_budget_usd is not None:
            caps = (*caps, SpendCap(scope="run", usd=limits.cost_budget_usd))
        origin, lineage, turns = request.origin or Origin(), execution.lineage, execution.turns
        ctx = RunContext(
            run_id=execution.run_id,
            chain=origin.chain,
            systems=(*origin.systems, self.system.config.name),
            deadline=time.time() + limits.deadline_s,
            limits=limits,
            step_log=self.logs_steps,
            thread_id=turns.thread_id if turns else None,
            tenant=request.tenant,
            memories=turns.memories if turns else {},
            state_spec=self.system.config.state,
            capped=bool(caps),
            stream=request.stream,
            epoch=lineage.epoch,
            replay_only=lineage.replay_only,
            fork_from=lineage.fork_from.place if lineage.fork_from else None,
        )
        return ctx, caps

    async def _open(
        self, ctx: RunContext, first: RunStarted, lineage: Lineage, caps: tuple[SpendCap, ...]
    ) -> RunStarted | None:
        """Open the run in the ledger; or, when nothing needs it yet, let its first event ride.

        Returns the first event if it rides with the entry agent's own (no round trip per
        run: the ledger orders it before theirs).
        """
        if ctx.limits.token_budget is None and not caps and not lineage.has_past:
            return first
        # Agents ask the ledger for the budget and the caps; a past run's steps load first.
        await self.ledger.open(
            ctx.run_id,
            ctx.limits.token_budget,
            first,
            lineage.epoch,
            lineage.replay_of,
            ctx.fork_from,
            caps,
        )
        return None

    def _result(
        self,
        ctx: RunContext,
        task: str,
        entry: str,
        decision: RoutingDecision | None,
        tree: AgentResult,
        cancelled_by: str | None,
    ) -> RunResult:
        """How the run ended, from its entry agent's result tree (secrets redacted)."""
        redact = self._collector.redactor
        return RunResult(
            run_id=ctx.run_id,
            task=task,
            entry_agent=entry,
            routing=decision,
            status=tree.status,
            output=redact.text(tree.output) if tree.output is not None else None,
            error=redact.text(tree.error) if tree.error is not None else None,
            usage=tree.total_usage(),
            started_at=ctx.started_at,
            duration_s=time.time() - ctx.started_at,
            tree=tree,
            state=tree.state,
            cancelled_by=cancelled_by if tree.status == RunStatus.CANCELLED else None,
        )

    async def settle(self, run_id: str) -> list[SpanRecord]:
        """Wait until the last items of a run that `run(..., finish=False)` left open are in.

        Returns its spans. (For a caller that records the run itself before `finish`: with a
        run store, `finish(..., record=...)` settles, records and closes in one call.)
        """
        settle = self._settling.pop(run_id, None)
        return await self.ledger.settle(settle) if settle is not None else []

    async def finish(
        self, run_id: str, final: Event, record: dict[str, Any] | None = None
    ) -> Closed:
        """Close a run that `run(..., finish=False)` left open, settling it first if needed.

        `record`: how the run ended, as the values of its row in the run store: the ledger
        writes them and the run's spans there (`PoolOptions.store_url`) before it adds `final`,
        so that whoever sees `run_finished` finds the run recorded. Returns the ledger's answer
        (`Closed`: whether it recorded the run, the spans it did not, the events the store still
        lacks); the spans are exported (OTLP) if an export is configured.
        """
        closed = await self.ledger.finish(
            run_id,
            final,
            first=self._openings.pop(run_id, None),
            settle=self._settling.pop(run_id, None),
            record=record,
            spans_back=self._export is not None,
        )
        await self.export_spans(closed.spans)
        return closed

    async def release(self, run_id: str) -> None:
        """Leave a run that `run(..., finish=False)` left open unended, for a resume.

        Its last items come in and are stored (events, steps); nothing is recorded of an end
        and nothing announced: the next life of the run goes on from its step log.
        """
        settle = self._settling.pop(run_id, None) or RunSettle(run_id, {}, traced=False)
        first = self._openings.pop(run_id, None)
        await self.ledger.release(replace(settle, first=settle.first or first))

    async def export_spans(self, spans: list[SpanRecord]) -> None:
        """Send spans to the OTLP backend, if an export is configured; never raises.

        Queued: this waits only for room in the export's queue (see `OtlpExport`).
        """
        if self._export is not None and spans:
            await self._export.export(spans)

    async def _dispatch_entry(
        self,
        request: Submission,
        entry: str,
        ctx: RunContext,
        execution: Execution,
        opening: RunStarted | None,
    ) -> AgentResult:
        """Check the entry agent with the guard, then call it (within the deadline's grace)."""
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
            # A limit's refusal ends the run as that limit's, as it would have further down.
            status = _REFUSED_AS.get(refused.reason, RunStatus.FAILED)
            return AgentResult(agent=entry, status=status, error=refused.message)
        task, replay_of = request.task, execution.lineage.replay_of
        history = list(execution.turns.history) if execution.turns else []
        delegation = Delegation(
            task=task,
            input=request.input,
            context=ctx.enter(entry, inject_context()),
            invocation=entry_invocation(replay_of or ctx.run_id) if ctx.step_log else None,
            replay=ctx.epoch > 0 or replay_of is not None,
            input_tripped=request.input_tripped,
            # A turn of a thread: the conversation so far, then the task.
            history=[*history, {"role": "user", "content": task}] if history else [],
            state=dict(execution.turns.state) if execution.turns else {},
        )
        run_id = ctx.run_id
        stopped = AgentResult(
            agent=entry,
            status=RunStatus.CANCELLED,
            error="run cancelled",
            started_at=ctx.started_at,
        )
        if run_id in self._cancelled:
            return stopped

        def submitted(ref: ray.ObjectRef[bytes]) -> None:
            self._inflight[run_id] = ref
            if run_id in self._cancelled:  # asked to stop while the call was being made
                self._stop(ref)

        try:
            # Agents stop themselves at the deadline; this bound is for an agent that cannot.
            async with asyncio.timeout(ctx.time_left() + self._entry_grace_s):
                dispatcher = self._dispatcher
                assert dispatcher is not None  # `start` made it
                return await dispatcher.dispatch(entry, delegation, submitted, opening)
        except TimeoutError:
            return abandoned_entry(entry, delegation.context, self._entry_grace_s)
        except TaskCancelledError:
            return stopped
        finally:
            self._inflight.pop(run_id, None)

    def cancel(self, run_id: str, who: str | None = None) -> bool:
        """Cancel a run in flight: every agent working on it, across actors, is stopped.

        `who` asked (a key's name): the run's end and its root span say so.

        A run whose entry agent has not been called yet ends cancelled without calling it.

        Returns False when the run is not (or no longer) running here.
        """
        if run_id not in self._active:
            return False
        self._cancelled[run_id] = who
        ref = self._inflight.get(run_id)
        if ref is not None:
            self._stop(ref)
        return True

    def _stop(self, ref: ray.ObjectRef[bytes]) -> None:
        """Cancel the entry agent's call (its delegations too) while the run goes on."""
        if not self._closed and self._dispatcher is not None:
            self._dispatcher.cancel(ref)
