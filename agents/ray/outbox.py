"""A process's queue of events, spans and steps for the run ledger, sent in batches."""

from __future__ import annotations

import asyncio
import contextvars
import time
import uuid
from collections import OrderedDict
from typing import Any, TypeVar

from agents.core.events import Event
from agents.core.ports import Handover, SpanShipment
from agents.core.steps import Step
from agents.ray import wire
from agents.ray.handover import Carried, seal
from tracing import SpanRecord

__all__ = ["EVENT_FLUSH_S", "Outbox"]

_T = TypeVar("_T", bound=tuple[Any, ...])

# Longest time an event waits in an actor before it is sent to the ledger.
EVENT_FLUSH_S = 0.05
# Runs whose shipments a process numbers at once (the oldest is forgotten beyond this).
MAX_RUNS_NUMBERED = 4096


class Outbox:
    """What this process has for the ledger actor `handle`, queued and sent in batches.

    One actor call per flush instead of one per event, flushed when an invocation ends (at the
    end of the event loop's turn, so that invocations ending together share a batch) and
    otherwise at most `EVENT_FLUSH_S` after an event was emitted. A run's queue may also travel
    to another process, which sends it as its own (`hand_over`, `take_over`).
    """

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self._batch: list[tuple[str, Event | Carried]] = []  # events, and handovers taken over
        self._spans: list[SpanShipment] = []
        self._steps: list[tuple[str, Step]] = []
        self._timer: asyncio.Handle | None = None
        self._timer_due = 0.0  # when the timer fires, wall-clock time
        self._soon: asyncio.Handle | None = None  # a flush at the end of this turn (`flush`)
        self._closed = False
        # Each run's span shipments from this process are numbered, so that the ledger can
        # tell when every one has arrived (an async actor may run two calls out of order).
        self._sender = uuid.uuid4().hex
        # Batches sent to the ledger so far, numbered so that it applies them in order.
        self._batches = 0
        self._sealed = 0  # handovers made here (each is named by this process and its number)
        self._shipments: OrderedDict[str, int] = OrderedDict()
        # Events of each run emitted here so far: the ledger's `finish` waits until it has them
        # all (the last batch and the run's end come from different callers, in any order),
        # by whichever process they reach it (the ledger counts them by `Handover.origin`).
        self._emitted: OrderedDict[str, int] = OrderedDict()
        # Copies of what was shipped for runs whose entry runs in this process (`remember`).
        self._copies: dict[str, list[SpanRecord]] = {}

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
        """This process's name, and how many events of the run it has emitted so far."""
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

    def emit(self, run_id: str, event: Event) -> None:
        """Queue an event; it goes out with the next flush (at most `EVENT_FLUSH_S` away)."""
        self._batch.append((run_id, event))
        _count(self._emitted, run_id)
        self._arm()

    def close(self) -> None:
        """Send what is buffered, and nothing after it (this process is leaving Ray)."""
        self._send()
        self._closed = True

    def _arm(self, due: float | None = None) -> None:
        """Have the queue sent `EVENT_FLUSH_S` from now, or by the wall-clock time `due`."""
        if self._closed or (due is None and self._timer is not None):
            return  # a timer is never set further out than `EVENT_FLUSH_S`
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._send()
            return
        now = time.time()
        at = now + EVENT_FLUSH_S if due is None else min(due, now + EVENT_FLUSH_S)
        if self._timer is not None:
            if self._timer_due <= at:
                return
            self._timer.cancel()
        self._timer = loop.call_later(max(at - now, 0.0), self._send)
        self._timer_due = at

    def _due(self) -> float:
        """The wall-clock time by which what is queued here is to be sent."""
        if self._timer is not None:
            return self._timer_due
        return time.time() + (0.0 if self._soon is not None else EVENT_FLUSH_S)

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
        """Take the run's queued events, spans and steps out, to travel to another process.

        With a result (to the caller's), or with a delegation (to the callee's, instead of a
        batch of the caller's own while it waits: a chain of agents in processes of their own
        made one ledger call per level; the caller keeps it, to send it itself if the call
        fails). The receiving process sends them as its own (`take_over`), by their due time.
        Their events still count as this process's (`emitted`: the ledger counts them by the
        process that emitted them); its count of the run's span shipments goes back by as
        many (see `shipped`).
        """
        due = self._due()
        events, self._batch = _split(self._batch, run_id)
        spans, self._spans = _split(self._spans, run_id)
        steps, self._steps = _split(self._steps, run_id)
        if not (events or spans or steps):
            return None
        self._sealed += 1
        handover = seal(
            run_id,
            [e for _, e in events],
            [r for _, _, r in spans],
            [s for _, s in steps],
            self._sender,
            f"{self._sender}.{self._sealed}",
            due,
        )
        _uncount(self._shipments, run_id, handover.shipments)
        if self._timer is not None and not (self._batch or self._spans or self._steps):
            self._timer.cancel()
            self._timer = None
        return handover

    def take_over(self, handover: Handover) -> None:
        """Queue what another process handed over (`hand_over`), to send as this process's own.

        It stays sealed, to be sent or handed on as bytes, by its due time. (Not kept in the
        run's copies, `remember`: those serve a run that stayed in its entry's process.)
        """
        run_id = handover.run_id
        first = _count(self._shipments, run_id, handover.shipments) - handover.shipments + 1
        self._batch.append((run_id, Carried(handover, first)))
        self._arm(handover.due)

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
        sealed = wire.seal(self._batched(events, spans, steps))
        # Sent as no call's child: a cancelled call's callers cancel it again, recursively, as
        # they unwind, and Ray would drop with it a batch still on its way to the ledger: the
        # cancelled invocation's last events and spans (Ray's own tests clear it so, too).
        return contextvars.copy_context().run(_detached, self._handle.emit_many, sealed)

    def take_batch(self) -> wire.Batch:
        """Everything queued, as this process's next batch (for a call that must follow it)."""
        return self._batched(*self._take())

    def _batched(
        self,
        events: list[tuple[str, Event | Carried]],
        spans: list[SpanShipment],
        steps: list[tuple[str, Step]],
    ) -> wire.Batch:
        """What was taken (`_take`) as this process's next batch, numbered.

        The ledger applies a process's batches in the order of their numbers.
        """
        self._batches += 1
        return wire.Batch(events, spans, steps, self._sender, self._batches)


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


def _detached(method: Any, sealed: bytes) -> Any:
    import ray._raylet  # loaded already: `method` is an actor's

    # The Ray call a coroutine of an async actor is running: a call submitted under it is its child.
    current: contextvars.ContextVar[Any] | None = getattr(ray._raylet, "async_task_id", None)
    if current is not None:
        current.set(None)
    return method.remote(sealed)
