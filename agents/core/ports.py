"""What the agent runtime needs from the run-wide record, as typed seams.

`agents.runtime.ledger.RunLedger` (in-process) and `agents.ray.ledger_client.LedgerClient` (a
Ray actor's client) provide them; the runtime sees only these protocols.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agents.core.events import ApprovalRequested, Event

__all__ = [
    "Approvals",
    "Decision",
    "EventSink",
    "Handover",
    "Ledger",
    "RunState",
    "SpanShipment",
    "SpanSource",
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

    def charge(self, run_id: str, tokens: int) -> None:
        """Count tokens the run spent."""

    async def record_effect(self, run_id: str, attempts: tuple[str, ...], tool: str) -> None:
        """Note that `tool` (not idempotent) is about to run under these delegation attempts."""


class Approvals(Protocol):
    """Where a call waits for a person: it asks, then waits for the decision."""

    async def request_approval(self, run_id: str, call_id: str, event: ApprovalRequested) -> str:
        """Register the pending call and announce it (`event` is its `approval_requested` event).

        Returns the id under which it is approved (the call id, made unique).
        """

    async def await_decision(
        self, run_id: str, call_id: str, wait_s: float
    ) -> dict[str, Any] | None:
        """The decision on a pending call, waiting up to `wait_s` for one (None: none yet)."""

    async def decide(
        self, run_id: str, call_id: str, approved: bool, message: str, by: str
    ) -> tuple[Decision, dict[str, Any] | None]:
        """Approve or deny a pending call; the first decision counts."""


# Finished spans of one run sent by one process: (run id, the shipment's number, the spans).
SpanShipment = tuple[str, int, list[dict[str, Any]]]


@dataclass(frozen=True)
class Handover:
    """What one process had queued for a run, handed to another process to send as its own.

    It travels with a result (the callee's last events, to its caller) and with a delegation
    (the caller's events so far, to its callee): one ledger call fewer per delegation across
    processes. Opaque here: pickled once where it was queued (`agents.ray.handover`), so that a
    chain carrying it does not pickle it again at every level. `key` names it: one sent again
    (its callee died with it, or perhaps after sending it) is counted once by the ledger.
    """

    run_id: str
    events: int  # events inside, those of handovers sealed inside included
    shipments: int  # span shipments inside, likewise
    sealed: bytes
    origin: str  # the process that queued the events sealed here (not those inside)
    key: str  # unique among the run's handovers
    due: float  # wall-clock time by which its oldest item is to reach the ledger


# What a decision on a pending call did: taken, too late (already decided), or no such call.
Decision = Literal["decided", "already_decided", "unknown"]


class SpanSource(Protocol):
    """This process's finished spans, by trace (see `tracing.SpanCollector`)."""

    def drain(self, trace_id: int) -> list[dict[str, Any]]:
        """Take this process's finished spans of the trace `trace_id`."""


class EventSink(Protocol):
    """Where progress events go (fire and forget; telemetry never breaks a run)."""

    def emit(self, run_id: str, event: Event) -> None:
        """Queue a progress event of the run `run_id`."""

    def keep_spans(self, run_id: str, spans: list[dict[str, Any]]) -> None:
        """Queue finished spans of a run; they go out with the next flush."""

    def flush(self) -> None:
        """Send what is buffered now (called when an invocation ends)."""

    def hand_over(self, run_id: str) -> Handover | None:
        """Take what is queued here for the run out, to travel with a result (None: nothing)."""

    def take_over(self, handover: Handover) -> None:
        """Queue what another process handed over, as this process's own."""

    def shipped(self, run_id: str) -> tuple[str, int]:
        """This process's name, and how many span shipments it has made for the run so far."""

    def emitted(self, run_id: str) -> tuple[str, int]:
        """This process's name, and how many events of the run it has sent so far."""

    def remember(self, run_id: str) -> None:
        """Keep copies of the run's span shipments from now on (its entry runs here)."""

    def recall(self, run_id: str) -> list[dict[str, Any]]:
        """Hand over the copies kept since `remember`, and stop keeping them."""
