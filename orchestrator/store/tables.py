"""The run store's tables (SQLAlchemy 2 declarative). Migrations in `migrations/` create them."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = [
    "EVENTS_TABLE",
    "RUNS_TABLE",
    "SPANS_TABLE",
    "Base",
    "EventRow",
    "MemoryRow",
    "RunRow",
    "SpanRow",
    "SpendRow",
    "StepRow",
    "ThreadRow",
]


class Base(DeclarativeBase):
    """The tables' declarative base."""

    pass


class RunRow(Base):
    """One run: what was asked, how it went, and the config it ran with."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    status: Mapped[str] = mapped_column(String(32))
    task: Mapped[str] = mapped_column(Text)
    requested_agent: Mapped[str | None] = mapped_column(String(64))
    entry_agent: Mapped[str | None] = mapped_column(String(64))
    system: Mapped[str] = mapped_column(String(64))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    routing: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    output: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    model_calls: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    unpriced_calls: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float)
    duration_s: Mapped[float | None] = mapped_column(Float)
    tree: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    state: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # as it ended
    # The service instance running it, and when that instance last said it still is.
    owner: Mapped[str | None] = mapped_column(String(255))
    heartbeat_at: Mapped[float | None] = mapped_column(Float)
    # Scoped by the caller's identity; the hash of the request body it came with.
    idempotency_key: Mapped[str | None] = mapped_column(String(320))
    request_hash: Mapped[str | None] = mapped_column(String(64))
    # Set by any instance; the owner cancels the run when it sees it.
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    # What the request asked for besides the task (budget, deadline).
    options: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # How many times the run was resumed after an interruption (its epoch).
    resumes: Mapped[int] = mapped_column(Integer, default=0)
    # The run whose step log this run replays (None: a run of its own).
    replay_of: Mapped[str | None] = mapped_column(String(64))
    # A fork goes on live where its record ends or its requests differ; a replay does not.
    fork: Mapped[bool] = mapped_column(Boolean, default=False)
    # The step a fork went on live from: {"span_id", "step" (invocation/key), "label"}.
    fork_from: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # The conversation the run belongs to (an A2A contextId; None: a conversation of its own).
    context_id: Mapped[str | None] = mapped_column(String(255))
    # Whose it is (only its tenant's keys see it) and who submitted it (a key's name).
    tenant: Mapped[str] = mapped_column(String(64), default="default", server_default="default")
    submitted_by: Mapped[str | None] = mapped_column(String(255))
    # Who asked it to stop (a key's name), when someone did.
    cancelled_by: Mapped[str | None] = mapped_column(String(255))
    # The version of the team it runs on (a resumed run: the one its last life runs on):
    # `{release}+{config digest}` (or the digest alone); and the one it began on.
    version: Mapped[str | None] = mapped_column(String(80))
    began_on: Mapped[str | None] = mapped_column(String(80))

    __table_args__ = (
        Index("ix_runs_created_at", "created_at"),
        Index("ix_runs_tenant_created_at", "tenant", "created_at"),
        Index("ix_runs_status", "status"),
        Index("ix_runs_entry_agent", "entry_agent"),
        Index("ix_runs_owner_status", "owner", "status"),
        Index("ix_runs_context_id", "context_id"),
        UniqueConstraint("idempotency_key", name="uq_runs_idempotency_key"),
    )


class SpanRow(Base):
    """One finished span of a run (see `tracing.records.span_record`)."""

    __tablename__ = "spans"

    run_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    span_id: Mapped[str] = mapped_column(String(16), primary_key=True)
    trace_id: Mapped[str] = mapped_column(String(32))
    parent_span_id: Mapped[str | None] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(256))
    kind: Mapped[str] = mapped_column(String(16))
    start_ns: Mapped[int] = mapped_column(BigInteger)
    end_ns: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(16))
    status_message: Mapped[str | None] = mapped_column(Text)
    attributes: Mapped[dict[str, Any]] = mapped_column(JSON)
    events: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    resource: Mapped[dict[str, Any]] = mapped_column(JSON)


class EventRow(Base):
    """One progress event of a finished run, in the order (and with the ids) clients saw."""

    __tablename__ = "run_events"

    run_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    type: Mapped[str] = mapped_column(String(64))
    data: Mapped[dict[str, Any]] = mapped_column(JSON)


class StepRow(Base):
    """One recorded step of an agent invocation (see `agents.core.steps`).

    Written by the system's ledger actor (`agents.ledger.writer`) as the run goes on.
    """

    __tablename__ = "run_steps"

    run_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    invocation: Mapped[str] = mapped_column(String(32), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    epoch: Mapped[int] = mapped_column(Integer, default=0)
    at: Mapped[float] = mapped_column(Float)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)


class PushConfigRow(Base):
    """Where to push a run's A2A task updates: one webhook a client registered.

    Its config as A2A's TaskPushNotificationConfig says it, token and credentials included.
    """

    __tablename__ = "push_configs"

    run_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    # Who registered it (a hash of the caller's credentials): only they read or delete it.
    owner: Mapped[str] = mapped_column(String(64))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Float)


class ThreadRow(Base):
    """A conversation: its runs (those whose `context_id` is its id) are its turns, in order."""

    __tablename__ = "threads"
    __table_args__ = (
        Index("ix_threads_created_at", "created_at"),
        Index("ix_threads_tenant_created_at", "tenant", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    created_at: Mapped[float] = mapped_column(Float)
    # (`metadata` is the declarative base's own name.)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON)
    # A submission to the thread holds it until then (`Threads.hold`): one at a time, whichever
    # replica takes it, so that a thread's multitask strategy sees every run.
    held_until: Mapped[float | None] = mapped_column(Float, nullable=True)
    # Whose it is: only its tenant's keys see it (and its runs are of the same tenant).
    tenant: Mapped[str] = mapped_column(String(64), default="default", server_default="default")
    # The entry agent of its turns that name none (`last`: whichever answered the last turn).
    agent: Mapped[str | None] = mapped_column(String(255), nullable=True)
    # The shared state its next turn begins with; its version counts each change.
    state: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    state_version: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class SpendRow(Base):
    """What model replies spent in a UTC day, summed by tenant, key, agent and model.

    Written by the ledger with each reply (`agents.ledger.writer`); read by the caps (today's
    sums of a tenant or a key) and `GET /v1/usage`.
    """

    __tablename__ = "spend"
    __table_args__ = (Index("ix_spend_day_who", "day", "who"),)

    day: Mapped[str] = mapped_column(String(10), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    who: Mapped[str] = mapped_column(String(255), primary_key=True)
    agent: Mapped[str] = mapped_column(String(255), primary_key=True)
    model: Mapped[str] = mapped_column(String(255), primary_key=True)
    calls: Mapped[int] = mapped_column(Integer, default=0)
    input_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    unpriced_calls: Mapped[int] = mapped_column(Integer, default=0)


class ExperimentRow(Base):
    """One `baton eval` of a dataset: its config's digest, and each case's run and verdicts."""

    __tablename__ = "experiments"
    __table_args__ = (Index("ix_experiments_dataset_created_at", "dataset", "created_at"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    dataset: Mapped[str] = mapped_column(String(255))
    dataset_digest: Mapped[str] = mapped_column(String(64))
    config: Mapped[str] = mapped_column(String(255))  # the system's name
    config_digest: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(Float)
    # Whose it is (its runs are that tenant's): only its tenant's keys see it.
    tenant: Mapped[str] = mapped_column(String(64), default="default", server_default="default")
    # [{case, repeat, outcome, error, run_id, cost_usd, duration_s, tokens, live_calls,
    #   verdicts: [{name, passed, detail, error}]}]
    results: Mapped[list[dict[str, Any]]] = mapped_column(JSON)


class MemoryRow(Base):
    """A long-term memory item: a JSON value under a key in a namespace of one tenant.

    Written and searched by `agents.memory.MemoryItems` (the ledger, for agents' tools; the
    service, for `/v1/memory`); `text` is what a search looks in (the key and the value's
    JSON, lower-case).
    """

    __tablename__ = "memory"
    __table_args__ = (Index("ix_memory_tenant_updated_at", "tenant", "updated_at"),)

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    namespace: Mapped[str] = mapped_column(String(528), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON)
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    written_by: Mapped[str | None] = mapped_column(String(255), nullable=True)


# The tables themselves, typed, for Core statements (the hot writes and reads skip the ORM).
RUNS_TABLE = cast(Table, RunRow.__table__)
SPANS_TABLE = cast(Table, SpanRow.__table__)
EVENTS_TABLE = cast(Table, EventRow.__table__)
