"""The typed client of the run ledger actor, for agents and the orchestrator alike."""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from collections import OrderedDict
from typing import Any, TypeVar

from agents.core.events import ApprovalRequested, Event
from agents.core.steps import Step
from agents.ray.handover import Carried, seal, unseal
from agents.runtime.ports import Decision, Handover, RunState, SpanShipment
from tracing import SpanRecord

__all__ = ["EVENT_FLUSH_S", "LedgerClient"]

_T = TypeVar("_T", bound=tuple[Any, ...])

# Longest time an event waits in an actor before it is sent to the ledger.
EVENT_FLUSH_S = 0.05
# Runs whose shipments a process numbers at once (the oldest is forgotten beyond this).
MAX_RUNS_NUMBERED = 4096


class LedgerClient:
    """A `LedgerActor` as typed calls, for agents and the orchestrator.

    The `Ledger`, `Approvals`, `EventSink` and `Journal` protocols the agents use, and the
    run-level calls the orchestrator makes.

    Events, spans and steps are batched: one actor call per flush instead of one per event, flushed
    when an invocation ends (at the end of the event loop's turn, so that invocations ending
    together share a batch) and otherwise at most `EVENT_FLUSH_S` after an event was emitted.
    """

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self._handle = handle
        self._batch: list[tuple[str, Event | Carried]] = []  # events, and handovers taken over
        self._spans: list[SpanShipment] = []
        self._steps: list[tuple[str, Step]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._soon: asyncio.Handle | None = None  # a flush at the end of this turn (`flush`)
        self._closed = False
        # Each run's span shipments from this process are numbered, so that the ledger can
        # tell when every one has arrived (an async actor may run two calls out of order).
        self._sender = uuid.uuid4().hex
        # Batches sent to the ledger so far, numbered so that it applies them in order.
        self._batches = 0
        self._shipments: OrderedDict[str, int] = OrderedDict()
        # Events of each run queued here so far: the ledger's `finish` waits until it has them
        # all (the last batch and the run's end come from different callers, in any order).
        self._emitted: OrderedDict[str, int] = OrderedDict()
        # Copies of what was shipped for runs whose entry runs in this process (`remember`).
        self._copies: dict[str, list[SpanRecord]] = {}

    async def tokens_left(self, run_id: str) -> int | None:
        """Tokens the run may still spend (None: no budget)."""
        left: int | None = await self._handle.tokens_left.remote(run_id)
        return left

    def charge(self, run_id: str, tokens: int) -> None:
        """Count tokens the run spent (sent without waiting)."""
        self._handle.charge.remote(run_id, tokens)  # fire and forget; ordered per caller

    async def record_effect(self, run_id: str, attempts: tuple[str, ...], tool: str) -> None:
        """Record that an at-most-once tool is about to run (awaited: it must come first)."""
        # Awaited: the record must exist before the call is made.
        await self._handle.record_effect.remote(run_id, attempts, tool)

    async def request_approval(self, run_id: str, call_id: str, event: ApprovalRequested) -> str:
        """Register a call waiting for approval; return its unique approval id."""
        # The buffered events go in the same call, so that they come before this one.
        events, spans, steps = self._take()
        unique: str = await self._handle.request_approval.remote(
            run_id, call_id, event, events, spans, self._sender, steps, self._number()
        )
        return unique

    async def await_decision(
        self, run_id: str, call_id: str, wait_s: float
    ) -> dict[str, Any] | None:
        """The decision on a pending call, waiting up to `wait_s` for one (None: none yet)."""
        decision: dict[str, Any] | None = await self._handle.await_decision.remote(
            run_id, call_id, wait_s
        )
        return decision

    async def decide(
        self, run_id: str, call_id: str, approved: bool, message: str, by: str
    ) -> tuple[Decision, dict[str, Any] | None]:
        """Approve or deny a pending call; the first decision counts."""
        outcome: tuple[Decision, dict[str, Any] | None] = await self._handle.decide.remote(
            run_id, call_id, approved, message, by
        )
        return outcome

    async def effects(self, run_id: str, attempt: str) -> list[str]:
        """The at-most-once tools started under a delegation attempt."""
        found: list[str] = await self._handle.effects.remote(run_id, attempt)
        return found

    def keep_spans(self, run_id: str, spans: list[dict[str, Any]]) -> None:
        """Queue finished spans of a run; they go out with the next flush."""
        if spans:
            number = _count(self._shipments, run_id)
            self._spans.append((run_id, number, spans))
            copies = self._copies.get(run_id)
            if copies is not None:
                copies.extend(spans)

    def shipped(self, run_id: str) -> tuple[str, int]:
        """This process's name, and how many span shipments it has made for the run so far."""
        return self._sender, self._shipments.get(run_id, 0)

    def emitted(self, run_id: str) -> tuple[str, int]:
        """This process's name, and how many events of the run it has sent (or queued) so far."""
        return self._sender, self._emitted.get(run_id, 0)

    def remember(self, run_id: str) -> None:
        """Keep copies of the run's span shipments from now on (its entry runs here)."""
        self._copies.setdefault(run_id, [])

    def recall(self, run_id: str) -> list[SpanRecord]:
        """Hand over the copies kept since `remember`, and stop keeping them."""
        return self._copies.pop(run_id, [])

    def record(self, run_id: str, step: Step) -> None:
        """Queue a step for the run's step log; it goes out with the next flush."""
        self._steps.append((run_id, step))
        self._arm()

    async def commit(self, run_id: str, step: Step) -> bool:
        """Store a step and all that is queued before it; False if the run has moved on."""
        events, spans, steps = self._take()
        stored: bool = await self._handle.commit.remote(
            run_id, step, events, spans, steps, self._sender, self._number()
        )
        return stored

    async def recorded(self, run_id: str, invocation: str) -> dict[str, Step]:
        """An invocation's steps recorded in earlier lives of the run, by key."""
        found: dict[str, Step] = await self._handle.recorded.remote(run_id, invocation)
        return found

    def emit(self, run_id: str, event: Event) -> None:
        """Queue an event; it goes out with the next flush (at most `EVENT_FLUSH_S` away)."""
        self._batch.append((run_id, event))
        _count(self._emitted, run_id)
        self._arm()

    def close(self) -> None:
        """Send what is buffered, and nothing after it (this process is leaving Ray)."""
        self._send()
        self._closed = True

    def _arm(self) -> None:
        if self._timer is None and not self._closed:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self._send()
                return
            self._timer = loop.call_later(EVENT_FLUSH_S, self._send)

    def flush(self) -> None:
        """Send what is buffered once this turn of the event loop is over (outside one, now).

        Called when an invocation ends. Invocations that end in the same turn (runs whose model
        replies came together) share one batch: a host running 50 runs at once sent one batch
        per run before, at about 0.5 ms of its CPU and 1.4 ms of the ledger's each.
        """
        if self._soon is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._send()
            return
        self._soon = loop.call_soon(self._send)

    def hand_over(self, run_id: str) -> Handover | None:
        """Take the run's queued events, spans and steps out, to travel with a result.

        They are no longer this process's: its counts of the run's events and shipments go
        back by as many (see `emitted`, `shipped`); the receiving process counts them as its own.
        """
        events, self._batch = _split(self._batch, run_id)
        spans, self._spans = _split(self._spans, run_id)
        steps, self._steps = _split(self._steps, run_id)
        if not (events or spans or steps):
            return None
        handover = seal(
            run_id, [e for _, e in events], [r for _, _, r in spans], [s for _, s in steps]
        )
        _uncount(self._emitted, run_id, handover.events)
        _uncount(self._shipments, run_id, handover.shipments)
        if self._timer is not None and not (self._batch or self._spans or self._steps):
            self._timer.cancel()
            self._timer = None
        return handover

    def take_over(self, handover: Handover) -> None:
        """Queue what another process handed over (`hand_over`), as this process's own.

        It stays sealed (to be sent, or handed over again, as bytes), unless the run's entry
        runs here: then its spans are kept in the run's copies too (`remember`).
        """
        run_id = handover.run_id
        if run_id in self._copies:
            events, shipments, steps = unseal(handover)
            for event in events:
                self.emit(run_id, event)
            for records in shipments:
                self.keep_spans(run_id, records)
            for step in steps:
                self._steps.append((run_id, step))
        else:
            first = _count(self._shipments, run_id, handover.shipments) - handover.shipments + 1
            _count(self._emitted, run_id, handover.events)
            self._batch.append((run_id, Carried(handover, first)))
        self._arm()

    def _take(
        self,
    ) -> tuple[list[tuple[str, Event | Carried]], list[SpanShipment], list[tuple[str, Step]]]:
        """The buffered events, spans and steps, handed over (the flush timer stopped)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._soon is not None:
            self._soon.cancel()
            self._soon = None
        events, self._batch = self._batch, []
        spans, self._spans = self._spans, []
        steps, self._steps = self._steps, []
        return events, spans, steps

    def _send(self) -> Any:
        events, spans, steps = self._take()
        if self._closed or not (events or spans or steps):
            return None
        args = (events, spans, self._sender, steps, self._number())
        # Sent as no call's child: a cancelled call's callers cancel it again, recursively, as
        # they unwind, and Ray would drop with it a batch still on its way to the ledger: the
        # cancelled invocation's last events and spans (Ray's own tests clear it so, too).
        return contextvars.copy_context().run(_detached, self._handle.emit_many, args)

    def _number(self) -> int:
        """The next batch's number (the ledger applies a process's batches in this order)."""
        self._batches += 1
        return self._batches

    # The orchestrator's side -----------------------------------------------------------

    async def open(
        self,
        run_id: str,
        budget: int | None,
        first: Event,
        epoch: int = 0,
        record_of: str | None = None,
        live_from: tuple[str, int] | None = None,
    ) -> None:
        """Start counting a run, with its first event (awaited: it comes before any agent's).

        `epoch` above 0: the run resumes; its recorded steps are loaded from the store.
        `record_of`: the run replays that run's steps (`live_from`: a fork from that step).
        """
        await self._handle.open.remote(run_id, budget, first, epoch, record_of, live_from)

    async def finish(
        self,
        run_id: str,
        final: Event,
        sent: dict[str, int] | None = None,
        first: Event | None = None,
    ) -> list[tuple[int, Event]]:
        """Add the run's last event and close it; return its events the store still lacks.

        `sent`: how many events of the run each agent process sent (see `emitted`); they come
        first. `first`: the run's first event, when it was handed to the entry agent to send
        with its own (`RayDispatcher.dispatch`); recorded here if it never came.
        """
        events: list[tuple[int, Event]] = await self._handle.finish.remote(
            run_id, final, sent, first
        )
        return events

    async def events(
        self, run_id: str, after: int = 0, wait_s: float = 0.0
    ) -> tuple[list[tuple[int, Event]], RunState]:
        """The run's events with ids above `after`, and the state of its event log.

        Waits up to `wait_s` for a first new event.
        """
        found: tuple[list[tuple[int, Event]], RunState] = await self._handle.events.remote(
            run_id, after, wait_s
        )
        return found

    async def feed(
        self, cursor: int, wait_s: float
    ) -> tuple[list[tuple[str, int, Event]], int, bool]:
        """Every run's events after position `cursor` of the ledger's feed (see the actor)."""
        found: tuple[list[tuple[str, int, Event]], int, bool] = await self._handle.feed.remote(
            cursor, wait_s
        )
        return found

    async def snapshot(self, run_id: str) -> tuple[list[SpanRecord], list[Event]]:
        """The spans sub-agents have sent for a run in flight, and its events."""
        found: tuple[list[SpanRecord], list[Event]] = await self._handle.snapshot.remote(run_id)
        return found

    async def collect_spans(
        self,
        run_id: str,
        have: int,
        lost: int,
        expected: int,
        wait_s: float,
        shipped: tuple[str, int] | None = None,
    ) -> tuple[list[SpanRecord], int]:
        """Take the spans agents sent for a run once all have arrived (see the actor)."""
        found: tuple[list[SpanRecord], int] = await self._handle.collect_spans.remote(
            run_id, have, lost, expected, wait_s, shipped
        )
        return found

    async def pending(self, run_id: str) -> list[ApprovalRequested]:
        """The run's calls waiting for a person, oldest first."""
        found: list[ApprovalRequested] = await self._handle.pending.remote(run_id)
        return found

    async def watch_pending(
        self, run_id: str, seen: int, wait_s: float
    ) -> tuple[int, int, RunState]:
        """Wait for the run's approvals to change from version `seen` (see the actor)."""
        found: tuple[int, int, RunState] = await self._handle.watch_pending.remote(
            run_id, seen, wait_s
        )
        return found

    async def ping(self, timeout_s: float) -> None:
        """Raise unless the ledger actor answers within `timeout_s`."""
        await asyncio.wait_for(self._handle.events.remote("-"), timeout_s)


def _count(counts: OrderedDict[str, int], run_id: str, n: int = 1) -> int:
    """Add `n` to the run's count, keeping the newest `MAX_RUNS_NUMBERED` runs; the new count."""
    number = counts.pop(run_id, 0) + n
    counts[run_id] = number
    if len(counts) > MAX_RUNS_NUMBERED:
        counts.popitem(last=False)
    return number


def _split(items: list[_T], run_id: str) -> tuple[list[_T], list[_T]]:
    """The run's items (each starts with its run id), and the rest, in their order."""
    theirs: list[_T] = []
    rest: list[_T] = []
    for item in items:
        (theirs if item[0] == run_id else rest).append(item)
    return theirs, rest


def _uncount(counts: OrderedDict[str, int], run_id: str, n: int) -> None:
    if n and run_id in counts:
        counts[run_id] -= n


def _detached(method: Any, args: tuple[Any, ...]) -> Any:
    import ray._raylet  # loaded already: `method` is an actor's

    # The Ray call a coroutine of an async actor is running: a call submitted under it is its child.
    current: contextvars.ContextVar[Any] | None = getattr(ray._raylet, "async_task_id", None)
    if current is not None:
        current.set(None)
    return method.remote(*args)
