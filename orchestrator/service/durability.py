"""Durable runs: resumed from their step log, taken over from a lost instance, replayed, forked."""

from __future__ import annotations

import logging
from dataclasses import replace

from orchestrator.access import LOCAL, Access
from orchestrator.engine import Lineage, Submission
from orchestrator.errors import NotReplayable, NotResumable, RunNotFound
from orchestrator.service.executor import RunExecutor
from orchestrator.store import ForkPoint, RunStore, StoredRun
from tracing.attributes import BATON_STEP
from tracing.compare import step_label

__all__ = ["DurableRuns"]

logger = logging.getLogger(__name__)


class DurableRuns:
    """Runs carried on from their step log (`agents.core.steps`).

    Args:
        executor: executes them, as it does every run of the service.
        lease_s: how long an instance's lease on its runs lasts (a resumed run takes one).
        adopts_lost_runs: whether this instance resumes the runs of instances that stopped
            renewing their leases.
    """

    def __init__(self, executor: RunExecutor, *, lease_s: float, adopts_lost_runs: bool) -> None:
        self._executor = executor
        self._versions = executor.versions
        self._store: RunStore = executor.store
        self._lease_s = lease_s
        self._adopts = adopts_lost_runs

    async def replay(
        self,
        run_id: str,
        *,
        fork: bool = False,
        from_span: str | None = None,
        version: str | None = None,
        caller: Access = LOCAL,
    ) -> StoredRun:
        """Execute a finished run again from its step log, as a new run linked to it.

        No model call and no tool call is made: every step comes from the record, so the
        new run shows whether the record reproduces the run (same tree, same diagram). A fork
        takes the record for as long as its requests are the same, then goes on live: with
        this service's config changed since (an instruction, a model), it is the run as it
        would have gone from the first step the change touches. `from_span` (a fork) names a
        span of the run (a model call, a tool call, an agent): live from that step on. The new
        run is the original's tenant's, submitted by `caller`.

        It runs on `version` of the team if given; else a replay on the original's version if
        it still runs here, and a fork on the newest (see `Versions`).

        Raises:
            NotReplayable: the run has not ended, or runs keep no step log.
            VersionNotRunning: `version` does not run here.
            Overloaded: too many runs in flight and queued.
        """
        original = await self._executor.get(run_id)
        if not caller.sees(original.tenant):
            raise RunNotFound(run_id)
        run_id = original.id  # (it may have been named by a prefix)
        if not self._versions.engine.logs_steps:
            raise NotReplayable("this service's runs keep no step log (an in-memory store)")
        if not original.finished:
            raise NotReplayable(
                f"run {run_id!r} is {original.status.value}: replay a run that has ended",
                run_id=run_id,
            )
        if version is None and not fork and original.version in self._versions.names():
            version = original.version
        fork_from = await self._step_of(run_id, from_span) if from_span else None
        request = Submission.stored(
            original.task,
            original.options,
            agent=original.entry_agent,
            tenant=original.tenant,
            submitted_by=caller.who,
        )
        if request.thread_id is not None:  # a turn: replayed with what it saw
            request = replace(request, thread_id=None, history_of=run_id)
        lineage = Lineage(replay_of=run_id, fork=fork, fork_from=fork_from)
        return await self._executor.accept(request, lineage, version=version)

    async def _step_of(self, run_id: str, span_id: str) -> ForkPoint:
        """The step a span of a run stands for (its place in the step log): a fork point."""
        spans = await self._store.spans(run_id)
        span = next((s for s in spans if s["span_id"] == span_id), None)
        step = str(span["attributes"].get(BATON_STEP, "")) if span is not None else ""
        if not step.partition("/")[2]:
            raise NotReplayable(
                f"span {span_id!r} of run {run_id!r} is not a step of the run's record (fork "
                "from a model call, a tool call or an agent's invocation)",
                run_id=run_id,
                span_id=span_id,
            )
        return ForkPoint(span_id=span_id, step=step, label=step_label(spans, span_id))

    async def resume(self, run_id: str) -> StoredRun:
        """Resume an interrupted or failed run here (or one a dead service left), from its log.

        Raises:
            NotResumable: the run is in flight or ended otherwise, or runs keep no step log.
        """
        run = await self._executor.get(run_id)
        run_id = run.id  # (it may have been named by a prefix)
        if not self._versions.engine.logs_steps:
            raise NotResumable("this service's runs keep no step log (an in-memory store)")
        self._executor.refuse_new()
        reopened = await self._store.leases.reopen(run_id, self._executor.owner, self._lease_s)
        if reopened is None:
            raise NotResumable(
                f"run {run_id!r} is {run.status.value}: only interrupted or failed runs resume "
                "(or unfinished ones whose service stopped renewing its lease)",
                run_id=run_id,
            )
        self.resume_run(reopened)
        return reopened

    def resume_run(self, run: StoredRun) -> None:
        """Run a reopened run again: its agents take their finished steps from the record."""
        request = Submission.stored(
            run.task, run.options, tenant=run.tenant, submitted_by=run.submitted_by
        )
        lineage = Lineage(
            epoch=run.resumes, replay_of=run.replay_of, fork=run.fork, fork_from=run.fork_from
        )
        self._executor.start(run.id, request, lineage, version=run.version)

    async def take_over_lost(self) -> None:
        """Resume the runs of instances that stopped renewing their leases (one taker each)."""
        if not self._adopts:
            return
        owner = self._executor.owner
        for run in await self._store.leases.take_over(owner, lease_s=self._lease_s):
            logger.warning("resuming run %s of a lost instance", run.id)
            self.resume_run(run)
