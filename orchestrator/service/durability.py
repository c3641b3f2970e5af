"""What the run service does for durable runs: resume them, take over lost ones, replay them."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import uuid
from collections.abc import Coroutine
from typing import Any

from agents.core.steps import step_number
from orchestrator.engine import Engine
from orchestrator.engine.submission import Lineage, Submission
from orchestrator.errors import NotReady, NotReplayable, NotResumable
from orchestrator.service.admission import Admission
from orchestrator.service.feed import EventFeed
from orchestrator.store import RunStore, StoredRun
from tracing.attributes import BATON_STEP

__all__ = ["Durability"]

logger = logging.getLogger(__name__)


class Durability:
    """A part of `RunService`: runs carried on from their step log (`agents.core.steps`)."""

    engine: Engine
    store: RunStore
    feed: EventFeed
    owner: str
    limits: Any  # ServiceLimits
    admission: Admission
    _stopping: bool
    _tasks: dict[str, asyncio.Task[None]]

    async def get(self, run_id: str) -> StoredRun:
        """A stored run (see `RunService.get`)."""
        raise NotImplementedError

    def _execute(
        self,
        run_id: str,
        request: Submission,
        lineage: Lineage | None = None,
    ) -> Coroutine[Any, Any, None]:
        raise NotImplementedError

    async def _add_run(self, run_id: str, request: Submission, **record: Any) -> StoredRun:
        """Record a new run (see `RunService._add_run`)."""
        raise NotImplementedError

    def _start(self, run_id: str, work: Coroutine[Any, Any, None], new: bool = True) -> None:
        if new:
            # Its events are kept from its acceptance: a client that follows it before it
            # starts (as most do, at once) gets them from the stream, asking the ledger
            # nothing. (A resumed run is watched as it starts: until then its followers ask
            # the ledger for the events of its earlier life.)
            self.feed.stream.watch(run_id)
        # A fresh context: the run is a trace of its own, not part of this request's.
        self._tasks[run_id] = asyncio.create_task(work, context=contextvars.Context())

    async def replay(
        self, run_id: str, *, fork: bool = False, from_span: str | None = None
    ) -> StoredRun:
        """Execute a finished run again from its step log, as a new run linked to it.

        No model call and no tool call is made: every step comes from the record, so the
        new run shows whether the record reproduces the run (same tree, same diagram). A fork
        takes the record for as long as its requests are the same, then goes on live: with
        this service's config changed since (an instruction, a model), it is the run as it
        would have gone from the first step the change touches. `from_span` (a fork) names a
        span of the run (a model call, a tool call, an agent): live from that step on.

        Raises:
            NotReplayable: the run has not ended, or runs keep no step log.
            Overloaded: too many runs in flight and queued.
        """
        original = await self.get(run_id)
        if not self.engine.journaled:
            raise NotReplayable("this service's runs keep no step log (an in-memory store)")
        if not original.finished:
            raise NotReplayable(
                f"run {run_id!r} is {original.status.value}: replay a run that has ended",
                run_id=run_id,
            )
        if self._stopping:
            raise NotReady("the service is stopping")
        fork_from = await self._step_of(run_id, from_span) if from_span else None
        options = {**(original.options or {}), "agent": original.entry_agent}
        request = Submission(task=original.task, **options)
        new_id = uuid.uuid4().hex
        with self.admission.place():  # a new run like any other: within the bounds
            run = await self._add_run(new_id, request, replay_of=run_id, fork=fork)
            lineage = Lineage(replay_of=run_id, fork=fork, fork_from=fork_from)
            self._start(new_id, self._execute(new_id, request, lineage))
        return run

    async def _step_of(self, run_id: str, span_id: str) -> tuple[str, int]:
        """The step a span of a run stands for (its invocation and model step): a fork point."""
        spans = {s["span_id"]: s for s in await self.store.spans(run_id)}
        step = str((spans.get(span_id) or {}).get("attributes", {}).get(BATON_STEP, ""))
        invocation, _, key = step.partition("/")
        if not key:
            raise NotReplayable(
                f"span {span_id!r} of run {run_id!r} is not a step of the run's record (fork "
                "from a model call, a tool call or an agent's invocation)",
                run_id=run_id,
                span_id=span_id,
            )
        return invocation, step_number(key)

    async def resume(self, run_id: str) -> StoredRun:
        """Resume an interrupted or failed run here (or one a dead service left), from its log.

        Raises:
            NotResumable: the run is in flight or ended otherwise, or runs keep no step log.
        """
        run = await self.get(run_id)
        if not self.engine.journaled:
            raise NotResumable("this service's runs keep no step log (an in-memory store)")
        if self._stopping:
            raise NotReady("the service is stopping")
        reopened = await self.store.reopen(run_id, self.owner, self.limits.lease_s)
        if reopened is None:
            raise NotResumable(
                f"run {run_id!r} is {run.status.value}: only interrupted or failed runs resume "
                "(or unfinished ones whose service stopped renewing its lease)",
                run_id=run_id,
            )
        self._resume(reopened)
        return reopened

    def _resume(self, run: StoredRun) -> None:
        """Run a reopened run again: its agents take their finished steps from the record."""
        request = Submission(task=run.task, **(run.options or {}))
        lineage = Lineage(epoch=run.resumes, replay_of=run.replay_of, fork=run.fork)
        self._start(run.id, self._execute(run.id, request, lineage), new=False)

    async def _take_over_lost(self) -> None:
        """Resume the runs of instances that stopped renewing their leases (one taker each)."""
        if not self.limits.adopts_lost_runs:
            return
        for run in await self.store.take_over(self.owner, lease_s=self.limits.lease_s):
            logger.warning("resuming run %s of a lost instance", run.id)
            self._resume(run)
