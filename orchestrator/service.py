"""The run service: accepts runs, runs them in the background on the engine, and records them.

It knows nothing of HTTP: the API (`orchestrator.api`) and `baton run` both drive it. Runs are
admitted up to a bound (running plus queued), recorded before they start, and recorded again
when they end, with their spans and their progress events under the ids clients saw. Each run
names the service instance that owns it; the owner renews a lease on it, so that another
instance sharing the store can tell a run whose owner died from one still going.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from orchestrator.config import AgentSystem
from orchestrator.engine import Engine, connect_ray, final_event, run_event
from orchestrator.errors import (
    ApprovalConflict,
    ApprovalNotFound,
    IdempotencyConflict,
    NotReady,
    Overloaded,
    RunNotFound,
)
from orchestrator.live_trace import live_spans
from orchestrator.results import RunResult
from orchestrator.schemas import RunRequest
from orchestrator.store import INTERRUPTED, DuplicateIdempotencyKey, RunStore, StoredRun
from tracing import OtlpExport, SpanRecord
from tracing.sequence import Detail, Diagram, sequence_diagram

__all__ = ["RunService", "ServiceLimits", "open_service"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceLimits:
    """How much the service takes on at once, and how it shares a store with other instances."""

    max_concurrent_runs: int = 32
    max_queued_runs: int = 1000
    lease_s: float = 30.0
    heartbeat_s: float = 15.0


class RunService:
    """Runs tasks in the background and keeps their record.

    Args:
        system: the agent system every run goes through.
        engine: its engine (started by `start`, in a thread: agents take a while to warm up).
        store: the run store.
        owner: names this instance in the store (stable across restarts of the instance).
        limits: admission bounds, lease and heartbeat periods.
    """

    def __init__(
        self,
        system: AgentSystem,
        engine: Engine,
        store: RunStore,
        *,
        owner: str,
        limits: ServiceLimits | None = None,
    ) -> None:
        self.system = system
        self.engine = engine
        self.store = store
        self.owner = owner
        self.limits = limits or ServiceLimits()
        self._config = system.public_config()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._running: set[str] = set()
        self._slots = asyncio.Semaphore(self.limits.max_concurrent_runs)
        self._ready = asyncio.Event()
        self._background: list[asyncio.Task[None]] = []
        self._stopping = False
        self._mean_run_s = 1.0
        self._orphans: list[tuple[str, str]] = []  # interrupted runs still open in the ledger
        self.startup_error: str | None = None

    # Life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Interrupt what this instance left unfinished, then start the agents and the leases."""
        reason = "the service restarted while the run was in flight"
        left = await self.store.interrupt_owned(self.owner, reason)
        if left:
            logger.warning("marked %d unfinished runs of %s interrupted", len(left), self.owner)
            self._orphans += [(run_id, reason) for run_id in left]
        self._background = [
            asyncio.create_task(self._start_engine()),
            asyncio.create_task(self._keep_leases()),
        ]

    async def _start_engine(self) -> None:
        try:
            await asyncio.to_thread(self.engine.start)
        except Exception as exc:
            self.startup_error = f"{type(exc).__name__}: {exc}"
            logger.exception("the agents did not start")
            return
        self._ready.set()
        await self._close_orphans()

    async def _close_orphans(self) -> None:
        """End the event logs of runs that were interrupted (their service died), so that
        their followers see `run_finished` and the ledger forgets them."""
        while self._orphans and self.ready:
            run_id, reason = self._orphans.pop()
            try:
                final = run_event("run_finished", "", status=INTERRUPTED, error=reason)
                await self.store.add_events(run_id, await self.engine.finish(run_id, final))
            except Exception:
                logger.exception("could not close the event log of run %s", run_id)

    async def stop(self) -> None:
        """Stop taking work; runs still in flight are recorded as interrupted."""
        self._stopping = True
        for task in self._background:
            task.cancel()
        for run_id in list(self._running):
            self.engine.cancel(run_id)
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*self._background, *tasks, return_exceptions=True)
        await self.store.interrupt_owned(
            self.owner, "the service stopped while the run was in flight"
        )

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    async def check(self) -> dict[str, str]:
        """What is (not) working: the agents on Ray and the store. Values are "ok" or why not."""
        status: dict[str, str] = {}
        try:
            if self.startup_error:
                raise NotReady(self.startup_error)
            if not self.ready:
                raise NotReady("the agents are starting")
            await self.engine.ping()
            status["ray"] = "ok"
        except Exception as exc:
            status["ray"] = _why(exc)
        try:
            await asyncio.wait_for(self.store.ping(), 5)
            status["store"] = "ok"
        except Exception as exc:
            status["store"] = _why(exc)
        if status["ray"] == "ok":
            # MCP servers that failed, tools disabled: the agents work on without them.
            problems = sorted(
                {p for r in await self.engine.placement() for p in r.get("tool_problems", [])}
            )
            status["tools"] = "ok" if not problems else "degraded: " + "; ".join(problems)
        return status

    # Runs ----------------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Runs accepted here and not finished: running or queued."""
        return len(self._tasks)

    def _admit(self) -> None:
        limit = self.limits.max_concurrent_runs + self.limits.max_queued_runs
        if self._stopping:
            raise NotReady("the service is stopping")
        if self.in_flight >= limit:
            waves = self.in_flight / self.limits.max_concurrent_runs
            raise Overloaded(
                f"{self.in_flight} runs are running or queued (limit {limit}); retry later",
                retry_after_s=max(1, round(waves * self._mean_run_s)),
            )

    async def submit(
        self, request: RunRequest, *, idempotency_key: str | None = None, principal: str = ""
    ) -> tuple[StoredRun, bool]:
        """Accept a run (or find the one this idempotency key made); return it, and whether it
        is new.

        Raises:
            IdempotencyConflict: the key was used with a different request.
            Overloaded: too many runs in flight and queued.
        """
        digest = request.fingerprint()
        scoped = f"{principal}:{idempotency_key}" if idempotency_key else None
        if scoped is not None:
            existing = await self.store.by_idempotency_key(scoped)
            if existing is not None:
                return _replay(existing, digest), False
        self._admit()
        run_id = uuid.uuid4().hex
        try:
            run = await self.store.add(
                run_id,
                request.task,
                agent=request.agent,
                system=self.system.config.name,
                config=self._config,
                owner=self.owner,
                idempotency_key=scoped,
                request_hash=digest,
                options=request.model_dump(exclude={"task"}, exclude_none=True),
            )
        except DuplicateIdempotencyKey:
            # A concurrent twin got there first: it is the run.
            existing = await self.store.by_idempotency_key(scoped or "")
            if existing is None:
                raise
            return _replay(existing, digest), False
        # A fresh context: the run is a trace of its own, not part of this request's.
        self._tasks[run_id] = asyncio.create_task(
            self._execute(run_id, request), context=contextvars.Context()
        )
        return run, True

    async def get(self, run_id: str) -> StoredRun:
        run = await self.store.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        return run

    async def spans(self, run: StoredRun) -> list[SpanRecord]:
        """The run's spans: as stored once it is finished; while it goes on, those finished so
        far with the open ones rebuilt from its events (`orchestrator.live_trace`)."""
        if not run.finished and self.ready:
            finished, events = await self.engine.snapshot(run.id)
            if events:
                return live_spans(finished, events)
        return await self.store.spans(run.id)

    async def diagram(self, run: StoredRun, detail: Detail = "agents", page: int = 1) -> Diagram:
        """The run as a Mermaid sequence diagram, from its spans (live while it goes on)."""
        spans = await self.spans(run)
        return await asyncio.to_thread(
            sequence_diagram, spans, detail=detail, page=page, title=f"Run {run.id[:12]}"
        )

    async def cancel(self, run_id: str) -> StoredRun:
        """Cancel a run wherever it is: queued or running here, or owned by another instance
        (which cancels it when it next renews its lease). A finished run stays as it is."""
        run = await self.get(run_id)
        if run.finished:
            return run
        if not self._cancel_here(run_id):
            await self.store.request_cancel(run_id)
        return await self.get(run_id)

    def _cancel_here(self, run_id: str) -> bool:
        task = self._tasks.get(run_id)
        if task is None:
            return False
        if run_id in self._running:
            self.engine.cancel(run_id)  # every agent working on it stops; the run ends cancelled
        else:
            task.cancel()  # still queued
        return True

    # Approvals ---------------------------------------------------------------------------

    async def pending_approvals(self, run_id: str) -> list[dict[str, Any]]:
        run = await self.get(run_id)
        if run.finished or not self.ready:
            return []
        return await self.engine.pending_approvals(run_id)

    async def decide(
        self, run_id: str, call_id: str, approved: bool, message: str
    ) -> dict[str, Any]:
        """Approve or deny a call waiting in a run (whichever instance runs it)."""
        run = await self.get(run_id)
        if run.finished:
            raise ApprovalConflict(f"run {run_id!r} is {run.status}", run_id=run_id)
        if not self.ready:
            raise NotReady("the agents are starting")
        outcome, decision = await self.engine.decide(run_id, call_id, approved, message)
        if outcome == "unknown":
            raise ApprovalNotFound(run_id, call_id)
        if outcome == "already_decided":
            raise ApprovalConflict(
                f"call {call_id!r} was decided already", call_id=call_id, decision=decision
            )
        assert decision is not None
        return {"call_id": call_id, **decision}

    async def _track_approvals(self, run_id: str) -> None:
        """Keep the stored status `waiting_for_approval` while a call of the run waits."""
        seen, waiting = 0, False
        while True:
            seen, pending, state = await self.engine.watch_approvals(
                run_id, seen, self.limits.heartbeat_s
            )
            if state == "closed":
                return
            if (pending > 0) != waiting:
                waiting = pending > 0
                await self.store.set_waiting(run_id, waiting)

    async def _execute(self, run_id: str, request: RunRequest) -> None:
        began = time.monotonic()
        try:
            async with self._slots:
                await self._ready.wait()
                self._running.add(run_id)
                await self._run(run_id, request)
        except asyncio.CancelledError:
            if not self._stopping:  # cancelled while queued
                await self._end_unstarted(run_id, "cancelled", "cancelled before it started")
        except Exception:  # recording failed: the store is unreachable, say; keep serving
            logger.exception("run %s could not be recorded", run_id)
        finally:
            self._running.discard(run_id)
            self._tasks.pop(run_id, None)
            self._mean_run_s = 0.9 * self._mean_run_s + 0.1 * (time.monotonic() - began)

    async def _run(self, run_id: str, request: RunRequest) -> None:
        await self.store.start(run_id)
        result: RunResult | None = None
        error: str | None = None
        tracker = (
            asyncio.create_task(self._track_approvals(run_id))
            if self.engine.needs_approvals
            else None
        )
        try:
            result = await self.engine.run(
                request.task,
                agent=request.agent,
                run_id=run_id,
                token_budget=request.token_budget,
                deadline_s=request.deadline_s,
                finish=False,
            )
            await self.store.finish(result)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            logger.exception("run %s failed", run_id)
            await self.store.fail(run_id, error)
        finally:
            # (The tracker may outlive the final record by a moment: `set_waiting` never
            # touches a finished run.)
            await _stop(tracker)
            # Recorded first, announced after: whoever sees `run_finished` finds the record.
            entry = result.entry_agent if result else (request.agent or self.system.entry)
            events = await self.engine.finish(run_id, final_event(result, entry, error))
            await self.store.add_events(run_id, events)

    async def _end_unstarted(self, run_id: str, status: str, reason: str) -> None:
        await self.store.end(run_id, status, reason)
        if self.ready:
            event = run_event("run_finished", "", status=status, error=reason)
            await self.store.add_events(run_id, await self.engine.finish(run_id, event))

    # Leases --------------------------------------------------------------------------------

    async def _keep_leases(self) -> None:
        """Renew this instance's leases; interrupt runs of instances that stopped renewing;
        honour cancellations requested through other instances."""
        period = self.limits.lease_s / 3
        while True:
            try:
                await self.store.renew(self.owner, list(self._tasks))
                reason = "the service instance running it stopped responding"
                lost = await self.store.interrupt_expired(self.limits.lease_s, reason)
                if lost:
                    logger.warning("marked %d runs of lost instances interrupted", len(lost))
                    self._orphans += [(run_id, reason) for run_id in lost]
                await self._close_orphans()
                for run_id in await self.store.cancel_requests(self.owner):
                    self._cancel_here(run_id)
            except Exception:
                logger.exception("lease upkeep failed; retrying")
            await asyncio.sleep(period)

    # Events --------------------------------------------------------------------------------

    async def events(
        self, run: StoredRun, after: int = 0
    ) -> AsyncIterator[tuple[int, dict[str, Any]] | None]:
        """A run's progress events with ids above `after`, as they happen, ending with its
        `run_finished` event; `None` marks a quiet heartbeat period.

        While a run is in flight its events come from the system's ledger (shared by every
        instance); once it is finished and gone from there, from the store.
        """
        run_id = run.id
        last = after
        while True:
            if not self.ready:  # no ledger to read yet (or ever): only the store
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._ready.wait(), self.limits.heartbeat_s)
                if not self.ready:
                    run = await self.get(run_id)  # no ledger: the store says how it stands
                    if run.finished:
                        async for item in self._stored_events(run, last):
                            yield item
                        return
                    yield None
                    continue
            found, state = await self.engine.events(run_id, last, self.limits.heartbeat_s)
            for seq, event in found:
                yield seq, event
                last = seq
                if event.get("type") == "run_finished":
                    return
            if state == "closed" and not found:
                return
            if not found:
                stored = await self.store.get(run_id)
                if stored is None:
                    return
                # Gone from the ledger, or left open there by an instance that died: the
                # store has the rest.
                if stored.finished and (state == "unknown" or _long_ago(stored.finished_at)):
                    async for item in self._stored_events(stored, last):
                        yield item
                    return
                yield None

    async def _stored_events(
        self, run: StoredRun, after: int
    ) -> AsyncIterator[tuple[int, dict[str, Any]]]:
        last = after
        for seq, event in await self.store.events(run.id, after):
            yield seq, event
            last = seq
            if event.get("type") == "run_finished":
                return
        # Interrupted runs have no stored events: say how the run ended all the same.
        yield (
            last + 1,
            run_event(
                "run_finished",
                run.entry_agent or "",
                status=run.status,
                output=run.output,
                error=run.error,
                duration_s=run.duration_s,
            ),
        )


