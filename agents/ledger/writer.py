"""The ledger's writer: runs' steps, events and ends go to the run store, in batches.

Steps and events as they come; a run's end (the values of its row, and its spans) as it closes;
model replies' spending, added to its day's sums (`spend`).

It runs in the ledger actor (one writer per shard of a team's ledger, so SQLite sees one
writing process per shard). Writes are batched (group commit): whatever arrived while the
previous batch was being written goes in the next one. `sync` waits until everything queued
before it is stored: the barrier before an effect that must not be repeated, and before a
run's end is announced.

A run removed while rows of it are on their way (its thread deleted, a turn rolled back just
after its end was announced) takes them with it: the store's keys refuse them (SQLite enforces
foreign keys here too), and the batch is written again run by run without them. A row the store
refuses for what it holds (a value too long for its column, say) is not an outage either: the
batch is written run by run, the refused run's rows are dropped alone (said in the log), and a
run whose end was among them is recorded failed, with why.

The tables are the run store's (`orchestrator.store.tables`, created by its migrations); this
module names only the columns it writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Float,
    Integer,
    String,
    bindparam,
    column,
    event,
    func,
    select,
    table,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from agents.core.events import EVENTS, Event
from agents.core.steps import Step
from agents.core.storable import stored_json, stored_statement
from agents.core.store_faults import store_refused
from agents.ledger.spend import SpendEntry, Spent
from tracing import SpanRecord

__all__ = ["StoreWriter"]

logger = logging.getLogger(__name__)

_STEPS = table(
    "run_steps",
    column("run_id", String),
    column("invocation", String),
    column("key", String),
    column("kind", String),
    column("epoch", Integer),
    column("at", Float),
    column("data", JSON),
)
_EVENTS = table(
    "run_events",
    column("run_id", String),
    column("seq", Integer),
    column("type", String),
    column("data", JSON),
)
_SPANS = table(
    "spans",
    column("run_id", String),
    column("span_id", String),
    column("trace_id", String),
    column("parent_span_id", String),
    column("name", String),
    column("kind", String),
    column("start_ns", BigInteger),
    column("end_ns", BigInteger),
    column("status", String),
    column("status_message", String),
    column("attributes", JSON),
    column("events", JSON),
    column("resource", JSON),
)
_SPAN_COLUMNS = [c.name for c in _SPANS.columns if c.name != "run_id"]
_SPEND = table(
    "spend",
    column("day", String),
    column("tenant", String),
    column("who", String),
    column("agent", String),
    column("model", String),
    column("calls", Integer),
    column("input_tokens", BigInteger),
    column("output_tokens", BigInteger),
    column("cost_usd", Float),
    column("unpriced_calls", Integer),
)
_SPEND_KEY = ("day", "tenant", "who", "agent", "model")
_SPEND_SUMS = ("calls", "input_tokens", "output_tokens", "cost_usd", "unpriced_calls")
# How a run ended: the columns of its row that its end sets (`RunEnd.record`).
_RUNS = table(
    "runs",
    column("id", String),
    column("task", String),
    column("status", String),
    column("entry_agent", String),
    column("routing", JSON),
    column("output", String),
    column("error", String),
    column("input_tokens", Integer),
    column("output_tokens", Integer),
    column("model_calls", Integer),
    column("cost_usd", Float),
    column("unpriced_calls", Integer),
    column("started_at", Float),
    column("finished_at", Float),
    column("duration_s", Float),
    column("tree", JSON),
    column("state", JSON),
)
_END_COLUMNS = frozenset(c.name for c in _RUNS.columns if c.name != "id")
# What a run's end whose record the store refused still sets: failed, why, and its figures.
_NUMBERS = frozenset({"input_tokens", "output_tokens", "model_calls", "cost_usd",
                      "unpriced_calls", "started_at", "finished_at", "duration_s"})  # fmt: skip

_UPDATE_RUN = update(_RUNS).where(_RUNS.c.id == bindparam("run_id_"))
# Rows per statement (SQLite binds at most 32766 parameters).
_CHUNK = 500
# How long a write waits on the database (a connection, a statement, SQLite's write lock) before
# it fails. Bounded, so that a store that stalls cannot hold a run: a run's end is announced
# without its record (the service keeps it until the store is back), and a call that must run
# at most once is not run when its start cannot be stored.
WAIT_S = 10.0


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={int(WAIT_S * 1000)}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")  # as the service's store: rows of no run refused
    cursor.close()


@dataclass
class _Batch:
    """What one transaction writes: rows of steps, events, spans, runs' ends and spending."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    spans: list[dict[str, Any]] = field(default_factory=list)
    ends: list[dict[str, Any]] = field(default_factory=list)
    spend: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(map(len, (self.steps, self.events, self.spans, self.ends, self.spend)))


