"""A process's queue of events, spans and steps for the run ledger, sent in batches.

Every process (agent hosts, the orchestrator) sends what it has for the ledger this way, and
only this way: events, the spans finished after each step, steps for the step log. A run's
items may also travel to another process, which sends them as its own (`hand_over`,
`take_over`). The ledger knows when it has all of a run's items by counting them per process
that queued them (`sent`): each process's count travels up with the results of the calls it
answered (`heard`), and the orchestrator asks the ledger to settle the run on those counts.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
import uuid
from collections import OrderedDict
from typing import Any, TypeVar

from agents.core.events import Event
from agents.core.steps import Step
from agents.ledger.shards import shard_of
from agents.ray import wire
from agents.ray.handover import Handover, seal
from tracing import SpanRecord

__all__ = ["EVENT_FLUSH_S", "Outbox", "Outboxes"]

_T = TypeVar("_T", bound=tuple[Any, ...])

# Longest time an event waits in an actor before it is sent to the ledger.
EVENT_FLUSH_S = 0.05
# Runs whose items a process counts at once (the oldest is forgotten beyond this).
MAX_RUNS_COUNTED = 4096


class Outbox:
    """What this process has for the ledger actor `handle`, queued and sent in batches.

    One actor call per flush instead of one per event, flushed when an invocation ends (at the
    end of the event loop's turn, so that invocations ending together share a batch) and
    otherwise at most `EVENT_FLUSH_S` after an item was queued.
    """

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self._events: list[tuple[str, Event | Handover]] = []  # and handovers taken over
        self._spans: list[tuple[str, list[SpanRecord]]] = []
        self._steps: list[tuple[str, Step]] = []
        self._timer: asyncio.Handle | None = None
        self._timer_due = 0.0  # when the timer fires, wall-clock time
        self._soon: asyncio.Handle | None = None  # a flush at the end of this turn (`flush`)
        self._closed = False
        self._name = uuid.uuid4().hex  # this process, to the ledger
        self._batches = 0  # batches sent so far, numbered so that the ledger applies them in order
        self._sealed = 0  # handovers made here (each is named by this process and its number)
        # Items (events and span shipments) of each run queued here so far, and the counts of
        # other processes heard with their results: the ledger settles a run once it has them.
        self._counts: OrderedDict[str, dict[str, int]] = OrderedDict()

    @property
    def name(self) -> str:
        """This process, as the ledger knows it."""
        return self._name

    def emit(self, run_id: str, event: Event) -> None:
        """Queue an event; it goes out with the next flush (at most `EVENT_FLUSH_S` away)."""
        self._events.append((run_id, event))
        self._count(run_id)
        self._arm()

    def keep_spans(self, run_id: str, spans: list[SpanRecord]) -> None:
        """Queue finished spans of a run (one shipment); they go out with the next flush."""
        if spans:
            self._spans.append((run_id, spans))
            self._count(run_id)
            self._arm()

    def record(self, run_id: str, step: Step) -> None:
        """Queue a step for the run's step log; it goes out with the next flush."""
        self._steps.append((run_id, step))
        self._arm()

    def sent(self, run_id: str) -> dict[str, int]:
        """The run's items queued for the ledger, by process: this one's, and those heard."""
        return dict(self._counts.get(run_id, {}))

    def heard(self, run_id: str, counts: dict[str, int]) -> None:
        """Note other processes' counts of a run's items (they came with a call's result)."""
        if counts:
            mine = self._run_counts(run_id)
            for process, count in counts.items():
                mine[process] = max(mine.get(process, 0), count)

    def forget(self, run_id: str) -> dict[str, int]:
        """The run's counts (see `sent`), no longer kept here (the run is over)."""
        return self._counts.pop(run_id, {})

    def close(self) -> None:
        """Send what is buffered, and nothing after it (this process is leaving Ray)."""
        self._send()
        self._closed = True

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
        fails). The receiving process sends them as its own (`take_over`), by their due time;
        they still count as this process's items.
        """
        due = self._due()
        events, self._events = _split(self._events, run_id)
        spans, self._spans = _split(self._spans, run_id)
        steps, self._steps = _split(self._steps, run_id)
        if not (events or spans or steps):
            return None
        self._sealed += 1
        handover = seal(
            run_id,
            [e for _, e in events],
            [s for _, s in spans],
            [s for _, s in steps],
            self._name,
            f"{self._name}.{self._sealed}",
            due,
        )
        if self._timer is not None and not (self._events or self._spans or self._steps):
            self._timer.cancel()
            self._timer = None
        return handover

    def take_over(self, handover: Handover) -> None:
        """Queue what another process handed over, to send with this process's own.

        It stays sealed, to be sent or handed on as bytes, by its due time.
        """
        self._events.append((handover.run_id, handover))
        self._arm(handover.due)

    def take_batch(self) -> wire.Batch:
        """Everything queued, as this process's next batch (for a call that must follow it)."""
        return self._batched(*self._take())

    def _count(self, run_id: str) -> None:
        counts = self._run_counts(run_id)
        counts[self._name] = counts.get(self._name, 0) + 1

    def _run_counts(self, run_id: str) -> dict[str, int]:
        counts = self._counts.get(run_id)
        if counts is None:
            counts = self._counts[run_id] = {}
            if len(self._counts) > MAX_RUNS_COUNTED:
                self._counts.popitem(last=False)
        else:
            self._counts.move_to_end(run_id)  # the oldest runs are forgotten, not the busiest
        return counts

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

    def _take(
        self,
    ) -> tuple[
        list[tuple[str, Event | Handover]],
        list[tuple[str, list[SpanRecord]]],
        list[tuple[str, Step]],
    ]:
        """The queued events, spans and steps, taken out (the flush timer stopped)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._soon is not None:
            self._soon.cancel()
            self._soon = None
        events, self._events = self._events, []
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

    def _batched(
        self,
        events: list[tuple[str, Event | Handover]],
        spans: list[tuple[str, list[SpanRecord]]],
        steps: list[tuple[str, Step]],
    ) -> wire.Batch:
        """What was taken (`_take`) as this process's next batch, numbered.

        The ledger applies a process's batches in the order of their numbers.
        """
        self._batches += 1
        return wire.Batch(events, spans, steps, self._name, self._batches)


class Outboxes:
    """This process's outboxes, one per shard of the ledger: a run's items go to its shard's.

    Each shard sees this process as the sender of its own numbered batches (the outbox's
    `name`), so that it applies them in order; a run's counts (`sent`) are its shard's.
    """

    def __init__(self, handles: tuple[Any, ...]) -> None:
        self._boxes = tuple(Outbox(handle) for handle in handles)

    def of(self, run_id: str) -> Outbox:
        """The outbox of the run's shard."""
        boxes = self._boxes
        return boxes[0] if len(boxes) == 1 else boxes[shard_of(run_id, len(boxes))]

    def emit(self, run_id: str, event: Event) -> None:
        """Queue an event (see `Outbox.emit`)."""
        self.of(run_id).emit(run_id, event)

    def keep_spans(self, run_id: str, spans: list[SpanRecord]) -> None:
        """Queue finished spans of a run (see `Outbox.keep_spans`)."""
        self.of(run_id).keep_spans(run_id, spans)

    def record(self, run_id: str, step: Step) -> None:
        """Queue a step for the run's step log (see `Outbox.record`)."""
        self.of(run_id).record(run_id, step)

    def sent(self, run_id: str) -> dict[str, int]:
        """The run's items queued for its shard, by process (see `Outbox.sent`)."""
        return self.of(run_id).sent(run_id)

    def heard(self, run_id: str, counts: dict[str, int]) -> None:
        """Note other processes' counts of a run's items (see `Outbox.heard`)."""
        self.of(run_id).heard(run_id, counts)

    def forget(self, run_id: str) -> dict[str, int]:
        """The run's counts, no longer kept here (see `Outbox.forget`)."""
        return self.of(run_id).forget(run_id)

    def hand_over(self, run_id: str) -> Handover | None:
        """Take the run's queued items out, to travel to another process (`Outbox.hand_over`)."""
        return self.of(run_id).hand_over(run_id)

    def take_over(self, handover: Handover) -> None:
        """Queue what another process handed over (see `Outbox.take_over`)."""
        self.of(handover.run_id).take_over(handover)

    def take_batch(self, run_id: str) -> wire.Batch:
        """Everything queued for the run's shard, as its next batch (for a call that follows)."""
        return self.of(run_id).take_batch()

    def flush(self, run_id: str) -> None:
        """Send what is queued for the run's shard once this turn is over (`Outbox.flush`).

        The other shards' queues wait for their timers: with a flush of every shard at each
        invocation's end, each shard took as many batches as one shard did, whatever their number.
        """
        self.of(run_id).flush()

    def close(self) -> None:
        """Send what is queued, and nothing after it (this process is leaving Ray)."""
        for box in self._boxes:
            box.close()


def _split(items: list[_T], run_id: str) -> tuple[list[_T], list[_T]]:
    """The run's items (each starts with its run id), and the rest, in their order."""
    theirs: list[_T] = []
    rest: list[_T] = []
    for item in items:
        (theirs if item[0] == run_id else rest).append(item)
    return theirs, rest


def _detached(method: Any, sealed: bytes) -> Any:
    import ray._raylet  # loaded already: `method` is an actor's

    # The Ray call a coroutine of an async actor is running: a call submitted under it is its child.
    current: contextvars.ContextVar[Any] | None = getattr(ray._raylet, "async_task_id", None)
    if current is not None:
        current.set(None)
    return method.remote(sealed)