async def _stop(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task


def _replay(existing: StoredRun, digest: str) -> StoredRun:
    if existing.request_hash != digest:
        raise IdempotencyConflict(
            "this Idempotency-Key was used with a different request body",
            run_id=existing.id,
        )
    return existing


def _long_ago(stamp: float | None, seconds: float = 5.0) -> bool:
    return stamp is not None and time.time() - stamp > seconds


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


@asynccontextmanager
async def open_service(
    system: AgentSystem,
    *,
    store_url: str,
    ray_address: str | None,
    namespace: str,
    owner: str,
    env: Mapping[str, str] | None = None,
    export: OtlpExport | None = None,
    limits: ServiceLimits | None = None,
    detached: bool = False,
    forbid_remote_models: bool = False,
) -> AsyncIterator[RunService]:
    """Open the store, join Ray, and run a `RunService` until the block ends.

    Args:
        detached: agents outlive this process (a service: restarts and replicas find them).
    """
    store = await RunStore.open(store_url)
    try:
        await asyncio.to_thread(connect_ray, ray_address, namespace)
        engine = Engine(
            system,
            namespace=namespace,
            env=env,
            export=export,
            detached=detached,
            forbid_remote_models=forbid_remote_models,
        )
        service = RunService(system, engine, store, owner=owner, limits=limits)
        await service.start()
        try:
            yield service
        finally:
            await service.stop()
    finally:
        await store.close()
        if export is not None:
            await asyncio.to_thread(export.shutdown)  # send what is queued
