"""Run-wide shared state: the token budget, progress events and late spans of each run.

A run's delegation tree spans many actors (parallel branches included), so the budget lives in
one place. `RunLedger` is plain Python; `agents.ray.ledger_actor` hosts it in an async Ray actor
that adds waiting (for new events, for the spans of every invocation).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents.core.events import (
    AgentStarted,
    ApprovalDecided,
    ApprovalRequested,
    Event,
    RunStarted,
)
from agents.core.ports import Decision, RunState
from agents.runtime.causal import CausalOrder
from tracing import agent_span_counts

__all__ = ["RunLedger"]

MAX_EVENTS_PER_RUN = 10_000
# Events of all runs kept in order for the services' one stream each (`RunLedger.feed`).
MAX_FEED = 50_000
# Finished runs whose events stay readable (a client may still be catching up), oldest dropped.
MAX_CLOSED_RUNS = 256


@dataclass
class _RunBook:
    budget: int | None
    spent: int = 0
    events: list[Event] = field(default_factory=list)
    dropped: int = 0
    started: int = 0  # agent invocations begun (counted even when events are dropped)
    spans: list[dict[str, Any]] = field(default_factory=list)
    agent_spans: int = 0  # `invoke_agent` spans among `spans`, each an invocation's own
    lost_spans: int = 0  # `invoke_agent` spans made for invocations whose spans were lost
    shipments: dict[str, tuple[int, int]] = field(default_factory=dict)  # sender -> got, highest
    received: dict[str, int] = field(default_factory=dict)  # process -> its events that came
    handovers: set[str] = field(default_factory=set)  # keys of the handovers opened
    effects: dict[str, list[str]] = field(default_factory=dict)  # attempt -> tools started
    approvals: dict[str, ApprovalRequested] = field(default_factory=dict)  # call id -> request
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)  # call id -> decision
    approvals_changed: int = 0
    epoch: int = 0  # how many times the run was resumed (older work may not cause effects)
    base: int = 0  # events of earlier lives of the run, in the store only (ids continue)
    order: CausalOrder = field(default_factory=CausalOrder)  # events waiting for their cause
    opened: bool = False  # its `run_started` came (it may come twice: see `emit`)


class RunLedger:
    """Budgets, event lists and late spans of the runs in flight, keyed by run id."""

    def __init__(self, on_event: Callable[[str, int, Event], None] | None = None) -> None:
        """`on_event` sees each numbered event (the step log's writer stores them)."""
        self._on_event = on_event
        self._runs: dict[str, _RunBook] = {}
        self._closed: OrderedDict[str, _RunBook] = OrderedDict()
        self._feed: deque[tuple[str, int, Event]] = deque(maxlen=MAX_FEED)
        self._fed = 0  # events ever put on the feed: the position of the newest
        self._holding: set[str] = set()  # open runs with events waiting for their cause

    def feed(self, cursor: int) -> tuple[list[tuple[str, int, Event]], int, bool]:
        """Every run's events after position `cursor` of the feed, as (run, id, event).

        Events that are not stored (`model_delta`) are on the feed only, with id 0.

        Returns them, the new position, and whether some were missed: the caller fell behind
        by more than the feed keeps, or the ledger is new (restarted). A negative `cursor`
        means "from now on".
        """
        for run_id in list(self._holding):  # only runs with events waiting for their cause
            book = self._runs.get(run_id)
            if book is not None:
                self._release_late(run_id, book)
            if book is None or not book.order.holding:
                self._holding.discard(run_id)
        if cursor < 0:
            return [], self._fed, False
        if cursor > self._fed:  # a position of a ledger before this one
            return [], self._fed, True
        behind = self._fed - cursor
        kept = min(behind, len(self._feed))
        # From the right end: skipping to a place from the left walks the whole (full) deque.
        items = list(itertools.islice(reversed(self._feed), kept))
        items.reverse()
        return items, self._fed, behind > kept

    def _book(self, run_id: str) -> _RunBook | None:
        return self._runs.get(run_id) or self._closed.get(run_id)

    def _open_book(self, run_id: str) -> _RunBook:
        # An agent's first event may arrive before `open` (different callers): keep it.
        book = self._runs.get(run_id)
        if book is None:
            book = self._runs[run_id] = _RunBook(budget=None)
        return book

    def open(self, run_id: str, budget: int | None) -> None:
        """Start counting a run, with its token budget (None: no budget)."""
        self._open_book(run_id).budget = budget

    def resume(
        self,
        run_id: str,
        budget: int | None,
        epoch: int,
        base: int,
    ) -> None:
        """Start counting a run again, in its life number `epoch`.

        A book this ledger still holds keeps its events (their ids go on); a new one numbers
        its events after `base`, the highest id stored. Spans and budget start afresh: the
        resumed execution sends and charges everything again.
        """
        book = self._runs.pop(run_id, None) or self._closed.pop(run_id, None)
        fresh = _RunBook(budget=budget, epoch=epoch)
        if book is not None:
            fresh.events, fresh.dropped, fresh.base = book.events, book.dropped, book.base
            fresh.approvals, fresh.decisions = book.approvals, book.decisions
            fresh.received = book.received
        else:
            fresh.base = base
        self._runs[run_id] = fresh

    def epoch(self, run_id: str) -> int:
        """The run's life number (0 until it is resumed)."""
        book = self._book(run_id)
        return book.epoch if book is not None else 0

    def close(self, run_id: str) -> None:
        """Stop counting the run; its events stay readable for a while."""
        book = self._runs.pop(run_id, None)
        if book is not None:
            book.spans = []  # collected by now; a finished run's spans live in the store
            self._closed[run_id] = book
            while len(self._closed) > MAX_CLOSED_RUNS:
                self._closed.popitem(last=False)

    def state(self, run_id: str) -> RunState:
        """Whether the ledger is counting the run, has closed it, or does not know it."""
        if run_id in self._runs:
            return "open"
        return "closed" if run_id in self._closed else "unknown"

    def finish(
        self, run_id: str, final: Event, first: Event | None = None, returning: bool = True
    ) -> list[tuple[int, Event]]:
        """Record the run's last event and close it; return all its events with their ids.

        `first`: the run's first event, recorded first if it has not come (it rides with the
        entry agent's events, which never come when the entry agent was never reached).
        `returning`: False returns none (they stay readable).
        """
        if run_id not in self._closed:
            book = self._open_book(run_id)
            if first is not None and not book.opened:
                self.emit(run_id, first)
            for held in book.order.drain():  # their causes will not come now
                self._append(run_id, book, held)
            self.emit(run_id, final)
        self.close(run_id)
        return self.numbered(run_id) if returning else []

    def tokens_left(self, run_id: str) -> int | None:
        """Tokens the run may still spend (None: no budget, or not counted here)."""
        book = self._runs.get(run_id)
        if book is None or book.budget is None:
            return None
        return book.budget - book.spent

    def charge(self, run_id: str, tokens: int) -> None:
        """Count tokens the run spent."""
        book = self._runs.get(run_id)
        if book is not None:
            book.spent += tokens

    def record_effect(self, run_id: str, attempts: tuple[str, ...], tool: str) -> None:
        """Note that `tool` (run at most once) is about to run under these delegation attempts."""
        book = self._open_book(run_id)
        for attempt in attempts:
            book.effects.setdefault(attempt, []).append(tool)

    def effects(self, run_id: str, attempt: str) -> list[str]:
        """The tools that must run at most once started under this delegation attempt.

        At any depth below it.
        """
        book = self._book(run_id)
        return list(book.effects.get(attempt, ())) if book is not None else []

    def request_approval(self, run_id: str, call_id: str, event: ApprovalRequested) -> str:
        """Register a pending call and announce it; return its id, made unique in the run."""
        book = self._open_book(run_id)
        unique, n = call_id, 1
        while unique in book.approvals:  # built-in models reuse call ids across agents
            n += 1
            unique = f"{call_id}-{n}"
        request = event.model_copy(update={"call_id": unique})
        book.approvals[unique] = request
        book.approvals_changed += 1
        self.emit(run_id, request)
        return unique

    def decide(
        self, run_id: str, call_id: str, approved: bool, message: str, by: str
    ) -> tuple[Decision, dict[str, Any] | None]:
        """Approve or deny a pending call (by a person, or by expiry): the first word counts."""
        # A closed run still knows its decisions: a second word on a call is "decided already"
        # even when the run ended in between.
        book = self._book(run_id)
        request = book.approvals.get(call_id) if book is not None else None
        if book is None or request is None:
            return "unknown", None
        if call_id in book.decisions:
            return "already_decided", book.decisions[call_id]
        if run_id not in self._runs:
            return "unknown", None  # closed: nothing waits for a decision any more
        decision = {"approved": approved, "message": message, "by": by}
        book.decisions[call_id] = decision
        book.approvals_changed += 1
        self.emit(
            run_id,
            ApprovalDecided(
                agent=request.agent,
                chain=request.chain,
                invocation=request.invocation,
                call_id=call_id,
                tool=request.tool,
                approved=approved,
                message=message,
                by=by,  # type: ignore[arg-type]
            ),
        )
        return "decided", decision

    def request(self, run_id: str, call_id: str) -> ApprovalRequested | None:
        """The request of a call that waits (or waited) for approval."""
        book = self._book(run_id)
        return book.approvals.get(call_id) if book is not None else None

    def decision(self, run_id: str, call_id: str) -> dict[str, Any] | None:
        """The decision on a pending call, or None while it waits."""
        book = self._book(run_id)
        return book.decisions.get(call_id) if book is not None else None

    def pending(self, run_id: str) -> list[ApprovalRequested]:
        """The calls of the run waiting for a decision, oldest first."""
        book = self._runs.get(run_id)
        if book is None:
            return []
        return [r for call, r in book.approvals.items() if call not in book.decisions]

    def approvals_version(self, run_id: str) -> int:
        """A number that changes whenever the run's approvals do."""
        book = self._book(run_id)
        return book.approvals_changed if book is not None else 0

    def keep_spans(
        self, run_id: str, spans: list[dict[str, Any]], sender: str = "", number: int = 0
    ) -> None:
        """Keep finished spans that agents sent for the run (dropped once it is closed).

        `number` counts the run's shipments from `sender` (1, 2, ...): a gap means one is
        still on its way.
        """
        if run_id in self._closed:
            return  # too late for the run's record
        book = self._open_book(run_id)
        book.spans.extend(spans)
        if number:
            got, highest = book.shipments.get(sender, (0, 0))
            book.shipments[sender] = (got + 1, max(highest, number))
        own, lost = agent_span_counts(spans)
        book.agent_spans += own
        book.lost_spans += lost

    def received(self, run_id: str, sender: str) -> int:
        """How many of the run's events emitted by the process `sender` have come."""
        book = self._book(run_id)
        return book.received.get(sender, 0) if book is not None else 0

    def first_sight(self, run_id: str, key: str) -> bool:
        """Whether a handover of the run (`agents.ray.handover`) comes for the first time."""
        if run_id in self._closed:
            return False  # too late for the run's record
        book = self._open_book(run_id)
        if key in book.handovers:
            return False
        book.handovers.add(key)
        return True

    def shipments_from(self, run_id: str, sender: str) -> int:
        """How many of the run's span shipments from `sender` have come."""
        book = self._book(run_id)
        return book.shipments.get(sender, (0, 0))[0] if book is not None else 0

    def span_progress(self, run_id: str) -> tuple[int, int, int, int]:
        """Invocations started, invocations whose spans came, lost ones, shipments on their way.

        Lost invocations' spans were made by their callers instead. A shipment is on its way
        when a later one from the same process came first (its number was skipped).
        """
        book = self._book(run_id)
        if book is None:
            return 0, 0, 0, 0
        gaps = sum(highest - got for got, highest in book.shipments.values())
        return book.started, book.agent_spans, book.lost_spans, gaps

    def snapshot(self, run_id: str) -> tuple[list[dict[str, Any]], list[Event]]:
        """Copies of the spans sent so far and of the events (what a live view reads)."""
        book = self._book(run_id)
        return (list(book.spans), list(book.events)) if book is not None else ([], [])

    def take_spans(self, run_id: str) -> list[dict[str, Any]]:
        """The spans sent so far (each handed out once)."""
        book = self._book(run_id)
        if book is None:
            return []
        spans, book.spans = book.spans, []
        return spans

    def emit(self, run_id: str, event: Event, sender: str = "") -> None:
        """Record a progress event of the run (bounded per run; dropped once it is closed).

        Events go out (numbered, on the feed) in causal order: one whose cause is still on its
        way from another process waits for it (`agents.runtime.causal`). `sender` names the
        process that emitted it (see `received`).
        """
        if run_id in self._closed:
            return
        book = self._open_book(run_id)
        if sender:
            book.received[sender] = book.received.get(sender, 0) + 1
        if not event.stored:  # streamed text: straight to the followers, unnumbered (id 0)
            self._fed += 1
            self._feed.append((run_id, 0, event))
            return
        if isinstance(event, AgentStarted):
            book.started += 1
        elif isinstance(event, RunStarted):
            if book.opened:  # sent again with a retried entry delegation
                return
            book.opened = True
        self._release_late(run_id, book)
        for released in book.order.admit(event):
            self._append(run_id, book, released)
        if book.order.holding:
            self._holding.add(run_id)

    def _release_late(self, run_id: str, book: _RunBook) -> None:
        """Let out the run's events held past the wait for their cause."""
        if book.order.holding:
            for released in book.order.overdue():
                self._append(run_id, book, released)

    def _append(self, run_id: str, book: _RunBook, event: Event) -> None:
        if len(book.events) >= MAX_EVENTS_PER_RUN:
            book.dropped += 1  # bounded memory; the trace keeps the full record
            return
        book.events.append(event)
        seq = book.base + len(book.events)
        self._fed += 1
        self._feed.append((run_id, seq, event))
        if self._on_event is not None:
            self._on_event(run_id, seq, event)

    def events(self, run_id: str, after: int = 0) -> list[Event]:
        """The run's events held here with ids above `after`."""
        return [event for _, event in self.numbered(run_id, after)]

    def numbered(self, run_id: str, after: int = 0) -> list[tuple[int, Event]]:
        """Events after id `after`, each with its id (ids never change).

        Ids are 1-based positions in the run's whole event log; a resumed run's events from
        before its resume are in the store only, so the first id here may be above `after + 1`.
        """
        book = self._book(run_id)
        if book is None:
            return []
        start = max(after - book.base, 0)
        return list(enumerate(book.events[start:], start=book.base + start + 1))
