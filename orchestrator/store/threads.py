"""Threads: conversations whose turns are runs (a run's `context_id` names its thread)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, null, or_, select, true, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agents.core.messages import RunStatus
from orchestrator.store.records import StoredRun, answerer
from orchestrator.store.tables import (
    RUNS_TABLE,
    EventRow,
    PushConfigRow,
    RunRow,
    SpanRow,
    StepRow,
    ThreadRow,
)

__all__ = ["StoredThread", "ThreadTable", "TurnRecord"]


@dataclass(frozen=True)
class StoredThread:
    """A thread as stored: its id, when it began, the metadata it was given.

    In a list, its turns in brief too: how many, the last one's time, the first one's task.
    """

    id: str
    created_at: float
    metadata: dict[str, Any]
    tenant: str = "default"
    turn_count: int = 0
    last_turn_at: float | None = None
    first_task: str | None = None
    agent: str | None = None  # the entry agent of turns that name none (`last`, a name)
    state: dict[str, Any] | None = None  # the shared state its next turn begins with
    state_version: int = 0  # how many times it changed


@dataclass(frozen=True)
class TurnRecord:
    """What a later turn sees of an earlier one: asked, how it ended, its delegation tree."""

    id: str
    task: str
    status: RunStatus
    output: str | None
    error: str | None
    tree: dict[str, Any] | None  # read only when asked for (agents with `memory: thread`)


class ThreadTable:
    """The store's threads (`RunStore.threads`)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def create(
        self,
        thread_id: str,
        metadata: dict[str, Any],
        tenant: str = "default",
        agent: str | None = None,
    ) -> StoredThread:
        """Record a new thread."""
        row = ThreadRow(
            id=thread_id, created_at=time.time(), meta=metadata, tenant=tenant, agent=agent
        )
        async with self._sessions.begin() as session:
            session.add(row)
        return StoredThread(thread_id, row.created_at, metadata, tenant, agent=agent)

    async def ensure(self, thread_id: str, tenant: str = "default") -> None:
        """Record the thread if it is not yet (an A2A context met for the first time)."""
        async with self._sessions.begin() as session:
            bind: Any = session.bind
            dialect: Any = postgresql if bind.dialect.name == "postgresql" else sqlite
            await session.execute(
                dialect.insert(ThreadRow)
                .values(id=thread_id, created_at=time.time(), metadata={}, tenant=tenant)
                .on_conflict_do_nothing()
            )

    async def get(self, thread_id: str) -> StoredThread | None:
        """A thread, or None."""
        async with self._sessions() as session:
            row = await session.get(ThreadRow, thread_id)
            if row is None:
                return None
            return StoredThread(
                row.id,
                row.created_at,
                row.meta,
                row.tenant,
                agent=row.agent,
                state=row.state,
                state_version=row.state_version or 0,
            )

    async def page(
        self, *, limit: int, offset: int = 0, tenant: str | None = None
    ) -> tuple[list[StoredThread], int]:
        """Threads (of `tenant`, when it is given), newest first, and how many there are."""
        runs = RUNS_TABLE.c
        turns = (
            select(
                runs.context_id,
                func.count().label("turn_count"),
                func.max(runs.created_at).label("last_turn_at"),
            )
            .where(runs.context_id.is_not(None))
            .group_by(runs.context_id)
            .subquery()
        )
        first_task = (
            select(func.substr(runs.task, 1, 200))
            .where(runs.context_id == ThreadRow.id)
            .order_by(runs.created_at, runs.id)
            .limit(1)
            .scalar_subquery()
        )
        mine = ThreadRow.tenant == tenant if tenant is not None else true()
        async with self._sessions() as session:
            rows = await session.execute(
                select(ThreadRow, turns.c.turn_count, turns.c.last_turn_at, first_task)
                .outerjoin(turns, turns.c.context_id == ThreadRow.id)
                .where(mine)
                .order_by(ThreadRow.created_at.desc(), ThreadRow.id)
                .limit(limit)
                .offset(offset)
            )
            threads = [
                StoredThread(
                    row.id, row.created_at, row.meta, row.tenant, count or 0, last, task, row.agent
                )
                for row, count, last, task in rows
            ]
            total = await session.scalar(select(func.count()).select_from(ThreadRow).where(mine))
            return threads, int(total or 0)

    async def turns(self, thread_id: str) -> list[StoredRun]:
        """The thread's runs, oldest first."""
        async with self._sessions() as session:
            rows = await session.execute(
                select(RUNS_TABLE)
                .where(RUNS_TABLE.c.context_id == thread_id)
                .order_by(RUNS_TABLE.c.created_at, RUNS_TABLE.c.id)
            )
            return [StoredRun.model_validate(row._mapping) for row in rows]

    async def hold(self, thread_id: str, for_s: float) -> bool:
        """Hold the thread for a submission (for at most `for_s`); False: another holds it."""
        now = time.time()
        async with self._sessions.begin() as session:
            done = await session.execute(
                update(ThreadRow)
                .where(
                    ThreadRow.id == thread_id,
                    or_(ThreadRow.held_until.is_(None), ThreadRow.held_until < now),
                )
                .values(held_until=now + for_s)
            )
            return bool(done.rowcount)  # type: ignore[attr-defined]

    async def release(self, thread_id: str) -> None:
        """Let the next submission to the thread go ahead."""
        async with self._sessions.begin() as session:
            await session.execute(
                update(ThreadRow).where(ThreadRow.id == thread_id).values(held_until=None)
            )

    async def states(
        self, thread_id: str, tenant: str | None = None
    ) -> list[tuple[str, bool]] | None:
        """The thread's runs, oldest first, each as its id and whether it has ended.

        None: there is no such thread (of `tenant`, when it is given). What a submission and a
        queued turn need, in one query, without reading (and parsing) whole runs.
        """
        mine = ThreadRow.tenant == tenant if tenant is not None else true()
        runs = RUNS_TABLE.c
        unfinished = [s.value for s in RunStatus.unfinished()]
        async with self._sessions() as session:
            rows = (
                await session.execute(
                    select(runs.id, runs.status.not_in(unfinished))
                    .select_from(
                        ThreadRow.__table__.outerjoin(RUNS_TABLE, runs.context_id == ThreadRow.id)
                    )
                    .where(ThreadRow.id == thread_id, mine)
                    .order_by(runs.created_at, runs.id)
                )
            ).all()
        if not rows:
            return None
        return [(str(run_id), bool(ended)) for run_id, ended in rows if run_id is not None]

    async def set_state(self, thread_id: str, state: dict[str, Any], version: int) -> bool:
        """Replace the thread's state if its version is still `version` (it becomes the next).

        False: it changed since (or the thread is gone).
        """
        async with self._sessions.begin() as session:
            done = await session.execute(
                update(ThreadRow)
                .where(ThreadRow.id == thread_id, ThreadRow.state_version == version)
                .values(state=state, state_version=version + 1)
            )
            return bool(done.rowcount)  # type: ignore[attr-defined]

    async def last_answerer(self, thread_id: str) -> str | None:
        """The agent that answered the thread's last finished turn (None: it has none)."""
        runs = RUNS_TABLE.c
        async with self._sessions() as session:
            row = (
                await session.execute(
                    select(runs.entry_agent, runs.tree)
                    .where(runs.context_id == thread_id, runs.finished_at.is_not(None))
                    .order_by(runs.created_at.desc(), runs.id.desc())
                    .limit(1)
                )
            ).first()
        if row is None:
            return None
        return answerer(row[0], row[1])

    async def records(self, thread_id: str, trees: bool = False) -> list[TurnRecord]:
        """The thread's runs, oldest first, as a later turn sees them (a few columns only).

        `trees`: with their delegation trees (else None).
        """
        runs = RUNS_TABLE.c
        columns = [runs.id, runs.task, runs.status, runs.output, runs.error]
        async with self._sessions() as session:
            rows = await session.execute(
                select(*columns, runs.tree if trees else null())
                .where(runs.context_id == thread_id)
                .order_by(runs.created_at, runs.id)
            )
            return [
                TurnRecord(row[0], row[1], RunStatus(row[2]), row[3], row[4], row[5])
                for row in rows
            ]

    async def delete(self, thread_id: str) -> bool:
        """Remove the thread and its runs, with their events, steps and spans (the keys cascade).

        False: there was no such thread.
        """
        async with self._sessions.begin() as session:
            runs = select(RunRow.id).where(RunRow.context_id == thread_id).scalar_subquery()
            await _remove_runs(session, runs)
            done = await session.execute(delete(ThreadRow).where(ThreadRow.id == thread_id))
            return bool(done.rowcount)  # type: ignore[attr-defined]

    async def remove_run(self, run_id: str) -> None:
        """Remove one run of a thread with its records (a turn rolled back)."""
        async with self._sessions.begin() as session:
            await _remove_runs(
                session, select(RunRow.id).where(RunRow.id == run_id).scalar_subquery()
            )


async def _remove_runs(session: AsyncSession, runs: Any) -> None:
    # The rows that hang off a run go first (SQLite enforces the cascade only with its
    # foreign keys on).
    for table in (SpanRow, EventRow, StepRow, PushConfigRow):
        await session.execute(delete(table).where(table.run_id.in_(runs)))
    await session.execute(delete(RunRow).where(RunRow.id.in_(runs)))
