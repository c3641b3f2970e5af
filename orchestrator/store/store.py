"""The run store: SQLAlchemy 2 (async), a SQLite file by default, PostgreSQL by URL.

The schema is managed by the Alembic migrations shipped in `migrations/`; opening a store
upgrades it to the newest revision.
"""

from __future__ import annotations

import time
from importlib import resources
from typing import Any

from alembic import command
from alembic.config import Config as AlembicConfig
from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection, event, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from agents.messages import Outcome
from orchestrator.engine import RunResult
from orchestrator.store.tables import RunRow, SpanRow
from tracing import SpanRecord

__all__ = ["DEFAULT_STORE_URL", "FINAL_STATUSES", "RunPage", "RunStore", "StoredRun"]

DEFAULT_STORE_URL = "sqlite+aiosqlite:///baton.db"
FINAL_STATUSES = frozenset(o.value for o in Outcome) | {"interrupted"}


class StoredRun(BaseModel):
    """A run as the store keeps it."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    status: str
    task: str
    requested_agent: str | None
    entry_agent: str | None
    system: str
    config: dict[str, Any]
    routing: dict[str, Any] | None
    output: str | None
    error: str | None
    input_tokens: int
    output_tokens: int
    model_calls: int
    cost_usd: float
    created_at: float
    started_at: float | None
    finished_at: float | None
    duration_s: float | None
    tree: dict[str, Any] | None


class RunPage(BaseModel):
    runs: list[StoredRun]
    total: int


def _upgrade(connection: Connection) -> None:
    config = AlembicConfig()
    config.set_main_option(
        "script_location", str(resources.files("orchestrator.store") / "migrations")
    )
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    # WAL lets readers go on while a run is written; the busy timeout makes concurrent writers
    # (runs finishing together) wait for the lock instead of failing.
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


class RunStore:
    """Runs, newest first, with their status, input, output, error, usage and config."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)

    @classmethod
    async def open(cls, url: str = DEFAULT_STORE_URL) -> RunStore:
        """Connect to the store at `url` and migrate its schema to the newest revision."""
        engine = create_async_engine(url, pool_pre_ping=not url.startswith("sqlite"))
        if engine.dialect.name == "sqlite":
            event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        async with engine.begin() as connection:
            await connection.run_sync(_upgrade)
        return cls(engine)

    async def close(self) -> None:
        await self._engine.dispose()

    async def add(
        self, run_id: str, task: str, *, agent: str | None, system: str, config: dict[str, Any]
    ) -> None:
        """Record a new run as `queued`."""
        async with self._sessions.begin() as session:
            session.add(
                RunRow(
                    id=run_id,
                    status="queued",
                    task=task,
                    requested_agent=agent,
                    system=system,
                    config=config,
                    created_at=time.time(),
                    input_tokens=0,
                    output_tokens=0,
                    model_calls=0,
                )
            )

    async def start(self, run_id: str) -> None:
        await self._set(run_id, status="running", started_at=time.time())

    async def finish(self, result: RunResult) -> None:
        """Record how a run ended, with its usage, delegation tree and spans."""
        await self.add_spans(result.run_id, result.spans)
        await self._set(
            result.run_id,
            status=result.status.value,
            entry_agent=result.entry_agent,
            routing=result.routing.model_dump(mode="json") if result.routing else None,
            output=result.output,
            error=result.error,
            input_tokens=result.usage.input_tokens,
            output_tokens=result.usage.output_tokens,
            model_calls=result.usage.model_calls,
            cost_usd=result.usage.cost_usd,
            started_at=result.started_at,
            finished_at=result.started_at + result.duration_s,
            duration_s=result.duration_s,
            tree=result.tree.model_dump(mode="json") if result.tree else None,
        )

    async def add_spans(self, run_id: str, spans: list[SpanRecord]) -> None:
        if not spans:
            return
        columns = [c for c in SpanRow.__table__.columns.keys() if c != "run_id"]
        rows = [{"run_id": run_id, **{c: span.get(c) for c in columns}} for span in spans]
        async with self._sessions.begin() as session:
            await session.execute(insert(SpanRow), rows)

    async def spans(self, run_id: str) -> list[SpanRecord]:
        """A run's spans in start order, as `tracing.records.span_record` dicts."""
        columns = [c for c in SpanRow.__table__.columns.keys() if c != "run_id"]
        async with self._sessions() as session:
            rows = await session.scalars(
                select(SpanRow).where(SpanRow.run_id == run_id).order_by(SpanRow.start_ns)
            )
            return [{c: getattr(row, c) for c in columns} for row in rows]

    async def fail(self, run_id: str, error: str) -> None:
        """Record a run that ended before the engine could report a result."""
        await self._set(run_id, status=Outcome.FAILED.value, error=error, finished_at=time.time())

    async def interrupt_unfinished(self, reason: str) -> int:
        """Mark every queued or running run as `interrupted` (after a restart); return how many."""
        async with self._sessions.begin() as session:
            done = await session.execute(
                update(RunRow)
                .where(RunRow.status.in_(("queued", "running")))
                .values(status="interrupted", error=reason, finished_at=time.time())
            )
            return int(getattr(done, "rowcount", 0) or 0)

    async def get(self, run_id: str) -> StoredRun | None:
        async with self._sessions() as session:
            row = await session.get(RunRow, run_id)
            return StoredRun.model_validate(row) if row is not None else None

    async def list(
        self,
        *,
        status: str | None = None,
        agent: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> RunPage:
        """Runs newest first, optionally filtered by status and entry agent."""
        query = select(RunRow)
        if status is not None:
            query = query.where(RunRow.status == status)
        if agent is not None:
            query = query.where(RunRow.entry_agent == agent)
        async with self._sessions() as session:
            total = await session.scalar(select(func.count()).select_from(query.subquery()))
            rows = await session.scalars(
                query.order_by(RunRow.created_at.desc()).limit(limit).offset(offset)
            )
            return RunPage(runs=[StoredRun.model_validate(r) for r in rows], total=total or 0)

    async def _set(self, run_id: str, **values: Any) -> None:
        async with self._sessions.begin() as session:
            await session.execute(update(RunRow).where(RunRow.id == run_id).values(**values))
