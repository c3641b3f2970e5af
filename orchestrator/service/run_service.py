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
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agents.core.errors import describe_error
from agents.core.events import Event
from agents.core.limits import SpendCap
from agents.core.store_faults import store_unavailable
from orchestrator.access import LOCAL, Access, SpendPolicy
from orchestrator.engine import Engine, Submission
from orchestrator.errors import (
    IdempotencyConflict,
    InvalidInput,
    NotReady,
    Overloaded,
    ProviderGateClosed,
    RunNotFound,
    SpendingCapReached,
)
from orchestrator.service.admission import Admission
from orchestrator.service.desk import Desk
from orchestrator.service.durability import DurableRuns
from orchestrator.service.evaluations import Experiments, RunEvaluations
from orchestrator.service.executor import STOPPED, RunExecutor
from orchestrator.service.pending_writes import PendingWrites
from orchestrator.service.run_events import RunEvents
from orchestrator.service.threads import Threads
from orchestrator.service.upkeep import Orphans, keep_leases
from orchestrator.service.versions import RunningVersion, Versions
from orchestrator.service.views import RunViews
from orchestrator.store import DuplicateIdempotencyKey, RunPage, RunStore, StoredRun
from orchestrator.system import AgentSystem

if TYPE_CHECKING:  # (loaded by `baton serve` only: OpenTelemetry's metrics, prometheus_client)
    from orchestrator.service.metrics import ServiceMetrics

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
    # Retention: finished runs older than this many days, and beyond the newest this many,
    # are removed (None: kept), by a sweep every `retention_sweep_s`.
    retention_days: float | None = None
    retention_max_runs: int | None = None
    memory_retention_days: float | None = None  # memory items not written for this long
    retention_sweep_s: float = 3600.0
    thread_max_turns: int = 1000  # a thread's turns; the next is refused (`ThreadFull`)
    spending: SpendPolicy = field(default_factory=SpendPolicy)  # tenants' and keys' daily caps


# How long the start waits for the event stream's place in the ledger's feed (a round trip).
_STREAM_PLACE_S = 5.0
# The retention sweep removes this many runs per transaction, pausing between two: on SQLite
# (one writer at a time) the runs going on meanwhile write between its batches.
_SWEEP_BATCH = 100
_SWEEP_PAUSE_S = 0.05
# How often the autoscaled hosts' replicas are read for the metrics.
_SCALING_READ_S = 5.0