class StoreWriter:
    """Batches steps and events of every run into the store; see the module's docstring."""

    def __init__(self, url: str) -> None:
        bounds: dict[str, Any] = {}
        if not url.startswith("sqlite"):
            timeouts = {"timeout": WAIT_S, "command_timeout": WAIT_S}
            bounds = {"pool_timeout": WAIT_S, "pool_pre_ping": True, "connect_args": timeouts}
        self._engine: AsyncEngine = create_async_engine(url, json_serializer=stored_json, **bounds)
        listen = self._engine.sync_engine
        event.listen(listen, "before_cursor_execute", stored_statement, retval=True)
        if self._engine.dialect.name == "sqlite":
            event.listen(self._engine.sync_engine, "connect", _sqlite_pragmas)
        # Built once: a statement's cache key is computed once per object (SQLAlchemy memoizes
        # it), and a batch is written in a few executemany calls of these.
        dialect: Any = postgresql if self._engine.dialect.name == "postgresql" else sqlite
        self._inserts = tuple(
            (name, dialect.insert(target).on_conflict_do_nothing())
            for name, target in (("steps", _STEPS), ("events", _EVENTS), ("spans", _SPANS))
        )
        spend = dialect.insert(_SPEND)
        added = {c: getattr(_SPEND.c, c) + getattr(spend.excluded, c) for c in _SPEND_SUMS}
        self._add_spend = spend.on_conflict_do_update(index_elements=list(_SPEND_KEY), set_=added)
        self._steps: list[dict[str, Any]] = []
        self._events: list[dict[str, Any]] = []
        self._spans: list[dict[str, Any]] = []
        self._ends: list[dict[str, Any]] = []
        self._spend: dict[tuple[str, ...], dict[str, Any]] = {}  # summed by `_SPEND_KEY`
        self._queued = 0  # items ever queued
        self._written = 0  # items ever handled (stored, or given up on)
        self._wake = asyncio.Event()
        self._progress = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._failures = 0  # batches that could not be written
        self.failed_at = 0.0  # when the last of them was given up (Unix seconds; 0: never)

    @property
    def engine(self) -> AsyncEngine:
        """Its connections to the store (the ledger's memory items use them too)."""
        return self._engine

    def step(self, run_id: str, step: Step) -> None:
        """Queue a step of a run."""
        self._steps.append({"run_id": run_id, **step.model_dump()})
        self._queued_one()

    def event(self, run_id: str, seq: int, item: Event) -> None:
        """Queue a numbered event of a run."""
        data = item.model_dump(mode="json")
        self._events.append({"run_id": run_id, "seq": seq, "type": item.type, "data": data})
        self._queued_one()

    def end(self, run_id: str, values: dict[str, Any], spans: list[SpanRecord]) -> None:
        """Queue a run's end: the values of its row (`_END_COLUMNS`) and its spans."""
        if set(values) != _END_COLUMNS:  # the rows of one statement have the same columns
            odd = sorted(set(values) ^ _END_COLUMNS)
            raise ValueError(f"a run's end sets exactly its end's columns; not: {', '.join(odd)}")
        self._ends.append({"run_id_": run_id, **values})
        self._queued += 1
        self.spans_of(run_id, spans)

    def spans_of(self, run_id: str, spans: list[SpanRecord]) -> None:
        """Queue finished spans of a run (as they come: a restarted ledger reads them back)."""
        for span in spans:  # (counted as rows, as `_Batch.rows` counts them when written)
            record: dict[str, Any] = dict(span)
            self._spans.append({"run_id": run_id, **{c: record.get(c) for c in _SPAN_COLUMNS}})
        self._queued += len(spans) - 1
        self._queued_one()

    async def spans(self, run_id: str) -> list[SpanRecord]:
        """A run's stored spans, in the order they were written."""
        async with self._engine.connect() as connection:
            rows = await connection.execute(
                select(_SPANS).where(_SPANS.c.run_id == run_id).order_by(_SPANS.c.start_ns)
            )
            return [cast(SpanRecord, {c: row[c] for c in _SPAN_COLUMNS}) for row in rows.mappings()]

    def spend(self, row: SpendEntry) -> None:
        """Queue a model reply's spending, added to its day's sum.

        The sums are kept by day, tenant, key, agent and model.
        """
        key = (row.day, row.tenant, row.who, row.agent, row.model)
        sums = self._spend.get(key)
        if sums is None:
            sums = self._spend[key] = dict(zip(_SPEND_KEY, key, strict=True)) | dict.fromkeys(
                _SPEND_SUMS, 0
            )
        sums["calls"] += 1
        sums["input_tokens"] += row.input_tokens
        sums["output_tokens"] += row.output_tokens
        sums["cost_usd"] += row.cost_usd
        sums["unpriced_calls"] += int(row.unpriced)
        self._queued_one()

    async def spent(self, day: str, scope: str) -> Spent:
        """What a tenant (`tenant:NAME`) or a key (`key:NAME`) spent in a day, as stored."""
        kind, _, name = scope.partition(":")
        where = _SPEND.c.tenant if kind == "tenant" else _SPEND.c.who
        async with self._engine.connect() as connection:
            tokens, usd = (
                await connection.execute(
                    select(
                        func.coalesce(func.sum(_SPEND.c.input_tokens + _SPEND.c.output_tokens), 0),
                        func.coalesce(func.sum(_SPEND.c.cost_usd), 0.0),
                    ).where(_SPEND.c.day == day, where == name)
                )
            ).one()
        return Spent(int(tokens), float(usd))

    def _queued_one(self) -> None:
        self._queued += 1
        self._wake.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._write_forever())

    async def sync(self) -> bool:
        """Wait until everything queued so far is stored; False if some of it could not be."""
        mark, failures = self._queued, self._failures
        async with self._progress:
            await self._progress.wait_for(lambda: self._written >= mark)
        return self._failures == failures

    async def _write_forever(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch = _Batch(self._steps, self._events, self._spans, self._ends)
            batch.spend = list(self._spend.values())
            self._steps, self._events, self._spans, self._ends, self._spend = [], [], [], [], {}
            try:
                try:
                    await self._write(batch)
                except DBAPIError as exc:
                    if not store_refused(exc):
                        raise
                    await self._write_each(batch)  # a run removed, or a row refused
            except Exception:
                self._failures += 1
                self.failed_at = time.time()
                logger.exception("the run store could not be written (%d rows)", batch.rows)
            async with self._progress:
                replies = sum(row["calls"] for row in batch.spend)
                self._written += batch.rows - len(batch.spend) + replies
                self._progress.notify_all()

    async def _write(self, batch: _Batch) -> None:
        async with self._engine.begin() as connection:
            for name, insert in self._inserts:
                rows = getattr(batch, name)
                for start in range(0, len(rows), _CHUNK):
                    await connection.execute(insert, rows[start : start + _CHUNK])
            if batch.ends:
                await connection.execute(_UPDATE_RUN, batch.ends)
            if batch.spend:  # a day's sums grow (rows of one batch were summed already)
                await connection.execute(self._add_spend, batch.spend)

    async def _write_each(self, batch: _Batch) -> None:
        """Write a batch run by run, dropping the rows of runs the store no longer has."""
        runs: defaultdict[str, _Batch] = defaultdict(_Batch)
        for row in batch.steps:
            runs[row["run_id"]].steps.append(row)
        for row in batch.events:
            runs[row["run_id"]].events.append(row)
        for row in batch.spans:
            runs[row["run_id"]].spans.append(row)
        for row in batch.ends:
            runs[row["run_id_"]].ends.append(row)
        for run_id, its in runs.items():
            try:
                await self._write(its)
            except IntegrityError:
                logger.info("run %s was removed: its last rows were dropped", run_id)
            except DBAPIError as exc:
                if not store_refused(exc):
                    raise
                await self._refused(run_id, its, exc)
        if batch.spend:
            await self._write(_Batch(spend=batch.spend))

    async def _refused(self, run_id: str, its: _Batch, exc: DBAPIError) -> None:
        """The store refused rows of a run for what they hold: say so, record its end failed.

        Its other rows are dropped; the other runs' of the batch were written.
        """
        cause = str(exc.orig).splitlines()[0][:300] if exc.orig is not None else type(exc).__name__
        logger.error("run %s: the run store refused %d of its rows: %s", run_id, its.rows, cause)
        if not its.ends:
            return
        failed = {c: its.ends[-1][c] for c in _NUMBERS} | {
            "status": "failed",
            "error": f"the run store refused the run's record: {cause}",
        }
        async with self._engine.begin() as connection:
            await connection.execute(update(_RUNS).where(_RUNS.c.id == run_id).values(**failed))

    async def close(self) -> None:
        """Stop writing and close the store's connections (what is queued is dropped)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._engine.dispose()

    async def load(self, run_id: str) -> tuple[dict[str, dict[str, Step]], int]:
        """A run's recorded steps by invocation and key, and its highest stored event id."""
        await self.sync()
        async with self._engine.connect() as connection:
            rows = await connection.execute(
                select(_STEPS).where(_STEPS.c.run_id == run_id).order_by(_STEPS.c.at)
            )
            found: dict[str, dict[str, Step]] = defaultdict(dict)
            for row in rows.mappings():
                step = Step.model_validate({k: v for k, v in row.items() if k != "run_id"})
                found[step.invocation].setdefault(step.key, step)
            top = await connection.scalar(
                select(func.max(_EVENTS.c.seq)).where(_EVENTS.c.run_id == run_id)
            )
        return dict(found), int(top or 0)

    async def events(self, run_id: str, after: int) -> list[tuple[int, Event]]:
        """A run's stored events with ids above `after`."""
        async with self._engine.connect() as connection:
            rows = await connection.execute(
                select(_EVENTS.c.seq, _EVENTS.c.data)
                .where(_EVENTS.c.run_id == run_id, _EVENTS.c.seq > after)
                .order_by(_EVENTS.c.seq)
            )
            return [(int(seq), EVENTS.validate_python(data)) for seq, data in rows]
