"""Group commit for the run store: the writes of many runs in one transaction.

A service running many runs at once writes each run's record three times (queued, running,
finished with its spans). One transaction per write costs a round trip to the database per
statement plus begin and commit, which on SQLite (aiosqlite's thread) and on PostgreSQL alike
is most of the service's CPU under load. Here a writer awaits its write as before, but the
writes that arrive while a transaction is being committed go together in the next one, and the
rows of one statement go in one `executemany`. Whoever awaits a write knows it is committed.

A write that fails (a duplicate key, say) must fail alone: when a batch's transaction fails,
each of its writes is made again in a transaction of its own, and only the failing ones raise.
The writes in one batch must not depend on each other's order: a caller awaits one write before
it makes the next for the same run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Executable
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

__all__ = ["GroupCommit", "Write"]

# One statement and its rows (each a dict of the same keys).
Write = tuple[Executable, Sequence[dict[str, Any]]]


class GroupCommit:
    """Commits queued writes together; see the module's docstring."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._queue: list[tuple[tuple[Write, ...], asyncio.Future[None]]] = []
        self._worker: asyncio.Task[None] | None = None

    async def write(self, *writes: Write) -> None:
        """Make these writes in one transaction (with whatever else is queued); wait for it."""
        writes = tuple((statement, rows) for statement, rows in writes if rows)
        if not writes:
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        done.add_done_callback(_retrieved)  # a caller that stopped waiting is not told
        self._queue.append((writes, done))
        worker = self._worker
        if worker is None or worker.done() or worker.get_loop() is not loop:
            self._worker = loop.create_task(self._commit_queued())
        # A caller that stops waiting does not take its write back: it is made all the same.
        await asyncio.shield(done)

    async def close(self) -> None:
        """Wait for the writes queued so far."""
        if self._worker is not None:
            with contextlib.suppress(BaseException):
                await asyncio.shield(self._worker)

    async def _commit_queued(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                async with self._engine.begin() as connection:
                    await _execute(connection, [w for writes, _ in batch for w in writes])
            except Exception as exc:
                if len(batch) == 1:
                    _settle(batch[0][1], exc)
                    continue
                for writes, done in batch:  # so that only the failing writes fail
                    try:
                        async with self._engine.begin() as connection:
                            await _execute(connection, list(writes))
                    except Exception as alone:
                        _settle(done, alone)
                    else:
                        _settle(done)
            else:
                for _, done in batch:
                    _settle(done)


async def _execute(connection: AsyncConnection, writes: list[Write]) -> None:
    """Each statement once, with the rows of every write that uses it (same keys)."""
    grouped: dict[tuple[int, tuple[str, ...]], tuple[Executable, list[dict[str, Any]]]] = {}
    for statement, rows in writes:
        for row in rows:
            key = (id(statement), tuple(row))
            grouped.setdefault(key, (statement, []))[1].append(row)
    for statement, rows in grouped.values():
        await connection.execute(statement, rows if len(rows) > 1 else rows[0])


def _retrieved(done: asyncio.Future[None]) -> None:
    if not done.cancelled():
        done.exception()


def _settle(done: asyncio.Future[None], exc: BaseException | None = None) -> None:
    # Only the worker settles a write (its callers wait through a shield).
    if exc is None:
        done.set_result(None)
    else:
        done.set_exception(exc)
