"""What the agent runtime needs from the run-wide record, as typed seams.

`agents.runtime.ledger.RunLedger` (in-process) and `agents.ray.ledger_client.LedgerClient` (a
Ray actor's client) provide them; the runtime sees only these protocols.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from agents.core.events import ApprovalRequested, Event, InputRequested
from tracing import SpanRecord

__all__ = [
    "Approvals",
    "Decision",
    "EventSink",
    "Gates",
    "Ledger",
    "RunState",
    "SpanSource",
    "Waiting",
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

    async def spend_check(self, run_id: str) -> tuple[str | None, list[tuple[str, str]]]:
        """Whether the run may make another model call under its spending caps.

        None, or the cap it reached; and warnings (scope, message) it was not given yet.
        """

    async def record_effect(self, run_id: str, attempts: tuple[str, ...], tool: str) -> None:
        """Note that `tool` (not idempotent) is about to run under these delegation attempts."""


class Gates(Protocol):
    """The cluster's provider gates, as a model call sees them (`agents.runtime.gates`)."""

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


class Approvals(Protocol):
    """Where a run waits for a person: a call for a decision, a question for an answer."""

    async def request_approval(self, run_id: str, call_id: str, event: ApprovalRequested) -> str:
        """Register the pending call and announce it (`event` is its `approval_requested` event).

        Returns the id under which it is approved (the call id, made unique).
        """

    async def await_decision(
        self, run_id: str, call_id: str, wait_s: float
    ) -> dict[str, Any] | None:
        """The decision on a pending call, waiting up to `wait_s` for one (None: none yet)."""

    async def decide(
        self,
        run_id: str,
        call_id: str,
        approved: bool,
        message: str,
        by: str,
        who: str = "",
        arguments: dict[str, Any] | None = None,
    ) -> tuple[Decision, dict[str, Any] | None]:
        """Approve (with `arguments` instead of the call's, if edited) or deny a pending call.

        The first decision counts; `who` made it.
        """

    async def ask(self, run_id: str, event: InputRequested, again: bool) -> None:
        """Register a question (`event.call_id` is its id) and announce it, unless `again`."""

    async def answer(
        self, run_id: str, call_id: str, answer: str, by: str, who: str = ""
    ) -> tuple[Decision, dict[str, Any] | None]:
        """Answer a question; the first answer counts (`who` gave it)."""


# What a run waits for from a person: an answer to a question, a decision on a call, or nothing.
Waiting = Literal["input", "approval"] | None

# What a decision on a pending call did: taken, too late (already decided), or no such call.
Decision = Literal["decided", "already_decided", "unknown"]


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

    def flush(self) -> None:
        """Send what is queued now (called when an invocation ends)."""