class RunService:
    """Runs tasks in the background and keeps their record.

    Composed of its parts, each public for the doors that need it: `executor` (runs in the
    background, recorded), `durable` (resume, take-over, replay, fork), `views` (traces,
    diagrams, placement, health), `events` (followers' events), `desk` (what waits for a
    person: calls to approve, questions to answer), `evaluations` (verdicts added to runs'
    traces), `admission` (the bounds) and `versions` (the versions of the team running: see `roll`).

    Args:
        engine: the engine of the team's first version (its `system`; started by `start`, in a
            thread: agents take a while to warm up).
        store: the run store.
        owner: names this instance in the store (stable across restarts of the instance).
        limits: admission bounds, lease and heartbeat periods.
        make_engine: an engine for a new version of the team (`roll`); None: no new version.
    """

    def __init__(
        self,
        engine: Engine,
        store: RunStore,
        *,
        owner: str,
        limits: ServiceLimits | None = None,
        metrics: ServiceMetrics | None = None,
        make_engine: Callable[[AgentSystem], Engine] | None = None,
    ) -> None:
        self.versions = versions = Versions(engine, make_engine)
        self.store = store
        self.owner = owner
        self.limits = limits = limits or ServiceLimits()
        self._ready = asyncio.Event()
        self._background: list[asyncio.Task[None]] = []
        self._draining: asyncio.Task[None] | None = None
        self._orphans = Orphans(versions, store)  # interrupted runs still open in the ledger
        # Runs cut off by a dying service carry on from their step log (`on_interrupt`).
        self._resumes = engine.system.config.on_interrupt == "resume" and engine.logs_steps
        heartbeat = limits.heartbeat_s
        self.pending_writes = PendingWrites()  # writes kept while the store is unavailable
        self.events = RunEvents(versions, store, self._ready, heartbeat)
        self.desk = Desk(versions, store, self._ready, heartbeat)
        self.executor = RunExecutor(
            versions,
            store,
            owner=owner,
            events=self.events,
            desk=self.desk,
            pending_writes=self.pending_writes,
            admission=Admission(
                limits.max_concurrent_runs, limits.max_queued_runs, lambda: len(self.executor.tasks)
            ),
            ready=self._ready,
            max_concurrent_runs=limits.max_concurrent_runs,
            spending=limits.spending,
            metrics=metrics,
            # A service that adopts runs (`baton serve`) leaves its own to the next one when it
            # stops; a one-shot one (`baton run`, `baton mcp`) ends them interrupted.
            hands_over=self._resumes and limits.adopts_lost_runs,
        )
        self.admission = self.executor.admission
        self.metrics = metrics
        if metrics is not None:
            tasks, running = self.executor.tasks, self.executor.running
            metrics.watch(
                lambda: (len(tasks) - len(running), len(running)),
                lambda: self.events.reader.followers,
            )

            def saw(run_id: str, event: Event) -> None:
                if run_id in tasks:  # this replica's runs only: the replicas' figures add up
                    metrics.saw(event)

            self.events.reader.on_event = saw
            metrics.watch_versions(
                lambda: [
                    (v.version, len(v.runs), v is versions.current) for v in versions.running()
                ]
            )
        self.durable = DurableRuns(
            self.executor, lease_s=limits.lease_s, adopts_lost_runs=limits.adopts_lost_runs
        )
        self.views = RunViews(versions, store, self._ready, lambda: self.executor.startup_error)
        self.evaluations = RunEvaluations(versions, store)
        self.experiments = Experiments(store)
        # The A2A door's webhooks, by task and caller (a table of the store, as it is).
        self.push_configs = store.push
        self.threads = Threads(
            store, self.executor, self.submit, self.cancel, self.limits.thread_max_turns
        )

    @property
    def system(self) -> AgentSystem:
        """The team new runs go to (its newest version)."""
        return self.versions.current.system

    @property
    def engine(self) -> Engine:
        """The newest version's engine."""
        return self.versions.engine

    # Life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Resume (or interrupt) what this instance left unfinished, start agents and leases."""
        reason = "the service restarted while the run was in flight"
        if self._resumes:
            for run in await self.store.leases.take_over(self.owner, restarted=True):
                logger.warning("resuming run %s (left unfinished by %s)", run.id, self.owner)
                self.durable.resume_run(run)
        left = [] if self._resumes else await self.store.leases.interrupt_owned(self.owner, reason)
        if left:
            logger.warning("marked %d unfinished runs of %s interrupted", len(left), self.owner)
            self._orphans.add(left, reason)
        leases = keep_leases(
            store=self.store,
            owner=self.owner,
            lease_s=self.limits.lease_s,
            held=lambda: list(self.executor.tasks),
            pending_writes=self.pending_writes,
            orphans=self._orphans,
            ready=self._ready,
            cancel=self.executor.cancel,
            let_go=self.executor.let_go,
            take_over=self.durable.take_over_lost if self._resumes else None,
            interrupt_lost=self.limits.adopts_lost_runs and not self._resumes,
        )
        self._background = [
            asyncio.create_task(self._start_engine()),
            asyncio.create_task(leases),
        ]
        limits = self.limits
        policy = (limits.retention_days, limits.retention_max_runs, limits.memory_retention_days)
        if any(x is not None for x in policy):
            self._background.append(asyncio.create_task(self._sweep()))
        if self.metrics is not None and self.system.autoscaled:
            self._background.append(asyncio.create_task(self._watch_scaling(self.metrics)))

    async def _watch_scaling(self, metrics: ServiceMetrics) -> None:
        """Keep the metrics of the autoscaled hosts' replicas and decisions current."""
        await self._ready.wait()
        seen = time.time()
        while True:
            try:
                pool = self.engine.pool  # (the newest version's)
                scaled = {h.name for h in pool.plan if h.ray.autoscale is not None}
                replicas = await pool.replicas()
                decisions = [d for d in await pool.scaling() if d["at"] > seen]
                seen = max([seen, *(d["at"] for d in decisions)])
                metrics.scaled(
                    {h: len(r) for h, r in replicas.items() if h in scaled},
                    [(d["host"], d["before"], d["after"]) for d in decisions],
                )
            except Exception:
                logger.exception("reading the agents' scaling failed; read again later")
            await asyncio.sleep(_SCALING_READ_S)

    async def _sweep(self) -> None:
        """Remove the runs the retention policy no longer keeps, at once and then regularly.

        And the memory items not written for `memory_retention_days`. Every instance sharing a
        store may sweep it: a run removed twice is removed once.
        """
        limits = self.limits
        while True:
            try:
                if limits.memory_retention_days is not None:
                    aged = time.time() - limits.memory_retention_days * 86400
                    if forgotten := await self.store.memory.prune(aged):
                        logger.info("retention: removed %d memory items", forgotten)
                cutoff = None
                if limits.retention_days is not None:
                    cutoff = time.time() - limits.retention_days * 86400
                began = time.monotonic()
                removed = await self.store.prune(
                    older_than=cutoff,
                    keep=limits.retention_max_runs,
                    batch=_SWEEP_BATCH,
                    pause_s=_SWEEP_PAUSE_S,
                )
                if removed:
                    logger.info(
                        "retention: removed %d finished runs in %.2f s",
                        removed,
                        time.monotonic() - began,
                    )
            except Exception:
                logger.exception("the retention sweep failed; it tries again later")
            await asyncio.sleep(limits.retention_sweep_s)

    async def _start_engine(self) -> None:
        error = None
        try:
            await asyncio.to_thread(self.engine.start)
        except Exception as exc:
            error = f"the agents did not start: {describe_error(exc)}"
            logger.exception("the agents did not start")
            return
        finally:
            if error is None:  # its place taken before the first run (see `watch`)
                self.events.reader.start(self.engine.ledger)
                await self.events.reader.in_place(_STREAM_PLACE_S)
            self.executor.settled(error)  # runs waiting to start go on, or fail with it
        self._ready.set()
        await self._orphans.close()

    @property
    def startup_error(self) -> str | None:
        """Why the agents did not start (None: they did, or are starting)."""
        return self.executor.startup_error

    def drain(self) -> asyncio.Task[None]:
        """Stop taking work, let runs in flight finish within the grace, interrupt the rest.

        Interrupted runs are recorded like any other: their state, their spans so far and their
        events up to `run_finished` (which their followers receive). Called on SIGTERM while
        the HTTP server still serves event streams, and by `stop`; the first call does it.
        """
        self.executor.stopping = True
        if self._draining is None:
            limits = self.limits
            drained = self.executor.drain(limits.shutdown_grace_s, limits.wrap_up_s)
            self._draining = asyncio.get_running_loop().create_task(drained)
        return self._draining

    async def stop(self) -> None:
        """Drain (see `drain`), then stop; what could not wrap up is marked interrupted."""
        await asyncio.shield(self.drain())
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.executor.stop()
        await self.events.close()
        await self.versions.close()
        if self.executor.hands_over:  # the next instance (this one, or another) resumes them
            left = await self.store.leases.hand_over(self.owner)
            if left:
                logger.warning("stopping: %d runs left for the next instance to resume", len(left))
        else:
            await self.store.leases.interrupt_owned(self.owner, STOPPED)
        self.engine.close()  # before this process leaves Ray

    @property
    def ready(self) -> bool:
        """Whether the agents have started (runs wait for it)."""
        return self._ready.is_set()

    async def roll(self, system: AgentSystem) -> tuple[RunningVersion, RunningVersion | None]:
        """Start a new version of the team beside the running ones; new runs go to it.

        Runs in flight (waiting for a person, or resumed, included) finish on the version they
        started on, whose agents stop once it holds none. Returns the version now current and
        the one it replaced (None: `system` is the current version; nothing changed).

        Raises:
            NotReady: the service is stopping, or its first version has not started.
            VersionRefused: see `Versions.roll`.
        """
        self.executor.refuse_new()
        if not self.ready:
            raise NotReady("the agents are starting: send the new version once they are up")
        return await self.versions.roll(system)

    # Runs ----------------------------------------------------------------------------------

    async def submit(
        self,
        request: Submission,
        *,
        idempotency_key: str | None = None,
        caller: Access = LOCAL,
    ) -> tuple[StoredRun, bool]:
        """Accept a run, or find the one this idempotency key made; say whether it is new.

        The run is the caller's tenant's, submitted by the caller; its key is the caller's own.

        Raises:
            IdempotencyConflict: the key was used with a different request.
            Overloaded: too many runs in flight and queued.
            NotReady: the service is stopping, or its agents did not start.
            InvalidInput: the input does not fit the entry agent's `input_schema`.
        """
        request = replace(request, tenant=caller.tenant, submitted_by=caller.who)
        # Before anything keeps the task (its fingerprint included): what an input guardrail
        # blocks is never written, not even to be taken out again.
        request = await self.engine.screen(request)
        if problems := self.engine.input_problems(request.agent, request.input):
            raise InvalidInput(request.agent or self.engine.system.entry, problems)
        scoped = caller.own(idempotency_key) if idempotency_key else None
        if scoped is not None:
            existing = await self.store.by_idempotency_key(scoped)
            if existing is not None:
                return _replay(existing, request), False
        await self._check_spending(request)
        await self._check_gates(request)
        with self._counting_refusals():
            try:
                return await self.executor.accept(request, idempotency_key=scoped), True
            except DuplicateIdempotencyKey:
                # A concurrent twin got there first: it is the run.
                existing = await self.store.by_idempotency_key(scoped or "")
                if existing is None:
                    raise
                return _replay(existing, request), False

    async def _check_spending(self, request: Submission) -> None:
        """Refuse a run whose tenant or key spent its daily cap (it could not make a call)."""
        caps = self.executor.spending.caps(request.tenant, request.submitted_by)
        if not caps or not self.ready:
            return
        reached = await self.engine.ledger.spend_over(caps)
        if reached is not None:
            if self.metrics is not None:
                self.metrics.refused(SpendingCapReached.code)
            raise SpendingCapReached(reached, _seconds_to_next_utc_day())

    async def _check_gates(self, request: Submission) -> None:
        """Refuse a run whose first model call could not pass its gate before its deadline.

        The provider's window is spent, or the provider said to wait that long.
        """
        gates = self.engine.pool.gates if self.ready else None
        if gates is None:
            return
        entry, _ = self.engine.choose_entry(request.task, request.agent)
        deadline = request.deadline_s or self.engine.system.config.limits.deadline_s
        waits = []
        for model in self.engine.system.agent(entry).model.every():
            free = await gates.free_in(model.name)
            if free is None:
                return  # a model no gate holds answers now
            waits.append(free)
        wait, why, gate = min(waits)
        if wait > deadline:
            if self.metrics is not None:
                self.metrics.refused(ProviderGateClosed.code)
            raise ProviderGateClosed(
                f"provider gate {gate}: {why}: {entry}'s first model call could not be made "
                f"within the run's deadline ({deadline:g}s)",
                wait,
            )

    @contextlib.contextmanager
    def _counting_refusals(self) -> Iterator[None]:
        """Count a submission the admission bounds refuse (`overloaded`)."""
        try:
            yield
        except Overloaded as exc:
            if self.metrics is not None:
                self.metrics.refused(exc.code)
            raise

    async def following(self, run_id: str, viewer: Access = LOCAL) -> StoredRun:
        """A run to follow, or `RunNotFound` (also when it is not the viewer's to see).

        As accepted while it is in flight here; else as stored (a run the retention policy
        removed is not found, whatever this instance still holds of it), or, with the store
        away, as accepted if the stream kept its every event.
        """
        run = self.executor.accepted.get(run_id)
        if run is not None and run_id in self.executor.tasks:
            return _seen_by(viewer, run)
        try:
            return await self.get(run_id, viewer)
        except Exception as exc:
            if run is None or not store_unavailable(exc) or not self.events.reader.complete(run_id):
                raise
            return _seen_by(viewer, run)

    async def get(self, run_id: str, viewer: Access = LOCAL) -> StoredRun:
        """A stored run, or `RunNotFound` (also when it is another tenant's: no existence leak)."""
        return _seen_by(viewer, await self.executor.get(run_id, viewer.tenant_filter))

    async def list_runs(
        self,
        *,
        status: str | Collection[str] | None = None,
        agent: str | None = None,
        thread_id: str | None = None,
        changed_after: float | None = None,
        viewer: Access = LOCAL,
        limit: int,
        offset: int = 0,
    ) -> RunPage:
        """Stored runs the viewer may see, newest first, filtered as `RunStore.list` says."""
        return await self.store.list(
            status=status,
            agent=agent,
            thread_id=thread_id,
            changed_after=changed_after,
            tenant=viewer.tenant_filter,
            limit=limit,
            offset=offset,
        )

    def caps(self, tenant: str, who: str | None) -> tuple[SpendCap, ...]:
        """The daily spending caps a run of `tenant` submitted by `who` would be held to now."""
        return self.executor.spending.caps(tenant, who)

    async def spending(self, day: str, tenant: str | None) -> list[dict[str, Any]]:
        """A UTC day's spending (of `tenant`; None: every tenant's), as the ledger summed it.

        One row per tenant, key, agent and model.
        """
        return await self.store.spending(day, tenant)

    async def cancel(self, run_id: str, viewer: Access = LOCAL) -> StoredRun:
        """Cancel a run wherever it is: queued or running here, or owned by another instance.

        Another instance cancels it when it next renews its lease. A finished run stays as it is.
        """
        run = await self.get(run_id, viewer)
        if run.finished:
            return run
        here = self.executor.cancel(run.id, viewer.who)
        await self.store.leases.request_cancel(run.id, viewer.who, ask_owner=not here)
        return await self.get(run.id)


def _seconds_to_next_utc_day() -> float:
    return 86400 - time.time() % 86400


def _seen_by(viewer: Access, run: StoredRun) -> StoredRun:
    if not viewer.sees(run.tenant):
        raise RunNotFound(run.id)
    return run


def _replay(existing: StoredRun, request: Submission) -> StoredRun:
    if existing.request_hash != request.fingerprint():
        raise IdempotencyConflict(
            "this Idempotency-Key was used with a different request body",
            run_id=existing.id,
        )
    return existing
