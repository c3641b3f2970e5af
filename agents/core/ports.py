"""What the agent runtime needs from the run-wide record, as typed seams.

`agents.ray.ledger_client.LedgerClient` (the ledger actor's client) provides them all as one
`RunRecord`; the runtime sees only these protocols.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from agents.core.events import Event, WaitOpened
from agents.core.steps import StepLog
from agents.core.waits import Outcome, Resolution, Waiting
from agents.memory import MemoryItem
from tracing import SpanRecord

__all__ = [
    "EventSink",
    "Gates",
    "Ledger",
    "Memory",
    "RunReads",
    "RunRecord",
    "RunState",
    "SpanSource",
    "Waits",
]

# Whether the ledger is counting a run, has finished it (events still readable), or has never
# heard of it (not started yet, or finished long ago).
RunState = Literal["open", "closed", "unknown"]


class Ledger(Protocol):
    """The run-wide record as seen by an agent.

    Ask before spending, report after; record a call that must run at most once before making
    it.
    """

    async def tokens_left(self, run_id: str) -> int | None:
        """Tokens the run may still spend (None: no budget)."""

    def charge(self, run_id: str, tokens: int, key: str) -> None:
        """Count tokens the run spent, once per `key`.

        The key names the reply: a call made again after a lost answer is not counted twice.
        """

    async def spend_check(self, run_id: str) -> tuple[str | None, list[tuple[str, str]]]:
        """Whether the run may make another model call under its spending caps.

        None, or the cap it reached; and warnings (scope, message) it was not given yet.
        """

    async def record_effect(self, run_id: str, attempts: tuple[str, ...], tool: str) -> None:
        """Note that `tool` (not idempotent) is about to run under these delegation attempts."""


class Memory(Protocol):
    """Long-term memory as agents' tools reach it (`agents.memory`): a tenant's items.

    Names and values are checked by the caller (`agents.memory.check_key` and the rest).
    """

    async def remember(
        self, tenant: str, namespace: str, key: str, value: Any, written_by: str | None
    ) -> MemoryItem:
        """Write an item (replacing the key's value)."""

    async def recall(self, tenant: str, namespace: str, query: str, limit: int) -> list[MemoryItem]:
        """The items of a namespace and those under it that best match `query`."""

    async def forget(self, tenant: str, namespace: str, key: str) -> bool:
        """Remove an item; whether there was one."""


class Gates(Protocol):
    """The cluster's provider gates, as a model call sees them (`agents.gates.book`)."""

    async def take(
        self, gate: str, tokens: int, hold_s: float, max_wait_s: float
    ) -> tuple[str | None, float, str]:
        """Wait up to `max_wait_s` for a lease on `gate` for a call of about `tokens`.

        The lease (None: none within the wait), the seconds waited, and what held the call.
        """

    def release(self, lease: str, used_tokens: int | None) -> None:
        """The call ended (its reply used `used_tokens`; None: it failed)."""

    def pause(self, gate: str, seconds: float, why: str) -> None:
        """Let no call through `gate` for `seconds` (a provider's `Retry-After`)."""


class Waits(Protocol):
    """Where a run waits for a person (see `agents.core.waits`)."""

    async def open_wait(self, run_id: str, event: WaitOpened, again: bool = False) -> str:
        """Register a wait and announce it (`event`), unless `again` (announced before).

        Returns the wait's id in the run (its `call_id`, made unique if another wait has it).
        """

    async def await_resolution(
        self, run_id: str, wait_id: str, wait_s: float
    ) -> dict[str, Any] | None:
        """How a wait was resolved (`Resolution.record`), waiting up to `wait_s` (None: not yet)."""

    async def resolve(
        self, run_id: str, wait_id: str, resolution: Resolution
    ) -> tuple[Outcome, dict[str, Any] | None]:
        """Resolve a wait of the kind `resolution` is for; the first word counts.

        Returns what happened and the resolution in force (the earlier one, if too late).
        """


class RunReads(Protocol):
    """What the orchestrator reads of a run in flight from the ledger.

    Its service, its dispatcher and its live views read them.
    """

    async def waiting(self, run_id: str) -> list[WaitOpened]:
        """The run's open waits for a person, oldest first."""

    async def watch_waits(
        self, run_id: str, seen: int, wait_s: float
    ) -> tuple[int, Waiting, RunState]:
        """Wait up to `wait_s` for the run's waits to change from version `seen`.

        Returns the version, what the run waits for from a person, and the run's state.
        """

    async def effects(self, run_id: str, attempt: str) -> list[str]:
        """The at-most-once tools started under a delegation attempt (at any depth below it)."""

    async def events(
        self, run_id: str, after: int = 0, wait_s: float = 0.0
    ) -> tuple[list[tuple[int, Event]], RunState]:
        """The run's events with ids above `after`, and the state of its event log.

        Waits up to `wait_s` for a first new event (not once the run is closed).
        """

    async def snapshot(self, run_id: str) -> tuple[list[SpanRecord], list[Event]]:
        """The spans sent so far for a run in flight, and its events (a live view's)."""


class SpanSource(Protocol):
    """This process's finished spans, by trace (see `tracing.SpanCollector`)."""

    def drain(self, trace_id: int) -> list[SpanRecord]:
        """Take this process's finished spans of the trace `trace_id`."""


class EventSink(Protocol):
    """Where progress events and finished spans go, on their way to the ledger in batches.

    Fire and forget: telemetry never breaks a run.
    """

    def emit(self, run_id: str, event: Event) -> None:
        """Queue a progress event of the run `run_id`."""

    def keep_spans(self, run_id: str, spans: list[SpanRecord]) -> None:
        """Queue finished spans of a run; they go out with the next batch."""

    def flush(self, run_id: str) -> None:
        """Send what is queued for the run now (called when one of its invocations ends)."""


class RunRecord(Ledger, Waits, StepLog, Protocol):
    """The run-wide record as one agent sees it.

    Its budget and caps, its waits for a person, its step log, and the sink its events and
    spans go to.
    """

    @property
    def sink(self) -> EventSink:
        """Where progress events and finished spans go (batched to the record)."""
