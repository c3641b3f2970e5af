"""The run store: SQLAlchemy 2 (async), a SQLite file by default, PostgreSQL by URL.

The schema is managed by the Alembic migrations shipped in `migrations/`; opening a store
upgrades it to the newest revision. Several service instances may share one store: each run
names its owner, which renews a lease on it while the run is in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import logging
import time
from collections.abc import AsyncIterator, Collection
from importlib import resources
from typing import TYPE_CHECKING, Any, cast

from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import (
    URL,
    Connection,
    bindparam,
    delete,
    event,
    func,
    insert,
    make_url,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlalchemy.pool import NullPool

from agents.core.events import EVENTS, Event
from agents.core.messages import RunStatus, Usage
from agents.core.storable import stored_json, stored_statement
from agents.core.store_faults import store_unavailable
from agents.core.waits import Waiting
from agents.memory.sql import MemoryItems
from orchestrator.errors import AmbiguousRunId
from orchestrator.store.batch import GroupCommit
from orchestrator.store.experiments import Experiments
from orchestrator.store.leases import UPDATE_RUN, Leases
from orchestrator.store.push import PushConfigs
from orchestrator.store.records import (
    DEFAULT_POOL_SIZE,
    DEFAULT_STORE_URL,
    DEFAULT_STORE_WAIT_S,
    POOL_OVERFLOW,
    DuplicateIdempotencyKey,
    RunMeta,
    RunPage,
    StoredRun,
    StoreRefused,
    end_values,
    store_url_of,
)
from orchestrator.store.tables import (
    EVENTS_TABLE,
    RUNS_TABLE,
    SPANS_TABLE,
    EventRow,
    PushConfigRow,
    RunRow,
    SpanRow,
    SpendRow,
    StepRow,
    ThreadRow,
)
from orchestrator.store.threads import ThreadTable
from tracing import SpanRecord
from tracing.records import SpanEventRecord

if TYPE_CHECKING:
    from orchestrator.engine.results import RunResult
    from orchestrator.engine.submission import Submission

__all__ = ["RunStore"]

logger = logging.getLogger(__name__)


def _upgrade(connection: Connection) -> None:
    config = AlembicConfig()
    config.set_main_option(
        "script_location", str(resources.files("orchestrator.store") / "migrations")
    )
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


# Any fixed number: PostgreSQL's advisory lock that serializes Baton's migrations.
_PG_LOCK = 0x6261746F6E  # "baton"


@contextlib.asynccontextmanager
async def _migration_lock(engine: AsyncEngine) -> AsyncIterator[None]:
    """An exclusive lock on a file beside a SQLite store; for other stores, nothing.

    SQLite's DDL is not transactional under Alembic, so a half-made schema could be seen.
    """
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not _sqlite_file(engine.url):
        yield
        return
    # Opened and waited for in a thread: the other instance's migration may take a moment.
    lock = await asyncio.to_thread(open, f"{database}.migrate-lock", "a")
    try:
        await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_EX)
        yield
    finally:
        lock.close()  # releases the lock


def _sqlite_file(url: URL) -> bool:
    """Whether a SQLite URL names a file (not a memory database), as SQLAlchemy judges it."""
    return bool(url.database) and url.database != ":memory:" and url.query.get("mode") != "memory"


def _engine_options(url: str, pool_size: int, wait_s: float) -> dict[str, Any]:
    """How the store's engine keeps its connections, and how long it waits on the database.

    A server's are checked before use (it may have restarted), and each connection, statement
    and wait for a free connection is bounded by `wait_s` (a server that stalls, or a network
    that does, fails the call instead of holding it); a SQLite file's need no check (its wait
    for the write lock is bounded by `_sqlite_pragmas`); a memory database has one connection,
    and no pool to size.
    """
    parsed = make_url(url)
    pool = {"pool_size": pool_size, "max_overflow": POOL_OVERFLOW}
    if parsed.get_backend_name() != "sqlite":
        timeouts = {"timeout": wait_s, "command_timeout": wait_s}
        return {"pool_pre_ping": True, "pool_timeout": wait_s, "connect_args": timeouts, **pool}
    return pool if _sqlite_file(parsed) else {}


def _sqlite_pragmas(busy_ms: int, connection: Any, _record: Any) -> None:
    # WAL lets readers go on while a run is written; the busy timeout makes concurrent writers
    # (runs finishing together) wait for the lock instead of failing, for a bounded time.
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


_SPAN_COLUMNS = [c for c in SpanRow.__table__.columns.keys() if c != "run_id"]


_INSERT_RUN = insert(RUNS_TABLE)


# The shortest prefix of a run id that names the run (the UI shows 12 characters).
MIN_SHORT_ID = 6


def _span_rows(run_id: str, spans: list[SpanRecord]) -> list[dict[str, Any]]:
    rows = []
    for span in spans:
        record: dict[str, Any] = dict(span)
        rows.append({"run_id": run_id, **{c: record.get(c) for c in _SPAN_COLUMNS}})
    return rows


def _span_of(row: SpanRow) -> SpanRecord:
    return SpanRecord(
        trace_id=row.trace_id,
        span_id=row.span_id,
        parent_span_id=row.parent_span_id,
        name=row.name,
        kind=row.kind,
        start_ns=row.start_ns,
        end_ns=row.end_ns,
        status=row.status,
        status_message=row.status_message,
        attributes=row.attributes,
        events=cast("list[SpanEventRecord]", row.events),
        resource=row.resource,
    )


# A queued run starts (never an ended one: see `RunStore.start`).
# A run in flight's status by what it waits for from a person (`RunStore.set_waiting`).
_WAITING_STATUS: dict[Waiting, RunStatus] = {
    None: RunStatus.RUNNING,
    "approval": RunStatus.WAITING_FOR_APPROVAL,
    "input": RunStatus.INPUT_REQUIRED,
}
_START_RUN = update(RUNS_TABLE).where(
    RUNS_TABLE.c.id == bindparam("run_id_"), RUNS_TABLE.c.status == RunStatus.QUEUED.value
)


def _unreachable(url: str, exc: BaseException, waited_s: float | None) -> str:
    """Why the store at `url` cannot be reached, in one line: where, the cause, how long."""
    parsed = make_url(url)
    where = parsed.database or url
    if parsed.get_backend_name() != "sqlite":
        where = f"{parsed.host or 'localhost'}:{parsed.port or 5432}"
    cause = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    said = (
        f"the run store at {where} cannot be reached: {cause[0] if cause else type(exc).__name__}"
    )
    return said if waited_s is None else f"{said} (waited {waited_s:g}s: BATON_STORE_START_WAIT_S)"


class RunStore:
    """Runs, newest first, with their status, input, output, error, usage, spans and events."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)
        # The hot writes (a run queued, started, finished; its events) commit in groups.
        self._writes = GroupCommit(engine)
        dialect: Any = postgresql if engine.dialect.name == "postgresql" else sqlite
        self._insert_events = dialect.insert(EVENTS_TABLE).on_conflict_do_nothing()
        # Spans too: the ledger writes a run's spans as they come, and the service may record
        # the same run after it (its end kept while the store was away; an interrupted run).
        self._insert_spans = dialect.insert(SPANS_TABLE).on_conflict_do_nothing()
        # Which instance owns which run (several may share the store).
        self.leases = Leases(self._sessions, self._writes)
        self.push = PushConfigs(self._sessions)
        self.experiments = Experiments(self._sessions)
        self.threads = ThreadTable(self._sessions)
        self.memory = MemoryItems(engine)  # long-term items, per tenant (`/v1/memory`)

    @classmethod
    async def open(
        cls,
        url: str = DEFAULT_STORE_URL,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        wait_s: float = DEFAULT_STORE_WAIT_S,
        start_wait_s: float = 0.0,
    ) -> RunStore:
        """Connect to the store at `url` and migrate its schema to the newest revision.

        `pool_size`: connections kept open for reuse (see `DEFAULT_POOL_SIZE`). `wait_s`: how
        long a call waits on the database before it fails (`DEFAULT_STORE_WAIT_S`).
        `start_wait_s`: how long to wait for a database that does not answer yet, trying
        again with a growing pause.

        Raises:
            StoreRefused: the URL names no store Baton opens, or the database cannot be
                reached (within `start_wait_s`): one line naming where and why, no credential.
        """
        url = store_url_of(url)
        deadline, pause = time.monotonic() + start_wait_s, 0.5
        while True:
            try:
                return await cls._open(url, pool_size, wait_s)
            except Exception as exc:
                if not store_unavailable(exc):
                    raise
                if time.monotonic() + pause > deadline:
                    raise StoreRefused(_unreachable(url, exc, start_wait_s)) from None
                if pause == 0.5:
                    logger.warning("waiting for the run store: %s", _unreachable(url, exc, None))
                await asyncio.sleep(pause)
                pause = min(pause * 2, 5.0)

    @classmethod
    async def _open(cls, url: str, pool_size: int, wait_s: float) -> RunStore:
        engine = create_async_engine(
            url, json_serializer=stored_json, **_engine_options(url, pool_size, wait_s)
        )
        event.listen(engine.sync_engine, "before_cursor_execute", stored_statement, retval=True)
        if engine.dialect.name == "sqlite":
            pragmas = functools.partial(_sqlite_pragmas, int(wait_s * 1000))
            event.listen(engine.sync_engine, "connect", pragmas)
            migrator = engine
        else:  # unbounded: a migration, or the wait for another instance's, may take long
            migrator = create_async_engine(url, poolclass=NullPool)
        # Instances opening a new store at once (replicas started together) must not migrate it
        # at once: one waits for the other, then finds the schema current.
        try:
            async with _migration_lock(migrator), migrator.begin() as connection:
                if migrator.dialect.name == "postgresql":
                    lock = text("SELECT pg_advisory_xact_lock(:key)")
                    await connection.execute(lock, {"key": _PG_LOCK})
                await connection.run_sync(_upgrade)
        except BaseException:
            await engine.dispose()
            raise
        finally:
            if migrator is not engine:
                await migrator.dispose()
        return cls(engine)

    async def close(self) -> None:
        """Wait for the writes under way, then close the store's connections."""
        await self._writes.close()
        await self._engine.dispose()

    async def ping(self) -> None:
        """Raise unless the database answers."""
        async with self._engine.connect() as connection:
            await connection.execute(text("SELECT 1"))

    async def add(self, request: Submission, meta: RunMeta) -> StoredRun:
        """Record a new run as `queued`, and return it as stored.

        Raises:
            DuplicateIdempotencyKey: its idempotency key is taken (by a concurrent twin, say).
        """
        now, lineage = time.time(), meta.lineage
        # Every column, so that rows added together have the same keys (one executemany).
        row: dict[str, Any] = dict.fromkeys(RUNS_TABLE.c.keys()) | dict(
            id=meta.run_id,
            status=RunStatus.QUEUED,
            task=request.task,
            requested_agent=request.agent,
            system=meta.system,
            config=meta.config,
            input_tokens=0,
            output_tokens=0,
            model_calls=0,
            cost_usd=0.0,
            unpriced_calls=0,
            created_at=now,
            owner=meta.owner,
            heartbeat_at=now if meta.owner else None,
            idempotency_key=meta.idempotency_key,
            request_hash=request.fingerprint() if meta.idempotency_key else None,
            cancel_requested=False,
            options=request.options(),
            resumes=0,
            replay_of=lineage.replay_of,
            fork=lineage.fork,
            fork_from=lineage.fork_from.model_dump() if lineage.fork_from else None,
            context_id=request.thread_id,
            tenant=request.tenant,
            submitted_by=request.submitted_by,
            version=meta.version,
            began_on=meta.version,
        )
        try:
            await self._writes.write((_INSERT_RUN, [row]))
        except IntegrityError as exc:
            key = meta.idempotency_key
            if key is not None and await self.by_idempotency_key(key):
                raise DuplicateIdempotencyKey(key) from None
            raise exc
        return StoredRun.model_validate(row)

    async def by_idempotency_key(self, key: str) -> StoredRun | None:
        """The run this (caller-scoped) idempotency key made, if any."""
        async with self._sessions() as session:
            row = await session.scalar(select(RunRow).where(RunRow.idempotency_key == key))
            return StoredRun.model_validate(row) if row is not None else None

    async def _set(self, run_id: str, **values: Any) -> None:
        await self._writes.write((UPDATE_RUN, [{"run_id_": run_id, **values}]))

    async def start(self, run_id: str, version: str | None = None) -> None:
        """Mark a queued run running (on `version` of the team: a resumed run may change it).

        Only a queued one: made late (kept through a store outage, or retried after its commit
        was reported failed), the write must not turn a run that has ended since back into a
        running one.
        """
        values: dict[str, Any] = {
            "run_id_": run_id,
            "status": RunStatus.RUNNING,
            "started_at": time.time(),
        }
        if version is not None:
            values["version"] = version
        await self._writes.write((_START_RUN, [values]))

    async def set_waiting(self, run_id: str, waiting: Waiting) -> None:
        """Mark a running run as waiting for a person, or as running again.

        For an answer or a decision; never a finished run.
        """
        status = _WAITING_STATUS[waiting]
        async with self._sessions.begin() as session:
            await session.execute(
                update(RunRow)
                .where(RunRow.id == run_id, RunRow.status.in_(_WAITING_STATUS.values()))
                .values(status=status)
            )

    async def finish(self, result: RunResult, spans: list[SpanRecord]) -> None:
        """Record how a run ended, with its usage, delegation tree and spans (one transaction).

        (A service whose ledger reaches this store has the ledger record it: `Engine.finish`.)
        """
        await self._writes.write(
            (self._insert_spans, _span_rows(result.run_id, spans)),
            (UPDATE_RUN, [{"run_id_": result.run_id, **end_values(result)}]),
        )

    async def end(self, run_id: str, status: RunStatus, error: str) -> None:
        """Record a run that ended before the engine could report a result."""
        await self._set(run_id, status=status, error=error, finished_at=time.time())

    async def fail(self, run_id: str, error: str) -> None:
        """Record a run that failed before the engine could report a result."""
        await self.end(run_id, RunStatus.FAILED, error)

    async def add_spans(self, run_id: str, spans: list[SpanRecord]) -> None:
        """Keep more spans of a run."""
        await self._writes.write((self._insert_spans, _span_rows(run_id, spans)))

    async def spans(self, run_id: str) -> list[SpanRecord]:
        """A run's spans in start order, as `tracing.records.span_record` dicts."""
        async with self._sessions() as session:
            rows = await session.scalars(
                select(SpanRow).where(SpanRow.run_id == run_id).order_by(SpanRow.start_ns)
            )
            return [_span_of(row) for row in rows]

    async def add_events(self, run_id: str, events: list[tuple[int, Event]]) -> None:
        """Keep a finished run's progress events with the ids clients saw them under."""
        if not events:
            return
        rows = [
            {
                "run_id": run_id,
                "seq": seq,
                "type": event.type,
                "data": event.model_dump(mode="json"),
            }
            for seq, event in events
        ]
        # Some may be stored already (written by the ledger as they came): keep those.
        await self._writes.write((self._insert_events, rows))

    async def events_of(self, run_id: str, types: Collection[str]) -> list[tuple[int, Event]]:
        """The run's stored events of these types (`input_requested`, ...), in order."""
        async with self._sessions() as session:
            rows = await session.execute(
                select(EventRow.seq, EventRow.data)
                .where(EventRow.run_id == run_id, EventRow.type.in_(types))
                .order_by(EventRow.seq)
            )
            return [(int(seq), EVENTS.validate_python(data)) for seq, data in rows]

    async def events(self, run_id: str, after: int = 0) -> list[tuple[int, Event]]:
        """A finished run's events with ids above `after`, in order."""
        async with self._sessions() as session:
            rows = await session.execute(
                select(EventRow.seq, EventRow.data)
                .where(EventRow.run_id == run_id, EventRow.seq > after)
                .order_by(EventRow.seq)
            )
            return [(int(seq), EVENTS.validate_python(data)) for seq, data in rows]

    async def steps(self, run_id: str) -> list[dict[str, Any]]:
        """A run's step log, oldest first (see `agents.core.steps`)."""
        async with self._sessions() as session:
            rows = await session.scalars(
                select(StepRow).where(StepRow.run_id == run_id).order_by(StepRow.at)
            )
            return [
                {c: getattr(row, c) for c in ("invocation", "key", "kind", "epoch", "at", "data")}
                for row in rows
            ]

    async def find(self, run_id: str, tenant: str | None = None) -> StoredRun | None:
        """A run by its id, or by a prefix that names one run (as git's short hashes); or None.

        A prefix has at least `MIN_SHORT_ID` characters; with `tenant`, it names one of that
        tenant's runs (another's are not counted: an ambiguity would tell they exist).

        Raises:
            AmbiguousRunId: the prefix names several runs.
        """
        run = await self.get(run_id)
        if run is not None or len(run_id) < MIN_SHORT_ID:
            return run
        found = await self.ids_beginning(run_id, tenant=tenant)
        if len(found) > 1:
            raise AmbiguousRunId(run_id, found)
        return await self.get(found[0]) if found else None

    async def ids_beginning(
        self, prefix: str, limit: int = 3, tenant: str | None = None
    ) -> list[str]:
        """The ids of the runs whose id begins `prefix` (at most `limit`), in order.

        With `tenant`, only that tenant's runs.
        """
        # A range on the primary key (ids are hex): an index range scan, on any database.
        query = (
            select(RUNS_TABLE.c.id)
            .where(RUNS_TABLE.c.id >= prefix, RUNS_TABLE.c.id < prefix + "~")
            .order_by(RUNS_TABLE.c.id)
            .limit(limit)
        )
        if tenant is not None:
            query = query.where(RUNS_TABLE.c.tenant == tenant)
        async with self._engine.connect() as connection:
            return [str(row[0]) for row in await connection.execute(query)]

    async def get(self, run_id: str) -> StoredRun | None:
        """A run by id, or None."""
        async with self._engine.connect() as connection:  # no ORM: this is read on every follow
            query = select(RUNS_TABLE).where(RUNS_TABLE.c.id == run_id)
            row = (await connection.execute(query)).first()
            return StoredRun.model_validate(row._mapping) if row is not None else None

    async def prune(
        self,
        *,
        older_than: float | None = None,
        keep: int | None = None,
        batch: int = 500,
        pause_s: float = 0.0,
    ) -> int:
        """Remove finished runs, with their spans, events, steps and webhooks; how many.

        Args:
            older_than: runs created before this time (Unix seconds).
            keep: all but the newest `keep` finished runs.
            batch: runs removed per transaction (a long prune never holds the store for long).
            pause_s: a pause between two batches, for the writes of runs going on meanwhile
                (a service's sweep; a `baton prune` makes none).

        Runs not finished (queued, running, waiting) are never removed.
        """
        if older_than is None and keep is None:
            return 0
        ended = RunRow.status.in_([s.value for s in RunStatus if s.finished])
        doomed = select(RunRow.id).where(ended)
        if keep is not None:
            newest = select(RunRow.id).where(ended).order_by(RunRow.created_at.desc()).limit(keep)
            doomed = doomed.where(RunRow.id.not_in(newest.scalar_subquery()))
        if older_than is not None:
            doomed = doomed.where(RunRow.created_at < older_than)
        removed = 0
        while True:
            async with self._sessions.begin() as session:
                ids = list(await session.scalars(doomed.limit(batch)))
                if ids:
                    # The rows that hang off a run go first (SQLite enforces the cascade only
                    # with its foreign keys on; each statement is cheap either way).
                    for table in (SpanRow, EventRow, StepRow, PushConfigRow):
                        await session.execute(delete(table).where(table.run_id.in_(ids)))
                    await session.execute(delete(RunRow).where(RunRow.id.in_(ids)))
            removed += len(ids)
            if len(ids) < batch:
                break
            if pause_s:
                await asyncio.sleep(pause_s)
        if older_than is not None:  # threads of that age left without a turn go with them
            async with self._sessions.begin() as session:
                turns = select(RunRow.id).where(RunRow.context_id == ThreadRow.id).exists()
                await session.execute(
                    delete(ThreadRow).where(ThreadRow.created_at < older_than, ~turns)
                )
        return removed

    async def spending(self, day: str, tenant: str | None = None) -> list[dict[str, Any]]:
        """A UTC day's spending (of `tenant`, when given), as the ledger summed it.

        One row per tenant, key, agent and model.
        """
        query = select(SpendRow).where(SpendRow.day == day)
        if tenant is not None:
            query = query.where(SpendRow.tenant == tenant)
        query = query.order_by(SpendRow.tenant, SpendRow.who, SpendRow.agent, SpendRow.model)
        async with self._sessions() as session:
            return [
                {
                    "tenant": r.tenant,
                    "key": r.who,
                    "agent": r.agent,
                    "model": r.model,
                    "calls": r.calls,
                    "input_tokens": r.input_tokens,
                    "output_tokens": r.output_tokens,
                    "cost_usd": r.cost_usd,
                    "unpriced_calls": r.unpriced_calls,
                }
                for r in await session.scalars(query)
            ]

    async def list(
        self,
        *,
        status: str | Collection[str] | None = None,
        agent: str | None = None,
        thread_id: str | None = None,
        changed_after: float | None = None,
        tenant: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> RunPage:
        """Runs newest first, optionally filtered.

        By status (one or several), entry agent, thread (a run in none is a thread of its own
        id, as an A2A task without a context is its own context), the time of its last state
        change and tenant.
        """
        query = select(RunRow)
        if tenant is not None:
            query = query.where(RunRow.tenant == tenant)
        if status is not None:
            query = query.where(RunRow.status.in_([status] if isinstance(status, str) else status))
        if agent is not None:
            query = query.where(RunRow.entry_agent == agent)
        if thread_id is not None:
            query = query.where(
                (RunRow.context_id == thread_id)
                | (RunRow.context_id.is_(None) & (RunRow.id == thread_id))
            )
        if changed_after is not None:
            changed = func.coalesce(RunRow.finished_at, RunRow.started_at, RunRow.created_at)
            query = query.where(changed > changed_after)
        matched = query.subquery()
        sums = [
            func.coalesce(func.sum(getattr(matched.c, name)), 0)
            for name in (
                "input_tokens",
                "output_tokens",
                "model_calls",
                "cost_usd",
                "unpriced_calls",
            )
        ]
        async with self._sessions() as session:
            total, inp, out, calls, cost, unpriced = (
                await session.execute(select(func.count(), *sums).select_from(matched))
            ).one()
            rows = await session.scalars(
                query.order_by(RunRow.created_at.desc(), RunRow.id).limit(limit).offset(offset)
            )
            return RunPage(
                runs=[StoredRun.model_validate(r) for r in rows],
                total=total or 0,
                usage=Usage(
                    input_tokens=inp,
                    output_tokens=out,
                    model_calls=calls,
                    cost_usd=float(cost),
                    unpriced_calls=unpriced,
                ),
            )
