"""What one agent process hands another to send as its own, pickled once where it was queued.

An agent in an actor of its own hands the events, spans and steps it still has queued for a run
back with its result, and the caller's process sends them with its own batch (one ledger call
fewer per delegation; see `LedgerClient.hand_over`); a caller likewise hands its queue down with
a delegation (`RayDispatcher._attempt`). What a process took over usually travels on, down or up
a chain: carried as objects, a chain of N agents pickled and unpickled the deepest agent's
events N times, O(N²) in all (a chain of 16: 470 KB and 0.47 ms of CPU per level). Sealed, each
process pickles only what it queued itself; what it took over travels on as bytes, and the
ledger opens each seal once.

The ledger counts a run's events by the process that emitted them (`Handover.origin`), wherever
they were sent from, and opens a handover only the first time it comes (`Handover.key`): a
caller whose callee died sends what it had handed down again, and the callee may have sent it.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.core.events import Event
from agents.core.ports import Handover, SpanShipment
from agents.core.steps import Step

__all__ = ["Carried", "open_batch", "seal"]

# Whether the ledger sees a run's handover (by key) for the first time.
Fresh = Callable[[str, str], bool]


@dataclass(frozen=True)
class Carried:
    """A handover queued in the process that took it over.

    Its span shipments count as that process's, numbered from `first` on (the ledger tells a
    missing shipment by a gap in a sender's numbers).
    """

    handover: Handover
    first: int


def seal(
    run_id: str,
    events: list[Event | Carried],
    spans: list[list[dict[str, Any]]],
    steps: list[Step],
    origin: str,
    key: str,
    due: float,
) -> Handover:
    """One run's queued items as a handover; handovers among the events stay sealed inside.

    `origin` emitted the events (those of the handovers inside excepted), `key` names the
    handover among the run's, `due` is when its oldest item is to reach the ledger.
    """
    items: list[Event | Handover] = []
    count, shipments = 0, len(spans)
    for item in events:
        if isinstance(item, Carried):
            items.append(item.handover)
            count += item.handover.events
            shipments += item.handover.shipments
        else:
            items.append(item)
            count += 1
    sealed = pickle.dumps((items, spans, steps), protocol=pickle.HIGHEST_PROTOCOL)
    return Handover(run_id, count, shipments, sealed, origin, key, due)


def _open(
    handover: Handover, fresh: Fresh | None
) -> tuple[list[tuple[Event, str]], list[list[dict[str, Any]]], list[Step]]:
    """Events (each with the process that emitted it), span shipments and steps of a handover.

    One that `fresh` says came before yields nothing but as many empty shipments as it holds
    (their numbers still count). (The bytes come from Baton's own processes, as everything
    Ray unpickles does.)
    """
    if fresh is not None and not fresh(handover.run_id, handover.key):
        return [], [[] for _ in range(handover.shipments)], []
    items, spans, steps = pickle.loads(handover.sealed)
    events: list[tuple[Event, str]] = []
    for item in items:
        if isinstance(item, Handover):
            inner_events, inner_spans, inner_steps = _open(item, fresh)
            events += inner_events
            spans += inner_spans
            steps += inner_steps
        else:
            events.append((item, handover.origin))
    return events, spans, steps


def open_batch(
    events: list[tuple[str, Event | Carried]], sender: str, fresh: Fresh
) -> tuple[list[tuple[str, Event, str]], list[SpanShipment], list[tuple[str, Step]]]:
    """A batch's events with the handovers among them opened in place, and what those held.

    Each event comes with the process that emitted it (`sender` for those it queued itself);
    the span shipments of handovers are numbered as the sender's (`Carried.first`). Handovers
    that came before (`fresh`) add no events, spans or steps.
    """
    opened: list[tuple[str, Event, str]] = []
    shipments: list[SpanShipment] = []
    steps: list[tuple[str, Step]] = []
    for run_id, item in events:
        if not isinstance(item, Carried):
            opened.append((run_id, item, sender))
            continue
        inner_events, inner_spans, inner_steps = _open(item.handover, fresh)
        opened += [(run_id, event, origin) for event, origin in inner_events]
        shipments += [(run_id, item.first + i, records) for i, records in enumerate(inner_spans)]
        steps += [(run_id, step) for step in inner_steps]
    return opened, shipments, steps
