"""Which service instance runs what: leases, interruptions, cancellations, take-overs.

Several instances may share a store. Each run names its owner, which renews a lease on it; a
run whose owner stopped renewing is interrupted, or taken over and resumed by exactly one other
instance (the conditional update decides which).
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.ext.asyncio import async_sessionmaker

from agents.core.events import RunFinished
from agents.core.messages import RunStatus
from orchestrator.store.batch import GroupCommit
from orchestrator.store.records import StoredRun
from orchestrator.store.tables import RUNS_TABLE, EventRow, RunRow, SpanRow

__all__ = ["UPDATE_RUN", "Leases"]

_UNFINISHED = RunStatus.unfinished()
# Runs that `reopen` resumes on request: cut off, or failed (a lost part, say).
_RESUMABLE = (RunStatus.INTERRUPTED, RunStatus.FAILED)
# The type of a run's last event (a resumed run's earlier end is no longer its end).
_RUN_FINISHED = RunFinished.model_fields["type"].default
# One run's columns, set by group commit: rows are {"run_id_": id, column: value, ...}.
UPDATE_RUN = update(RUNS_TABLE).where(RUNS_TABLE.c.id == bindparam("run_id_"))


class Leases:
    """Which instance owns which run: the run store's queries about owners (`RunStore.leases`).

    Args:
        sessions: the store's sessions.
        writes: the store's group commit (a cancellation request is one write among others).
    """

    def __init__(self, sessions: async_sessionmaker[Any], writes: GroupCommit) -> None:
        self._sessions = sessions
        self._writes = writes

    async def renew(self, owner: str, run_ids: list[str]) -> list[str]:
        """Renew `owner`'s lease on its runs in flight; return those another instance owns now.

        (One took them over while `owner` did not renew in time: a pause past the lease.)
        """
        if not run_ids:
            return []
        async with self._sessions.begin() as session:
            await session.execute(
                update(RunRow)
                .where(RunRow.id.in_(run_ids), RunRow.owner == owner)
                .values(heartbeat_at=time.time())
            )
            taken = await session.scalars(
                select(RunRow.id).where(RunRow.id.in_(run_ids), RunRow.owner != owner)
            )
            return list(taken)

    async def interrupt_owned(self, owner: str, reason: str) -> list[str]:
        """Mark `owner`'s unfinished runs `interrupted` (it restarted); return their ids."""
        return await self._interrupt((RunRow.owner == owner,), reason)

    async def hand_over(self, owner: str) -> list[str]:
        """Leave `owner`'s unfinished runs to whichever instance comes next (it stops).

        Queued again with the lease expired: this instance when it restarts, or any other at
        once, takes each over and resumes it from its step log.
        """
        async with self._sessions.begin() as session:
            ids = list(
                await session.scalars(
                    select(RunRow.id).where(RunRow.status.in_(_UNFINISHED), RunRow.owner == owner)
                )
            )
            if ids:
                await session.execute(
                    update(RunRow)
                    .where(RunRow.id.in_(ids), RunRow.status.in_(_UNFINISHED))
                    .values(status=RunStatus.QUEUED, heartbeat_at=0.0)
                )
            return ids

    async def interrupt_expired(self, lease_s: float, reason: str) -> list[str]:
        """Mark unfinished runs whose owner has not renewed its lease for `lease_s` seconds."""
        stale = time.time() - lease_s
        return await self._interrupt(
            (RunRow.owner.is_not(None), RunRow.heartbeat_at < stale), reason
        )

    async def interrupt_unfinished(self, reason: str) -> int:
        """Mark every queued or running run as `interrupted`; return how many."""
        return len(await self._interrupt((), reason))

    async def _interrupt(self, where: tuple[Any, ...], reason: str) -> list[str]:
        async with self._sessions.begin() as session:
            ids = list(
                await session.scalars(
                    select(RunRow.id).where(RunRow.status.in_(_UNFINISHED), *where)
                )
            )
            if ids:
                await session.execute(
                    update(RunRow)
                    .where(RunRow.id.in_(ids), RunRow.status.in_(_UNFINISHED))
                    .values(status=RunStatus.INTERRUPTED, error=reason, finished_at=time.time())
                )
            return ids

    async def request_cancel(self, run_id: str, who: str | None, *, ask_owner: bool) -> None:
        """Record who cancels the run; with `ask_owner`, ask its owner to.

        The owner (the run is not here) looks when it renews its lease.
        """
        asked = {"cancel_requested": True} if ask_owner else {}
        await self._set(run_id, cancelled_by=who, **asked)

    async def cancel_requests(self, owner: str) -> list[tuple[str, str | None]]:
        """Unfinished runs of `owner` that someone asked to cancel, and who asked."""
        async with self._sessions() as session:
            rows = await session.execute(
                select(RunRow.id, RunRow.cancelled_by).where(
                    RunRow.owner == owner,
                    RunRow.cancel_requested.is_(True),
                    RunRow.status.in_(_UNFINISHED),
                )
            )
            return [(run_id, who) for run_id, who in rows]

    async def take_over(
        self, owner: str, *, lease_s: float | None = None, restarted: bool = False
    ) -> list[StoredRun]:
        """Claim unfinished runs to resume them; return those this instance got.

        `restarted`: the runs `owner` itself left (it restarted). `lease_s`: runs of other
        instances that have not renewed their lease for that long. Each claimed run is queued
        again under `owner`, its resume count (epoch) one higher; of several instances trying
        at once, exactly one gets a run.
        """
        if restarted:
            where: tuple[Any, ...] = (RunRow.owner == owner,)
        elif lease_s is not None:
            stale = time.time() - lease_s
            where = (RunRow.owner.is_not(None), RunRow.owner != owner, RunRow.heartbeat_at < stale)
        else:
            return []
        claimed: list[StoredRun] = []
        async with self._sessions.begin() as session:
            found = (
                await session.execute(
                    select(RunRow.id, RunRow.owner, RunRow.resumes).where(
                        RunRow.status.in_(_UNFINISHED), *where
                    )
                )
            ).all()
        for run_id, was, resumes in found:
            run = await self._claim(
                run_id, owner, (RunRow.owner == was, RunRow.status.in_(_UNFINISHED)), resumes
            )
            if run is not None:
                claimed.append(run)
        return claimed

    async def reopen(self, run_id: str, owner: str, lease_s: float) -> StoredRun | None:
        """Queue a run again under `owner`, to resume it.

        It must be interrupted or failed, or unfinished with a lease not renewed for `lease_s`
        (its service died). None: it is not (or another instance reopened it first).
        """
        stale = time.time() - lease_s
        async with self._sessions() as session:
            row = await session.get(RunRow, run_id)
            if row is None:
                return None
            lost = row.status in _UNFINISHED and (row.heartbeat_at or 0) < stale
            if row.status not in _RESUMABLE and not lost:
                return None
            status, resumes = row.status, row.resumes
        return await self._claim(run_id, owner, (RunRow.status == status,), resumes)

    async def _claim(
        self, run_id: str, owner: str, where: tuple[Any, ...], resumes: int
    ) -> StoredRun | None:
        async with self._sessions.begin() as session:
            done = await session.execute(
                update(RunRow)
                .where(RunRow.id == run_id, RunRow.resumes == resumes, *where)
                .values(
                    owner=owner,
                    heartbeat_at=time.time(),
                    status=RunStatus.QUEUED,
                    resumes=resumes + 1,
                    error=None,
                    finished_at=None,
                    cancel_requested=False,
                )
            )
            if done.rowcount != 1:
                return None
            # The resumed life records the whole trace again (reused steps marked so), and its
            # events go on after the last one: an earlier end is no longer the end.
            await session.execute(delete(SpanRow).where(SpanRow.run_id == run_id))
            await session.execute(
                delete(EventRow).where(EventRow.run_id == run_id, EventRow.type == _RUN_FINISHED)
            )
            row = await session.get(RunRow, run_id)
            return StoredRun.model_validate(row) if row is not None else None

    async def _set(self, run_id: str, **values: Any) -> None:
        await self._writes.write((UPDATE_RUN, [{"run_id_": run_id, **values}]))
