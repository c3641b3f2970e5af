"""The book of each run in flight: its events in causal order, its spans, its budget.

A run's delegation tree spans many actors (parallel branches included), so its record lives in
one place, and every process sends its events and spans here: the live views, the store and
the exporter read a run's spans from here. `RunLedger` keeps the runs' books and puts what they
record where it goes: numbered events on the feed (`feed.EventFeed`) and to the store's writer,
waits for a person to the run's desk (`desk.WaitDesk`), model replies' spending to the meter
(`spend.SpendMeter`). Plain Python; `agents.ray.ledger_actor` hosts it in an async Ray actor,
with the step log (`steps.StepBook`) and the writer, and adds waiting (for news, for a run's
last items).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from agents.core.events import (
    AgentStarted,
    Event,
    ModelFinished,
    RunFinished,
    RunStarted,
    WaitOpened,
    WaitResolved,
)
from agents.core.ports import RunState
from agents.core.waits import Outcome, Resolution
from agents.ledger.causal import CausalOrder
from agents.ledger.desk import WaitDesk
from agents.ledger.feed import MAX_FEED, EventFeed
from agents.ledger.spend import SpendEntry, SpendMeter
from tracing import SpanRecord, agent_span_counts
from tracing import attributes as attr

__all__ = ["RunLedger"]

MAX_EVENTS_PER_RUN = 10_000
# Finished runs whose events stay readable (a client may still be catching up), oldest dropped.
MAX_CLOSED_RUNS = 256


@dataclass
class _RunBook:
    budget: int | None
    spent: int = 0
    charged: set[str] = field(default_factory=set)  # keys of the charges counted (`charge`)
    events: list[Event] = field(default_factory=list)
    dropped: int = 0
    started: int = 0  # agent invocations begun (counted even when events are dropped)
    spans: list[SpanRecord] = field(default_factory=list)
    agent_spans: int = 0  # `invoke_agent` spans among `spans`, each an invocation's own
    lost_spans: int = 0  # `invoke_agent` spans made for invocations whose spans were lost
    # Items (events and span shipments) that came, by the process that queued them.
    received: dict[str, int] = field(default_factory=dict)
    handovers: set[str] = field(default_factory=set)  # keys of the handovers opened
    desk: WaitDesk = field(default_factory=WaitDesk)  # what waits (or waited) for a person
    epoch: int = 0  # how many times the run was resumed (older work may not cause effects)
    base: int = 0  # events of earlier lives of the run, in the store only (ids continue)
    order: CausalOrder = field(default_factory=CausalOrder)  # events waiting for their cause
    opened: bool = False  # its `run_started` came (it may come twice: see `emit`)
    # Replies counted against the caps as they arrived, before their turn (invocation, seq).
    counted_early: set[tuple[str, int]] = field(default_factory=set)
    # Taken up from the store by a restarted ledger (`RunLedger.recover`): the events stored
    # before, by identity, so that a batch sent again (it was in flight when the ledger died)
    # is not recorded twice.
    stored: set[tuple[str, int, str, str]] | None = None
    persisted: set[str] = field(default_factory=set)  # ids of its spans sent to the store
    # While its last events are being stored with its end (`RunLedger.finish`): how many of
    # its events readers see.
    shown: int | None = None


class RunLedger:
    """Budgets, events and spans of the runs in flight, keyed by run id."""

    def __init__(
        self,
        on_event: Callable[[str, int, Event], None] | None = None,
        on_spend: Callable[[SpendEntry], None] | None = None,
        on_spans: Callable[[str, list[SpanRecord]], None] | None = None,
        max_feed: int = MAX_FEED,
    ) -> None:
        """Hold runs' books; `on_event`, `on_spend` and `on_spans` see what the store keeps.

        `on_event`: each numbered event (the step log's writer stores them); `on_spend`: each
        model reply's spending (kept by day, tenant, key, agent and model); `on_spans`: the
        finished spans of a run as they come (but lost invocations' stand-ins, which take
        their final id at the run's end: `unpersisted`), so that a restarted ledger finds them.
        `max_feed`: events of every run kept on the feed (`feed`), newest last.
        """
        self._on_event = on_event
        self._on_spend = on_spend
        self._on_spans = on_spans
        self.spend = SpendMeter()
        self._runs: dict[str, _RunBook] = {}
        self._closed: OrderedDict[str, _RunBook] = OrderedDict()
        self._feed = EventFeed(max_feed)
        self._holding: set[str] = set()  # open runs with events waiting for their cause
        # Runs whose last events wait to be stored before they go out (`finish`): feed items.
        self._unannounced: dict[str, list[tuple[int, Event]]] = {}

    def feed(self, cursor: int) -> tuple[list[tuple[str, int, Event]], int, bool]:
        """Every run's events after position `cursor` of the feed (see `EventFeed.read`).

        Events that are not stored (`model_delta`) are on the feed only, with id 0. Events held
        past the wait for their cause go out first.
        """
        for run_id in list(self._holding):  # only runs with events waiting for their cause
            book = self._runs.get(run_id)
            if book is not None:
                self._release_late(run_id, book)
            if book is None or not book.order.holding:
                self._holding.discard(run_id)
        return self._feed.read(cursor)

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
            fresh.desk, fresh.received = book.desk, book.received
        else:
            fresh.base = base
        self._runs[run_id] = fresh

    def recover(
        self, run_id: str, epoch: int, stored: list[tuple[int, Event]], spans: list[SpanRecord]
    ) -> None:
        """Take up a run in flight that this ledger, restarted, never saw: from its record.

        Its stored events (ids go on after them; one that comes again is not recorded twice),
        the waits they opened and resolved, its spans stored so far, and its budget and caps
        (from its `run_started`) with what its stored replies spent against them (a tenant's
        and a key's day are read from the store's sums, as for any run). A run that had ended
        is taken up closed (its events readable, nothing more recorded).
        """
        base = max((seq for seq, _ in stored), default=0)
        book = self._runs[run_id] = _RunBook(budget=None, epoch=epoch, base=base)
        book.stored = set()
        ended = False
        for _, event in stored:
            ended = isinstance(event, RunFinished) or (ended and not isinstance(event, RunStarted))
            book.stored.add(_identity(event))
            book.order.admit(event)  # (what the stored ones caused need not wait for them)
            if isinstance(event, RunStarted):  # (its last life's)
                book.opened, book.budget, book.spent = True, event.token_budget, 0
                self.spend.close(run_id)
                self.spend.open(run_id, event.tenant, event.submitted_by, tuple(event.caps))
            elif isinstance(event, ModelFinished):  # (counted in the store's day sums already)
                book.spent += event.tokens
                self.spend.recount(run_id, event.input_tokens + event.output_tokens, event.cost_usd)
            elif isinstance(event, AgentStarted):
                book.started += 1
            elif isinstance(event, (WaitOpened, WaitResolved)):
                book.desk.recover(event)
        book.order.drain()
        book.spans.extend(spans)
        book.persisted.update(s["span_id"] for s in spans)
        own, lost = agent_span_counts(spans)
        book.agent_spans += own
        book.lost_spans += lost
        if ended:
            self.close(run_id)

    def epoch(self, run_id: str) -> int:
        """The run's life number (0 until it is resumed)."""
        book = self._book(run_id)
        return book.epoch if book is not None else 0

    def close(self, run_id: str) -> None:
        """Stop counting the run; its events stay readable for a while."""
        book = self._runs.pop(run_id, None)
        self.spend.close(run_id)
        if book is not None:
            book.spans = []  # collected by now; a finished run's spans live in the store
            self._closed[run_id] = book
            while len(self._closed) > MAX_CLOSED_RUNS:
                self._closed.popitem(last=False)

    def state(self, run_id: str) -> RunState:
        """Whether the ledger is counting the run, has closed it, or does not know it."""
        if run_id in self._runs or run_id in self._unannounced:
            return "open"  # (a run whose last events are not out yet is open to its readers)
        return "closed" if run_id in self._closed else "unknown"

    def finish(
        self,
        run_id: str,
        final: Event,
        first: Event | None = None,
        returning: bool = True,
        until_stored: bool = False,
    ) -> list[tuple[int, Event]]:
        """Record the run's last event and close it; return all its events with their ids.

        `first`: the run's first event, recorded first if it has not come (it rides with the
        entry agent's events, which never come when the entry agent was never reached).
        `returning`: False returns none (they stay readable).
        `until_stored`: the events added here (and those let out here, held for their cause)
        go to readers and the feed at `announce`, once they are stored (with the run's end, in
        one transaction): whoever sees `run_finished` finds the run recorded.
        """
        if run_id not in self._closed:
            book = self._open_book(run_id)
            if until_stored:
                book.shown = len(book.events)
                self._unannounced[run_id] = []
            if first is not None:
                self.open_with(run_id, first)
            for held in book.order.drain():  # their causes will not come now
                self._append(run_id, book, held)
            self.emit(run_id, final)
        self.close(run_id)
        closed = self._book(run_id)
        return _numbered(closed, 0, None) if returning and closed is not None else []

    def announce(self, run_id: str) -> None:
        """Let out the run's last events kept by `finish` (`until_stored`): they are stored."""
        items = self._unannounced.pop(run_id, None)
        book = self._book(run_id)
        if book is not None:
            book.shown = None
        for seq, event in items or ():
            self._feed.put(run_id, seq, event)

    def open_with(self, run_id: str, first: Event) -> None:
        """Record the run's first event, unless it came already.

        It rides with the entry agent's events (`RayDispatcher.dispatch`), which never come
        when the entry agent was never reached.
        """
        if run_id not in self._closed and not self._open_book(run_id).opened:
            self.emit(run_id, first)

    def tokens_left(self, run_id: str) -> int | None:
        """Tokens the run may still spend (None: no budget, or not counted here)."""
        book = self._runs.get(run_id)
        if book is None or book.budget is None:
            return None
        return book.budget - book.spent

    def spend_check(self, run_id: str) -> tuple[str | None, list[tuple[str, str]]]:
        """Whether the run may make another model call under its caps, and its new warnings."""
        return self.spend.check(run_id)

    def charge(self, run_id: str, tokens: int, key: str = "") -> None:
        """Count tokens the run spent, once per `key` (a charge made again is not counted)."""
        book = self._runs.get(run_id)
        if book is None:
            return
        if key:
            if key in book.charged:
                return
            book.charged.add(key)
        book.spent += tokens

    def desk(self, run_id: str) -> WaitDesk:
        """The run's waits for a person (an empty desk for a run not held here).

        A closed run's desk still answers for the waits it had (a second word on one is
        "decided already"); only an open run's waits are waiting (`waiting`).
        """
        book = self._book(run_id)
        return book.desk if book is not None else WaitDesk()

    def waiting(self, run_id: str) -> list[WaitOpened]:
        """The run's open waits, oldest first (none once it is closed)."""
        book = self._runs.get(run_id)
        return book.desk.waiting() if book is not None else []

    def open_wait(self, run_id: str, event: WaitOpened, again: bool = False) -> str:
        """Register a wait for a person and announce it, unless `again`; its id in the run.

        See `WaitDesk.open`. `again`: the wait was announced in an earlier life of the run (its
        event is in the store already).
        """
        wait_id, opened = self._open_book(run_id).desk.open(event)
        if opened is not None and not again:
            self.emit(run_id, cast("Event", opened))
        return wait_id

    def resolve(
        self, run_id: str, wait_id: str, resolution: Resolution
    ) -> tuple[Outcome, dict[str, Any] | None]:
        """Resolve a wait (by a person, or by its expiry): the first word counts."""
        book = self._book(run_id)
        if book is None:
            return "unknown", None
        outcome, kept, said = book.desk.resolve(wait_id, resolution, run_id in self._runs)
        if said is not None:
            self.emit(run_id, cast("Event", said))
        return outcome, kept

    def keep_spans(self, run_id: str, spans: list[SpanRecord], origin: str = "") -> None:
        """Keep finished spans of the run, one shipment queued by the process `origin`.

        Dropped once the run is closed: a finished run's spans live in the store.
        """
        if run_id in self._closed:
            return  # too late for the run's record
        book = self._open_book(run_id)
        book.spans.extend(spans)
        if self._on_spans is not None:
            kept = [s for s in spans if not (s.get("attributes") or {}).get(attr.BATON_AGENT_LOST)]
            fresh = [s for s in kept if s["span_id"] not in book.persisted]
            book.persisted.update(s["span_id"] for s in fresh)
            if fresh:
                self._on_spans(run_id, fresh)
        if origin:
            book.received[origin] = book.received.get(origin, 0) + 1
        own, lost = agent_span_counts(spans)
        book.agent_spans += own
        book.lost_spans += lost

    def first_sight(self, run_id: str, key: str) -> bool:
        """Whether a handover of the run (`agents.ray.handover`) comes for the first time."""
        if run_id in self._closed:
            return False  # too late for the run's record
        book = self._open_book(run_id)
        if key in book.handovers:
            return False
        book.handovers.add(key)
        return True

    def settled(self, run_id: str, sent: dict[str, int], traced: bool) -> bool:
        """Whether the run's items are all in: as many from each process as it `sent`.

        Without counts (the entry agent's call did not answer: cancelled, lost), a traced run
        is settled once every invocation that started has its `invoke_agent` span (its own, or
        the one its caller made for it when it was lost).
        """
        book = self._book(run_id)
        if book is None:
            return not sent
        if any(book.received.get(process, 0) < count for process, count in sent.items()):
            return False
        return bool(sent) or not traced or book.started <= book.agent_spans + book.lost_spans

    def spans(self, run_id: str) -> list[SpanRecord]:
        """The run's spans so far (a copy of the list), lost invocations' put in their place.

        An actor that died took its invocation's own span with it, but the spans it had
        finished and sent (model and tool calls) still name that span as their parent. Its
        caller made a stand-in (`baton.agent.lost`) without knowing the id; the invocation's
        `agent_started` event knows it, and the stand-in takes it over, so that the sent spans
        hang under it.
        """
        book = self._book(run_id)
        if book is None:
            return []
        spans = list(book.spans)
        if book.lost_spans:
            _adopt_orphans(spans, book.events)
        return spans

    def unpersisted(self, run_id: str, spans: list[SpanRecord]) -> list[SpanRecord]:
        """Of the run's `spans`, those not sent to the store yet (now taken as sent)."""
        book = self._book(run_id)
        if book is None:
            return spans
        fresh = [s for s in spans if s["span_id"] not in book.persisted]
        book.persisted.update(s["span_id"] for s in fresh)
        return fresh

    def snapshot(self, run_id: str) -> tuple[list[SpanRecord], list[Event]]:
        """Copies of the spans sent so far and of the events (what a live view reads)."""
        book = self._book(run_id)
        if book is None:
            return [], []
        return list(book.spans), book.events[: book.shown]

    def emit(self, run_id: str, event: Event, origin: str = "") -> None:
        """Record a progress event of the run (bounded per run; dropped once it is closed).

        Events go out (numbered, on the feed) in causal order: one whose cause is still on its
        way from another process waits for it (`agents.ledger.causal`). `origin` names the
        process that queued it (see `settled`).
        """
        if run_id in self._closed:
            return
        book = self._open_book(run_id)
        if origin:
            book.received[origin] = book.received.get(origin, 0) + 1
        if not event.stored:  # streamed text: straight to the followers, unnumbered (id 0)
            self._feed.put(run_id, 0, event)
            return
        if book.stored is not None and _identity(event) in book.stored:
            return  # recorded before this ledger was restarted, and sent again since
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
        unannounced = self._unannounced.get(run_id)
        if unannounced is None:
            self._feed.put(run_id, seq, event)
        else:
            unannounced.append((seq, event))
        if self._on_event is not None:
            self._on_event(run_id, seq, event)
        self._count_spending(run_id, book, event)

    def count_on_arrival(self, run_id: str, event: Event) -> None:
        """Count a capped run's reply as it arrives, before its turn in the run's order.

        A batch may wait for an earlier one of its process (calls to an actor can overtake
        each other), and a cap must not: the next call's check counts this reply. Counted
        once: its turn in order does not count it again.
        """
        if not isinstance(event, ModelFinished) or not self.spend.holds(run_id):
            return
        book = self._open_book(run_id)
        key = (event.invocation or "", event.seq)
        if key not in book.counted_early:
            book.counted_early.add(key)
            self._spent(run_id, event)

    def _count_spending(self, run_id: str, book: _RunBook, event: Event) -> None:
        """Each stored event once, in order: a run's start names whose it is, a reply spends."""
        if isinstance(event, RunStarted):
            self.spend.open(run_id, event.tenant, event.submitted_by)
        elif isinstance(event, ModelFinished):
            key = (event.invocation or "", event.seq)
            if key in book.counted_early:
                book.counted_early.discard(key)  # (counted as it arrived)
                return
            self._spent(run_id, event)

    def _spent(self, run_id: str, reply: ModelFinished) -> None:
        row = self.spend.record(
            run_id,
            reply.agent,
            reply.answered_by or reply.model,
            reply.input_tokens,
            reply.output_tokens,
            reply.cost_usd,
        )
        if row is not None and self._on_spend is not None:
            self._on_spend(row)

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
        return _numbered(book, after, book.shown)


def _numbered(book: _RunBook, after: int, shown: int | None) -> list[tuple[int, Event]]:
    """The book's events after id `after` (of its first `shown`), each with its id."""
    start = max(after - book.base, 0)
    return list(enumerate(book.events[start:shown], start=book.base + start + 1))


def _adopt_orphans(spans: list[SpanRecord], events: list[Event]) -> None:
    """Give each lost invocation's stand-in span the id of the span its actor had opened."""
    ids = {s["span_id"] for s in spans}
    orphaned = {s["parent_span_id"] for s in spans if s["parent_span_id"] not in ids}
    started = [e for e in events if isinstance(e, AgentStarted) and e.span_id in orphaned]
    for i, span in enumerate(spans):
        attributes = span.get("attributes") or {}
        if not attributes.get(attr.BATON_AGENT_LOST):
            continue
        for event in started:
            if (event.agent, event.parent_span_id) == (
                attributes.get(attr.GEN_AI_AGENT_NAME),
                span["parent_span_id"],
            ):
                adopted = span.copy()
                adopted["span_id"] = event.span_id or span["span_id"]
                spans[i] = adopted
                started.remove(event)
                break


def _identity(event: Event) -> tuple[str, int, str, str]:
    """An event among its run's: its invocation, its place there, its type, and its call.

    (The ledger's own events, a wait's resolution, have no place: their call names them.)
    """
    return (event.invocation or "", event.seq, event.type, str(getattr(event, "call_id", "")))
