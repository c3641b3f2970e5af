"""What a callee's process hands its caller's with a result, pickled once where it was queued.

An agent in an actor of its own hands the events, spans and steps it still has queued for a run
back with its result, and the caller's process sends them with its own batch (one ledger call
fewer per delegation; see `LedgerClient.hand_over`). The caller's own end comes soon after, so
what it took over usually travels on with its own result, and so on up a chain: carried as
objects, a chain of N agents pickled and unpickled the deepest agent's events N times, O(N²) in
all (a chain of 16: 470 KB and 0.47 ms of CPU per level). Sealed, each process pickles only what
it queued itself; what it took over travels on as bytes, and the ledger opens each seal once.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

from agents.core.events import Event
from agents.core.steps import Step
from agents.runtime.ports import Handover, SpanShipment

__all__ = ["Carried", "Opened", "open_batch", "seal", "unseal"]

# One run's events, span shipments (each a list of span records) and steps, in queue order.
Opened = tuple[list[Event], list[list[dict[str, Any]]], list[Step]]


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
) -> Handover:
    """One run's queued items as a handover; handovers among the events stay sealed inside."""
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
    return Handover(run_id, count, shipments, sealed)


def unseal(handover: Handover) -> Opened:
    """What the handover holds: events in order, span shipments, steps.

    The events of handovers sealed inside come in their place. (The bytes come from Baton's
    own processes, as everything Ray unpickles does.)
    """
    items, spans, steps = pickle.loads(handover.sealed)
    events: list[Event] = []
    for item in items:
        if isinstance(item, Handover):
            inner_events, inner_spans, inner_steps = unseal(item)
            events += inner_events
            spans += inner_spans
            steps += inner_steps
        else:
            events.append(item)
    return events, spans, steps


def open_batch(
    events: list[tuple[str, Event | Carried]],
) -> tuple[list[tuple[str, Event]], list[SpanShipment], list[tuple[str, Step]]]:
    """A batch's events with the handovers among them opened in place, and what those held.

    Their span shipments are numbered as the sending process's (`Carried.first`).
    """
    opened: list[tuple[str, Event]] = []
    shipments: list[SpanShipment] = []
    steps: list[tuple[str, Step]] = []
    for run_id, item in events:
        if not isinstance(item, Carried):
            opened.append((run_id, item))
            continue
        inner_events, inner_spans, inner_steps = unseal(item.handover)
        opened += [(run_id, event) for event in inner_events]
        shipments += [(run_id, item.first + i, records) for i, records in enumerate(inner_spans)]
        steps += [(run_id, step) for step in inner_steps]
    return opened, shipments, steps
