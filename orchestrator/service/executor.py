"""Executing a service's runs: in the background, within the concurrency bound, recorded.

Each run is recorded before it starts (`running`) and when it ends (its result and spans), then
its last events; whoever sees `run_finished` finds the run recorded. New runs, resumed runs,
replays and forks all execute here; `RunService` and `DurableRuns` hold the one executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections import OrderedDict
from functools import partial
from typing import TYPE_CHECKING

from agents.core.errors import describe_error
from agents.core.events import RunFinished
from agents.core.messages import RunStatus
from agents.core.store_faults import store_unavailable
from agents.ledger import new_run_id
from agents.ray.wire import Closed
from orchestrator.access import SpendPolicy
from orchestrator.engine import Engine, Execution, Lineage, RunResult, Submission
from orchestrator.engine.results import final_event
from orchestrator.errors import AgentLeftDown, NotReady, RunNotFound
from orchestrator.service.admission import Admission
from orchestrator.service.desk import Desk
from orchestrator.service.pending_writes import PendingWrites
from orchestrator.service.run_events import RunEvents
from orchestrator.service.threads import absorb_state, turns_before
from orchestrator.service.versions import RunningVersion, Versions
from orchestrator.store import RunMeta, RunStore, StoredRun, end_values

if TYPE_CHECKING:  # (loaded by `baton serve` only: OpenTelemetry's metrics, prometheus_client)
    from orchestrator.service.metrics import ServiceMetrics

__all__ = ["STOPPED", "STOPPING", "RunExecutor"]

logger = logging.getLogger(__name__)

# Why runs end that the service's stop cut off, and why it takes no new ones meanwhile.
STOPPED = "the service stopped while the run was in flight"
STOPPING = "the service is stopping"
_CANCELLED = (RunStatus.CANCELLED, "cancelled before it started")


# Runs accepted here whose records followers get without reading the store (`accepted`).
_KEEP_ACCEPTED = 256

# How often a turn waiting for the thread's earlier turns looks again (one run by another
# instance; those run here are awaited).
_TURN_POLL_S = 0.5


class RunExecutor:
    """Runs a service's runs in the background and records them.

    Args:
        versions: the versions of the team running here (a run executes on the one it
            started on; new runs on the newest).
        store: the run store.
        owner: names this service instance in the store.
        events: the followers' events (a run's events are watched from its acceptance).
        desk: the waits for a person (their runs' stored status follows them).
        pending_writes: store writes kept while the store is unavailable.
        admission: the bound on runs in flight and queued.
        ready: set once the agents (and so the ledger) are up.
        max_concurrent_runs: runs executing at once (the others wait, queued).
        hands_over: a run cut off by the service's stop is left for the next instance to
            resume from its step log (`on_interrupt: resume`), not ended `interrupted`.
    """

    def __init__(
        self,
        versions: Versions,
        store: RunStore,
        *,
        owner: str,
        events: RunEvents,
        desk: Desk,
        pending_writes: PendingWrites,
        admission: Admission,
        ready: asyncio.Event,
        max_concurrent_runs: int,
        spending: SpendPolicy | None = None,
        metrics: ServiceMetrics | None = None,
        hands_over: bool = False,
    ) -> None:
        self.versions = versions
        self.store = store
        self.owner = owner
        self.events = events
        self.desk = desk
        self.pending_writes = pending_writes
        self.admission = admission
        self.spending = spending or SpendPolicy()
        self.metrics = metrics
        self.hands_over = hands_over
        self._ready = ready
        self.tasks: dict[str, asyncio.Task[None]] = {}
        # Runs accepted here, as recorded, oldest first (the newest `_KEEP_ACCEPTED`).
        self.accepted: OrderedDict[str, StoredRun] = OrderedDict()
        self._running: set[str] = set()
        self._cancel_asked: set[str] = set()  # cancelled as their start was being recorded
        self._taken: set[str] = set()  # taken over by another instance: stopped, not ended, here
        self._slots = asyncio.Semaphore(max_concurrent_runs)
        self._settled = asyncio.Event()  # the agents started, or failed to
        self.startup_error: str | None = None
        self.stopping = False

    def settled(self, error: str | None = None) -> None:
        """The agents have started (or failed to, for `error`): queued runs go on (or fail)."""
        self.startup_error = error
        self._settled.set()

    def refuse_new(self) -> None:
        """Raise `NotReady` if this service takes no new runs (stopping, or no agents)."""
        if self.stopping:
            raise NotReady(STOPPING)
        if self.startup_error:
            raise NotReady(self.startup_error)

    async def get(self, run_id: str, tenant: str | None = None) -> StoredRun:
        """A stored run by its id, or by a prefix that names one run (as git's short hashes).

        The UI shows 12 characters; see `RunStore.find` (`tenant`: the prefix names one of its
        runs).

        Raises:
            RunNotFound: no run has this id, or an id beginning with it.
            AmbiguousRunId: several do.
        """
        run = await self.store.find(run_id, tenant)
        if run is None:
            raise RunNotFound(run_id)
        return run

    async def accept(
        self,
        request: Submission,
        lineage: Lineage | None = None,
        *,
        version: str | None = None,
        idempotency_key: str | None = None,
    ) -> StoredRun:
        """Record a new run (owned here, within the admission bounds) and start it.

        It runs on `version` of the team (None: the newest; see `Versions.get`); `lineage`:
        a replay or a fork of another run. A record the store may have made though its write
        failed is looked for once the store is back, and the run started if it is there.

        Raises:
            NotReady: the service is stopping, or its agents did not start.
            AgentLeftDown: its entry agent's host is left down after a crash loop.
            Overloaded: too many runs in flight and queued.
            DuplicateIdempotencyKey: a concurrent twin holds the key.
        """
        self.refuse_new()
        running = self.versions.get(version)
        if down := await running.engine.left_down(request.agent):
            raise AgentLeftDown(*down)
        # Its id maps to a shard of the ledger: that of its daily caps, when it has some (a run
        # taken before the agents are up, whose shards are not known yet, is placed by its id).
        caps = self.spending.caps(request.tenant, request.submitted_by)
        meta = RunMeta(
            run_id=new_run_id(running.engine.ledger_shards, caps),
            system=running.system.config.name,
            config=running.public_config,
            version=running.version,
            owner=self.owner,
            idempotency_key=idempotency_key,
            lineage=lineage or Lineage(),
        )
        with self.admission.place():
            try:
                run = await self.store.add(request, meta)
            except Exception as exc:
                if not store_unavailable(exc):
                    raise
                # The record may have been made all the same (its commit reached the database,
                # its answer did not): look, now or once the store answers; if it is there, it
                # runs (a client retrying with its idempotency key finds it).
                look = partial(self._run_if_recorded, meta.run_id, request, lineage)
                await self.pending_writes.write(f"the submission of run {meta.run_id}", look)
                confirmed = self.accepted.get(meta.run_id)
                if confirmed is None:
                    raise
                return confirmed
            self._accept(run, request, lineage)
        return run

    def _accept(self, run: StoredRun, request: Submission, lineage: Lineage | None) -> None:
        self.start(run.id, request, lineage, version=run.version)
        self.accepted[run.id] = run
        while len(self.accepted) > _KEEP_ACCEPTED:
            self.accepted.popitem(last=False)

    async def _run_if_recorded(
        self, run_id: str, request: Submission, lineage: Lineage | None
    ) -> None:
        """Start a run whose record's writing was reported failed, if it was made after all."""
        stored = await self.store.get(run_id)
        if stored is not None and stored.status == RunStatus.QUEUED:
            if run_id not in self.tasks:
                logger.warning("run %s was recorded though its store write failed: started", run_id)
                self._accept(stored, request, lineage)

    @property
    def running(self) -> set[str]:
        """The runs executing here now (the others of `tasks` wait for a slot)."""
        return self._running

    def start(
        self,
        run_id: str,
        request: Submission,
        lineage: Lineage | None = None,
        *,
        version: str | None = None,
    ) -> None:
        """Execute a run in the background (a new one: its events are watched from now on).

        On `version` of the team, which it holds until it ends (see `Versions.hold`).
        """
        if lineage is None or not lineage.epoch:
            # Its events are kept from its acceptance: a client that follows it before it
            # starts (as most do, at once) gets them from the stream, asking the ledger
            # nothing. (A resumed run is watched as it starts: until then its followers ask
            # the ledger for the events of its earlier life.)
            self.events.reader.watch(run_id)
        work = self._execute(run_id, request, lineage, self.versions.hold(run_id, version))
        # A fresh context: the run is a trace of its own, not part of this request's.
        self.tasks[run_id] = asyncio.create_task(work, context=contextvars.Context())

    def cancel(self, run_id: str, who: str | None = None) -> bool:
        """Cancel a run executing (or queued) here, asked by `who`; False if it is not here."""
        task = self.tasks.get(run_id)
        if task is None:
            return False
        self._stop_here(run_id, task, who)
        return True

    def let_go(self, run_id: str) -> None:
        """Stop this copy of a run another instance took over; nothing of its end is recorded.

        (This instance did not renew its lease in time: paused, or cut off from the store.
        The run lives on where it was taken over.)
        """
        task = self.tasks.get(run_id)
        if task is not None:
            self._taken.add(run_id)
            self._stop_here(run_id, task, None)

    def _stop_here(self, run_id: str, task: asyncio.Task[None], who: str | None) -> None:
        if run_id in self._running:
            # Every agent on it stops; before the engine has it, `_run` ends it (`_cancel_asked`).
            running = self.versions.of_run(run_id)
            if running is None or not running.engine.cancel(run_id, who):
                self._cancel_asked.add(run_id)
        else:
            task.cancel()  # still queued

    async def drain(self, grace_s: float, wrap_up_s: float) -> None:
        """Let runs in flight finish within `grace_s`, then interrupt the rest.

        Interrupted runs have `wrap_up_s` to record themselves (state, spans, events).
        """
        self.stopping = True
        if self.tasks:
            logger.info(
                "stopping: %d runs in flight, waiting up to %.0f s", len(self.tasks), grace_s
            )
            await asyncio.wait(list(self.tasks.values()), timeout=grace_s)
        for run_id in list(self.tasks):
            self.cancel(run_id)  # recorded as interrupted by `_run` or `_execute`
        if self.tasks:
            await asyncio.wait(list(self.tasks.values()), timeout=wrap_up_s)

    async def stop(self) -> None:
        """Cancel what is left and wait for it."""
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _execute(
        self,
        run_id: str,
        request: Submission,
        lineage: Lineage | None,
        running: RunningVersion,
    ) -> None:
        began: float | None = None
        try:
            if request.thread_id is not None and request.waits_for_turns:  # after those before it
                await self._after_earlier_turns(run_id, request.thread_id)
            async with self._slots:
                # Timed from its place, not its acceptance: a mean that counted queueing would
                # grow with every burst, and the `Retry-After` it gives with it.
                began = time.monotonic()
                await self._settled.wait()
                if self.startup_error:
                    await self._end_unstarted(run_id, self.startup_error)
                    return
                self._running.add(run_id)
                await self._run(run_id, request, lineage, running.engine)
        except asyncio.CancelledError:
            lives_on = run_id in self._taken or (self.stopping and self.hands_over)
            if run_id not in self._running and not lives_on:
                await self._end_unstarted(run_id)  # cancelled while queued
        except Exception:  # recording failed: the store is unreachable, say; keep serving
            logger.exception("run %s could not be recorded", run_id)
        finally:
            self._running.discard(run_id)
            self._cancel_asked.discard(run_id)
            self._taken.discard(run_id)
            self.tasks.pop(run_id, None)
            self.versions.release(run_id)
            if began is not None:
                self.admission.ran(time.monotonic() - began)

    async def _run(
        self, run_id: str, request: Submission, lineage: Lineage | None, engine: Engine
    ) -> None:
        record = self.pending_writes.write
        # (On the version it runs on: a run resumed on another version is finished by that one.)
        start = partial(self.store.start, run_id, engine.system.version)
        await record(f"the start of run {run_id}", start)
        # Read before the check below: between it and the engine's taking the run, nothing
        # may wait (a cancellation then would find neither).
        turns = await turns_before(self.store, run_id, request, engine.system)
        if run_id in self._cancel_asked:  # while its start (or its thread) was being read
            if run_id not in self._taken:
                await self._end_unstarted(run_id)
            return
        self.events.reader.watch(run_id)  # (resumed, or accepted before the stream's place)
        result: RunResult | None = None
        error: str | None = None
        handed_over = False
        tracker = (
            asyncio.create_task(self.desk.track(run_id)) if engine.system.waits_for_people else None
        )
        try:
            execution = Execution(
                run_id,
                lineage or Lineage(),
                turns,
                self.spending.caps(request.tenant, request.submitted_by),
            )
            result = await engine.run(request, execution, finish=False)
            taken = run_id in self._taken
            if (self.stopping or taken) and result.status == RunStatus.CANCELLED:
                # It goes on where it was taken over, or the next instance resumes it from
                # its step log. (The ledger refuses to release a newer life of it.)
                if taken or self.hands_over:
                    handed_over = True
                    await _stop(tracker)
                    await engine.release(run_id)
                    if taken:
                        logger.warning(
                            "run %s: this copy stopped; the run goes on where it was taken over",
                            run_id,
                        )
                    else:
                        logger.info("run %s: left for the next instance to resume", run_id)
                    return
                result = result.model_copy(
                    update={"status": RunStatus.INTERRUPTED, "error": STOPPED}
                )
        except Exception as exc:
            error = describe_error(exc)
            logger.exception("run %s failed", run_id)
            await record(f"run {run_id}", partial(self.store.fail, run_id, error))
        finally:
            if not handed_over:
                await self._ended(engine, run_id, request, result, error, tracker)

    async def _ended(
        self,
        engine: Engine,
        run_id: str,
        request: Submission,
        result: RunResult | None,
        error: str | None,
        tracker: asyncio.Task[None] | None,
    ) -> None:
        """Record how a run ended and announce it (`_close`), with its events."""
        # (The tracker may outlive the final record by a moment: `set_waiting` never touches
        # a finished run.)
        await _stop(tracker)
        entry = result.entry_agent if result else (request.agent or engine.system.entry)
        final = final_event(result, entry, error)
        if self.metrics is not None:  # (before its end is announced: a follower finds it)
            self.metrics.ended(final.status.value, request.tenant, final.usage)
        if result is not None and result.tree is not None and request.thread_id is not None:
            # (before the turn is recorded as ended: the next turn begins with it)
            try:
                changes, spec = result.tree.state_changes, engine.system.config.state
                await absorb_state(self.store, request.thread_id, changes, spec)
            except Exception:  # the store: the turn's record matters more
                logger.exception("run %s: its thread's state not kept", run_id)
        closed = await self._close(engine, run_id, result, final)
        events = closed.events
        await self.pending_writes.write(
            f"the events of run {run_id}", partial(self.store.add_events, run_id, events)
        )

    async def _after_earlier_turns(self, run_id: str, thread: str) -> None:
        """Wait until every run of the thread made before this one has ended."""
        while True:
            states = await self.store.threads.states(thread) or []
            ids = [i for i, _ in states]
            before = states[: ids.index(run_id)] if run_id in ids else states
            earlier = [i for i, ended in before if not ended]
            if not earlier:
                return
            held = [self.tasks[i] for i in earlier if i in self.tasks]
            if held:  # ended here: no need to ask the store until one has
                await asyncio.wait(held, timeout=_TURN_POLL_S, return_when=asyncio.FIRST_COMPLETED)
            else:  # run by another instance
                await asyncio.sleep(_TURN_POLL_S)

    async def _close(
        self, engine: Engine, run_id: str, result: RunResult | None, final: RunFinished
    ) -> Closed:
        """Record how the run ended, then announce it (`run_finished`), in that order.

        Whoever sees `run_finished` finds the run recorded (unless the store is unavailable:
        then it is recorded once the store is back). With a run store the ledger reaches, the
        ledger records it (its row and spans) in the same call that closes it; an in-memory
        store is recorded here, once the run has settled, before the ledger closes it.
        """
        record = self.pending_writes.write
        if result is None:  # the run broke off: recorded as failed already
            return await engine.finish(run_id, final)
        if not engine.logs_steps:
            spans = await engine.settle(run_id)
            await record(
                f"run {run_id}",
                partial(self.store.finish, result, spans),
                partial(self.store.fail, run_id, "the run store refused the run's record"),
            )
            return await engine.finish(run_id, final)
        closed = await engine.finish(run_id, final, record=end_values(result))
        if closed.superseded:
            logger.warning(
                "run %s: taken over by another instance; this copy of it ended %s, unrecorded",
                run_id,
                result.status.value,
            )
        elif not closed.recorded:  # the store did not take it: kept, made again once it is back
            await record(
                f"run {run_id}",
                partial(self.store.finish, result, closed.spans),
                partial(self.store.fail, run_id, "the run store refused the run's record"),
            )
        return closed

    async def _end_unstarted(self, run_id: str, failure: str | None = None) -> None:
        """End a run the engine never had: failed (`failure`), else cancelled or interrupted."""
        status, reason = (RunStatus.FAILED, failure or "")
        if not failure:
            status, reason = (RunStatus.INTERRUPTED, STOPPED) if self.stopping else _CANCELLED
        await self.store.end(run_id, status, reason)
        if self._ready.is_set():
            event = RunFinished(status=status, error=reason)
            closed = await self.versions.ledger.finish(run_id, event)
            await self.store.add_events(run_id, closed.events)


async def _stop(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
