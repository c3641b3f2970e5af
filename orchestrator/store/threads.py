"""Threads: conversations whose turns are runs (a run's `context_id` names its thread)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from orchestrator.store.records import StoredRun
from orchestrator.store.tables import (
    RUNS_TABLE,
    EventRow,
    PushConfigRow,
    RunRow,
    SpanRow,
    StepRow,
    ThreadRow,
)

__all__ = ["StoredThread", "Threads"]


@dataclass(frozen=True)
class StoredThread:
    """A thread as stored: its id, when it began, the metadata it was given."""

    id: str
    created_at: float
    metadata: dict[str, Any]


class Threads:
    """The store's threads (`RunStore.threads`)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def create(self, thread_id: str, metadata: dict[str, Any]) -> StoredThread:
        """Record a new thread."""
        row = ThreadRow(id=thread_id, created_at=time.time(), meta=metadata)
        async with self._sessions.begin() as session:
            session.add(row)
        return StoredThread(thread_id, row.created_at, metadata)

    async def ensure(self, thread_id: str) -> None:
        """Record the thread if it is not yet (an A2A context met for the first time)."""
        async with self._sessions.begin() as session:
            bind: Any = session.bind
            dialect: Any = postgresql if bind.dialect.name == "postgresql" else sqlite
            await session.execute(
                dialect.insert(ThreadRow)
                .values(id=thread_id, created_at=time.time(), metadata={})
                .on_conflict_do_nothing()
            )

    async def get(self, thread_id: str) -> StoredThread | None:
        """A thread, or None."""
        async with self._sessions() as session:
            row = await session.get(ThreadRow, thread_id)
            return None if row is None else StoredThread(row.id, row.created_at, row.meta)

    async def page(self, *, limit: int, offset: int = 0) -> tuple[list[StoredThread], int]:
        """Threads, newest first, and how many there are."""
        async with self._sessions() as session:
            rows = await session.scalars(
                select(ThreadRow)
                .order_by(ThreadRow.created_at.desc(), ThreadRow.id)
                .limit(limit)
                .offset(offset)
            )
            total = await session.scalar(select(func.count()).select_from(ThreadRow))
            threads = [StoredThread(r.id, r.created_at, r.meta) for r in rows]
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
