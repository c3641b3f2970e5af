"""What the run store hands out: plain records, importable without SQLAlchemy.

The CLI and the API's schemas use these; only code that opens a store loads the database stack.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from agents.core.messages import RunStatus, Usage
from agents.core.storable import stored_text
from orchestrator.engine.submission import ForkPoint, Lineage

if TYPE_CHECKING:
    from orchestrator.engine.results import RunResult

__all__ = [
    "DEFAULT_POOL_SIZE",
    "DEFAULT_STORE_URL",
    "DEFAULT_STORE_WAIT_S",
    "POOL_OVERFLOW",
    "DuplicateIdempotencyKey",
    "ForkPoint",
    "RunMeta",
    "RunPage",
    "StoreRefused",
    "StoredRun",
    "answerer",
    "end_values",
    "shown_url",
    "store_url_of",
]

DEFAULT_STORE_URL = "sqlite+aiosqlite:///baton.db"
# Connections a store keeps open. SQLAlchemy's default keeps 5 and opens up to 10 more in a
# burst, closing each after use: a service following 50 runs at once opened and closed a
# connection (on SQLite, a thread too) for most of its reads, 0.4 ms of CPU each. Measured with
# bench/http_throughput.py: the service's CPU per task 8.2-8.6 ms with 5, 6.9-8.0 with 20.
DEFAULT_POOL_SIZE = 20
# More connections a burst may open beyond the pool, each closed after use.
POOL_OVERFLOW = 10
# How long a store call waits on the database (a connection, a statement, SQLite's write lock)
# before it fails: the API answers 503 with Retry-After instead of holding its client.
DEFAULT_STORE_WAIT_S = 5.0


class DuplicateIdempotencyKey(Exception):
    """Another run already holds this idempotency key."""


class StoreRefused(Exception):
    """The run store cannot be opened as named (the message says why, with no credential)."""


# The schemes people write, and the async drivers Baton ships for them.
_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
    "postgresql+asyncpg": "postgresql+asyncpg",
}


def store_url_of(url: str) -> str:
    """A run store's URL with its driver, as SQLAlchemy opens it.

    `sqlite:///PATH` and `postgresql://...` (or `postgres://`) take the async drivers Baton
    ships (aiosqlite, asyncpg).

    Raises:
        StoreRefused: another database or driver (the message names the fix).
    """
    scheme, sep, rest = url.partition("://")
    driver = _DRIVERS.get(scheme.lower()) if sep else None
    if driver is None:
        raise StoreRefused(
            f"the run store URL {shown_url(url)!r} names no store Baton opens: use "
            "sqlite:///PATH (a file) or postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
        )
    return f"{driver}://{rest}"


def shown_url(url: str) -> str:
    """A store's URL as it may be printed or logged: its password replaced by `***`."""
    scheme, sep, rest = url.partition("://")
    who, at, where = rest.rpartition("@")
    if not sep or not at or ":" not in who:
        return url
    user = who.split(":", 1)[0]
    return f"{scheme}://{user}:***@{where}"


@dataclass(frozen=True)
class RunMeta:
    """What the service records of a new run beside its request.

    Attributes:
        run_id: the run's id.
        system: the team's name (its config's).
        config: the team's config as the API shows it (no secrets).
        version: the version of the team it runs on: `{release}+{config digest}`.
        owner: the service instance that runs it (None: none yet).
        idempotency_key: the caller-scoped key that made it, if any.
        lineage: a replay or fork of another run (none: its own first life).
    """

    run_id: str
    system: str
    config: dict[str, Any]
    version: str | None = None
    owner: str | None = None
    idempotency_key: str | None = None
    lineage: Lineage = field(default_factory=Lineage)


class StoredRun(BaseModel):
    """A run as the store keeps it."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    status: RunStatus
    task: str
    # The entry agent asked for (`auto`, a name, or None: the config's); the one that ran.
    agent: str | None = Field(validation_alias=AliasChoices("agent", "requested_agent"))
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
    unpriced_calls: int = 0
    created_at: float
    started_at: float | None
    finished_at: float | None
    duration_s: float | None
    tree: dict[str, Any] | None
    state: dict[str, Any] | None = None  # the shared state it ended with
    owner: str | None = None
    request_hash: str | None = None
    cancel_requested: bool = False
    options: dict[str, Any] | None = None
    resumes: int = 0
    replay_of: str | None = None
    fork: bool = False
    fork_from: ForkPoint | None = None
    # The thread it is a turn of (the store's `context_id` column: an A2A contextId names one).
    thread_id: str | None = Field(
        default=None, validation_alias=AliasChoices("thread_id", "context_id")
    )
    tenant: str = "default"
    submitted_by: str | None = None
    cancelled_by: str | None = None
    # The version of the team it runs on (`{release}+{config digest}`): a resumed run's is the
    # one its last life runs on, which finished it; `began_on`: the one it began on.
    version: str | None = None
    began_on: str | None = None

    @property
    def finished(self) -> bool:
        """Whether the run is over."""
        return self.status.finished

    @property
    def answered_by(self) -> str | None:
        """The agent whose answer is the run's (None: it has not ended)."""
        return answerer(self.entry_agent, self.tree) if self.finished else None

    @property
    def usage(self) -> Usage:
        """Its tokens, model calls and cost, as one record."""
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            model_calls=self.model_calls,
            cost_usd=self.cost_usd,
            unpriced_calls=self.unpriced_calls,
        )


class RunPage(BaseModel):
    """A page of runs, and how many match in all."""

    runs: list[StoredRun]
    total: int
    usage: Usage = Field(default_factory=Usage, description="Of every run that matched.")


def absolute_store_url(store_url: str) -> str | None:
    """The store's URL as another process opens it (a relative SQLite path made absolute).

    None for an in-memory SQLite store, which no other process can reach: its runs keep no
    step log, and cannot resume.
    """
    scheme, sep, path = store_url.partition(":///")
    if not scheme.startswith("sqlite") or not sep:
        return store_url
    if not path or path.startswith(":memory:"):
        return None
    return f"{scheme}:///{os.path.abspath(path)}" if not path.startswith("/") else store_url


def answerer(entry_agent: str | None, tree: dict[str, Any] | None) -> str | None:
    """The agent whose answer a run's is: its entry's, or the one the entry handed over to."""
    return (tree or {}).get("answered_by") or entry_agent


def end_values(result: RunResult) -> dict[str, Any]:
    """How a run ended, as the values of its row: what its end sets (JSON-ready)."""
    return {
        "task": stored_text(result.task),  # (an input guardrail may have blocked part of it)
        "status": result.status.value,
        "entry_agent": result.entry_agent,
        "routing": result.routing.model_dump(mode="json") if result.routing else None,
        "output": stored_text(result.output),
        "error": stored_text(result.error),
        "input_tokens": result.usage.input_tokens,
        "output_tokens": result.usage.output_tokens,
        "model_calls": result.usage.model_calls,
        "cost_usd": result.usage.cost_usd,
        "unpriced_calls": result.usage.unpriced_calls,
        "started_at": result.started_at,
        "finished_at": result.started_at + result.duration_s,
        "duration_s": result.duration_s,
        "tree": result.tree.model_dump(mode="json") if result.tree else None,
        "state": result.state,
    }
