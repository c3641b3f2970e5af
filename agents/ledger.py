"""Run-wide shared state: the token budget and progress events of each run.

A run's delegation tree spans many actors (parallel branches included), so the budget lives in
one place. `RunLedger` is plain Python; `agents.actor` hosts it in a Ray actor.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["EventSink", "Ledger", "RunLedger", "SpanSource"]

MAX_EVENTS_PER_RUN = 10_000
# Finished runs whose events stay readable (a client may still be catching up), oldest dropped.
MAX_CLOSED_RUNS = 256


class Ledger(Protocol):
    """The budget as seen by an agent: ask before spending, report after."""

    async def tokens_left(self, run_id: str) -> int | None: ...

    def charge(self, run_id: str, tokens: int) -> None: ...


class SpanSource(Protocol):
    """This process's finished spans, by trace (see `tracing.SpanCollector`)."""

    def drain(self, trace_id: int) -> list[dict[str, Any]]: ...


class EventSink(Protocol):
    """Where progress events go (fire and forget; telemetry never breaks a run)."""

    def emit(self, run_id: str, event: dict[str, Any]) -> None: ...

    def keep_spans(self, run_id: str, spans: list[dict[str, Any]]) -> None:
        """Queue finished spans of a run; they go out with the next flush."""

    def flush(self) -> None:
        """Send what is buffered now (called when an invocation ends)."""


@dataclass
class _RunBook:
    budget: int | None
    spent: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0
    spans: list[dict[str, Any]] = field(default_factory=list)


class RunLedger:
    """Budgets and event lists of the runs in flight, keyed by run id."""

    def __init__(self) -> None:
        self._runs: dict[str, _RunBook] = {}
        self._closed: OrderedDict[str, _RunBook] = OrderedDict()

    def open(self, run_id: str, budget: int | None) -> None:
        # An agent's first event may arrive before `open` (different callers): keep it.
        book = self._runs.setdefault(run_id, _RunBook(budget=budget))
        book.budget = budget

    def close(self, run_id: str) -> None:
        """Stop counting the run; its events and spans stay readable for a while."""
        book = self._runs.pop(run_id, None)
        if book is not None:
            self._closed[run_id] = book
            while len(self._closed) > MAX_CLOSED_RUNS:
                self._closed.popitem(last=False)

    def tokens_left(self, run_id: str) -> int | None:
        book = self._runs.get(run_id)
        if book is None or book.budget is None:
            return None
        return book.budget - book.spent

    def charge(self, run_id: str, tokens: int) -> None:
        book = self._runs.get(run_id)
        if book is not None:
            book.spent += tokens

    def keep_spans(self, run_id: str, spans: list[dict[str, Any]]) -> None:
        book = self._runs.get(run_id) or self._closed.get(run_id)
        if book is None:  # like events, spans may arrive before `open`
            book = self._runs[run_id] = _RunBook(budget=None)
        book.spans.extend(spans)

    def trace_state(self, run_id: str) -> tuple[list[dict[str, Any]], int]:
        """The run's spans so far, and how many agent invocations have started."""
        book = self._runs.get(run_id) or self._closed.get(run_id)
        if book is None:
            return [], 0
        return list(book.spans), sum(e.get("type") == "agent_started" for e in book.events)

    def emit(self, run_id: str, event: dict[str, Any]) -> None:
        book = self._runs.get(run_id)
        if book is None:
            if run_id in self._closed:
                return
            book = self._runs[run_id] = _RunBook(budget=None)
        if len(book.events) >= MAX_EVENTS_PER_RUN:
            book.dropped += 1  # bounded memory; the trace keeps the full record
            return
        book.events.append(event)

    def events(self, run_id: str, after: int = 0) -> list[dict[str, Any]]:
        book = self._runs.get(run_id) or self._closed.get(run_id)
        return book.events[after:] if book else []
