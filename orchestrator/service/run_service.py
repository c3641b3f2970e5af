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
import logging
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from functools import partial
from typing import Any

from agents.core.events import RunFinished
from agents.core.messages import RunStatus
from orchestrator.engine import Engine
from orchestrator.engine.results import RunResult, events_sent, final_event
from orchestrator.engine.submission import Lineage, Submission
from orchestrator.errors import IdempotencyConflict, NotReady, RunNotFound
from orchestrator.service.admission import Admission
from orchestrator.service.approvals import ApprovalDesk
from orchestrator.service.durability import Durability
from orchestrator.service.feed import EventFeed
from orchestrator.service.recorder import Recorder
from orchestrator.service.upkeep import Orphans, keep_leases
from orchestrator.service.views import RunViews
from orchestrator.store import DuplicateIdempotencyKey, RunPage, RunStore, StoredRun
from orchestrator.system.config import AgentSystem

__all__ = ["RunService", "ServiceLimits"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceLimits:
    """How much the service takes on at once, and how it shares a store with other instances."""

    max_concurrent_runs: int = 32
    max_queued_runs: int = 1000
    lease_s: float = 30.0
    heartbeat_s: float = 15.0
    shutdown_grace_s: float = 10.0  # runs in flight may finish within this when stopping
    wrap_up_s: float = 10.0  # then interrupted runs have this long to record themselves
    # Whether this instance resumes (or, with `on_interrupt: fail`, interrupts) the runs of
    # instances that stopped renewing their leases. A one-shot `baton run` leaves them alone.
    adopts_lost_runs: bool = True


_STOPPED = "the service stopped while the run was in flight"
_CANCELLED = (RunStatus.CANCELLED, "cancelled before it started")
# How long the start waits for the event stream's place in the ledger's feed (a round trip).
_STREAM_PLACE_S = 5.0
# Runs accepted here whose records followers get without reading the store (see `following`).
_KEEP_ACCEPTED = 256


class RunService(RunViews, Durability):
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
        self._config = system.public_config(engine.redactor)
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._accepted: OrderedDict[str, StoredRun] = OrderedDict()  # as recorded, oldest first
        self._running: set[str] = set()
        self._cancel_asked: set[str] = set()  # cancelled as their start was being recorded
        self._slots = asyncio.Semaphore(self.limits.max_concurrent_runs)
        self._ready = asyncio.Event()
        self._settled = asyncio.Event()  # the agents started, or failed to
        self._background: list[asyncio.Task[None]] = []
        self._stopping = False
        self._draining: asyncio.Task[None] | None = None
        self.admission = Admission(
            self.limits.max_concurrent_runs, self.limits.max_queued_runs, lambda: len(self._tasks)
        )
        self._orphans = Orphans(engine, store)  # interrupted runs still open in the ledger
        # Runs cut off by a dying service carry on from their step log (`on_interrupt`).
        self._resumes = system.config.on_interrupt == "resume" and engine.journaled
        self.startup_error: str | None = None
        heartbeat = self.limits.heartbeat_s
        self.recorder = Recorder()  # writes kept while the store is unavailable
        self.feed = EventFeed(engine, store, self._ready, heartbeat)
        self.approvals = ApprovalDesk(engine, store, self._ready, heartbeat)

    # Life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Resume (or interrupt) what this instance left unfinished, start agents and leases."""
        reason = "the service restarted while the run was in flight"
        if self._resumes:
            for run in await self.store.take_over(self.owner, restarted=True):
                logger.warning("resuming run %s (left unfinished by %s)", run.id, self.owner)
                self._resume(run)
        left = [] if self._resumes else await self.store.interrupt_owned(self.owner, reason)
        if left:
            logger.warning("marked %d unfinished runs of %s interrupted", len(left), self.owner)
            self._orphans.add(left, reason)
        leases = keep_leases(
            store=self.store,
            owner=self.owner,
            lease_s=self.limits.lease_s,
            held=lambda: list(self._tasks),
            recorder=self.recorder,
            orphans=self._orphans,
            ready=self._ready,
            cancel=self._cancel_here,
            take_over=self._take_over_lost if self._resumes else None,
            interrupt_lost=self.limits.adopts_lost_runs and not self._resumes,
        )
        self._background = [
            asyncio.create_task(self._start_engine()),
            asyncio.create_task(leases),
        ]

    async def _start_engine(self) -> None:
        try:
            await asyncio.to_thread(self.engine.start)
        except Exception as exc:
            self.startup_error = f"the agents did not start: {type(exc).__name__}: {exc}"
            logger.exception("the agents did not start")
            return
        finally:
            if not self.startup_error:  # its place taken before the first run (see `watch`)
                self.feed.stream.start(self.engine.ledger)
                await self.feed.stream.in_place(_STREAM_PLACE_S)
            self._settled.set()  # runs waiting to start go on, or fail with the reason
        self._ready.set()
        await self._orphans.close()

    def drain(self) -> asyncio.Task[None]:
        """Stop taking work, let runs in flight finish within the grace, interrupt the rest.

        Interrupted runs are recorded like any other: their state, their spans so far and their
        events up to `run_finished` (which their followers receive). Called on SIGTERM while
        the HTTP server still serves event streams, and by `stop`; the first call does it.
        """
        self._stopping = True
        if self._draining is None:
            self._draining = asyncio.get_running_loop().create_task(self._drain())
        return self._draining

    async def _drain(self) -> None:
        if self._tasks:
            logger.info(
                "stopping: %d runs in flight, waiting up to %.0f s",
                len(self._tasks),
                self.limits.shutdown_grace_s,
            )
            await asyncio.wait(list(self._tasks.values()), timeout=self.limits.shutdown_grace_s)
        for run_id in list(self._tasks):
            self._cancel_here(run_id)  # recorded as interrupted by `_run` or `_execute`
        if self._tasks:
            await asyncio.wait(list(self._tasks.values()), timeout=self.limits.wrap_up_s)

    async def stop(self) -> None:
        """Drain (see `drain`), then stop; what could not wrap up is marked interrupted."""
        await asyncio.shield(self.drain())
        for task in self._background:
            task.cancel()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*self._background, *tasks, return_exceptions=True)
        await self.feed.close()
        await self.store.interrupt_owned(self.owner, _STOPPED)
        self.engine.close()  # before this process leaves Ray

    @property
    def ready(self) -> bool:
        """Whether the agents have started (runs wait for it)."""
        return self._ready.is_set()

    # Runs ----------------------------------------------------------------------------------

    async def submit(
        self, request: Submission, *, idempotency_key: str | None = None, principal: str = ""
    ) -> tuple[StoredRun, bool]:
        """Accept a run, or find the one this idempotency key made; say whether it is new.

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
        run_id = uuid.uuid4().hex
        if self._stopping:
            raise NotReady("the service is stopping")
        if self.startup_error:
            raise NotReady(self.startup_error)
        with self.admission.place():
            try:
                run = await self._add_run(
                    run_id, request, idempotency_key=scoped, request_hash=digest
                )
            except DuplicateIdempotencyKey:
                # A concurrent twin got there first: it is the run.
                existing = await self.store.by_idempotency_key(scoped or "")
                if existing is None:
                    raise
                return _replay(existing, digest), False
            self._start(run_id, self._execute(run_id, request))
            self._accepted[run_id] = run
            while len(self._accepted) > _KEEP_ACCEPTED:
                self._accepted.popitem(last=False)
        return run, True

    async def _add_run(self, run_id: str, request: Submission, **record: Any) -> StoredRun:
        """Record a new run of this system, owned here (the caller holds an admission place)."""
        return await self.store.add(
            run_id,
            request.task,
            agent=request.agent,
            system=self.system.config.name,
            config=self._config,
            owner=self.owner,
            options=request.options(),
            **record,
        )

    async def following(self, run_id: str) -> StoredRun:
        """A run to follow, or `RunNotFound`.

        As accepted, if in flight here or if the stream kept its every event (the store may be
        away); else as stored.
        """
        run = self._accepted.get(run_id)
        if run is not None and (run_id in self._tasks or self.feed.stream.complete(run_id)):
            return run
        return await self.get(run_id)

    async def get(self, run_id: str) -> StoredRun:
        """A stored run, or `RunNotFound`."""
        run = await self.store.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        return run

    async def list_runs(
        self, *, status: str | None = None, agent: str | None = None, limit: int, offset: int = 0
    ) -> RunPage:
        """Stored runs, newest first, filtered by status and entry agent."""
        return await self.store.list(status=status, agent=agent, limit=limit, offset=offset)

    async def cancel(self, run_id: str) -> StoredRun:
        """Cancel a run wherever it is: queued or running here, or owned by another instance.

        Another instance cancels it when it next renews its lease. A finished run stays as it is.
        """
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
            # Every agent on it stops; before the engine has it, `_run` ends it (`_cancel_asked`).
            if not self.engine.cancel(run_id):
                self._cancel_asked.add(run_id)
        else:
            task.cancel()  # still queued
        return True

    async def _execute(
        self,
        run_id: str,
        request: Submission,
        lineage: Lineage | None = None,
    ) -> None:
        began = time.monotonic()
        try:
            async with self._slots:
                await self._settled.wait()
                if self.startup_error:
                    await self._end_unstarted(run_id, self.startup_error)
                    return
                self._running.add(run_id)
                await self._run(run_id, request, lineage)
        except asyncio.CancelledError:
            if run_id not in self._running:  # cancelled while queued
                await self._end_unstarted(run_id)
        except Exception:  # recording failed: the store is unreachable, say; keep serving
            logger.exception("run %s could not be recorded", run_id)
        finally:
            self._running.discard(run_id)
            self._cancel_asked.discard(run_id)
            self._tasks.pop(run_id, None)
            self.admission.ran(time.monotonic() - began)

    async def _run(self, run_id: str, request: Submission, lineage: Lineage | None) -> None:
        record = self.recorder.write
        await record(f"the start of run {run_id}", partial(self.store.start, run_id))
        if run_id in self._cancel_asked:  # while its start was being recorded
            await self._end_unstarted(run_id)
            return
        self.feed.stream.watch(run_id)  # (resumed, or accepted before the stream's place)
        result: RunResult | None = None
        error: str | None = None
        tracker = (
            asyncio.create_task(self.approvals.track(run_id))
            if self.system.needs_approvals
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
                stream=request.stream,
                origin=request.origin,
                lineage=lineage,
            )
            if self._stopping and result.status == RunStatus.CANCELLED:
                result = result.model_copy(
                    update={"status": RunStatus.INTERRUPTED, "error": _STOPPED}
                )
            await record(f"run {run_id}", partial(self.store.finish, result))
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            logger.exception("run %s failed", run_id)
            await record(f"run {run_id}", partial(self.store.fail, run_id, error))
        finally:
            # (The tracker may outlive the final record by a moment: `set_waiting` never
            # touches a finished run.)
            await _stop(tracker)
            # Recorded first, announced after: whoever sees `run_finished` finds the record
            # (unless the store is unavailable: then it is recorded once the store is back).
            entry = result.entry_agent if result else (request.agent or self.system.entry)
            final = final_event(result, entry, error)
            events = await self.engine.finish(run_id, final, events_sent(result))
            await record(
                f"the events of run {run_id}", partial(self.store.add_events, run_id, events)
            )

    async def _end_unstarted(self, run_id: str, failure: str | None = None) -> None:
        """End a run the engine never had: failed (`failure`), else cancelled or interrupted."""
        status, reason = (RunStatus.FAILED, failure or "")
        if not failure:
            status, reason = (RunStatus.INTERRUPTED, _STOPPED) if self._stopping else _CANCELLED
        await self.store.end(run_id, status, reason)
        if self.ready:
            event = RunFinished(status=status, error=reason)
            await self.store.add_events(run_id, await self.engine.ledger.finish(run_id, event))


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
