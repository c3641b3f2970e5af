"""What one agent process hands another to send to the ledger as its own, pickled once.

An agent in an actor of its own hands the events, spans and steps it still has queued for a run
back with its result, and the caller's process sends them with its own batch (one ledger call
fewer per delegation across processes); a caller likewise hands its queue down with a
delegation (`RayDispatcher._attempt`). What a process took over usually travels on, down or up
a chain: carried as objects, a chain of N agents pickled and unpickled the deepest agent's
events N times, O(N²) in all (a chain of 16: 470 KB and 0.47 ms of CPU per level). Sealed, each
process pickles only what it queued itself; what it took over travels on as bytes, and the
ledger opens each seal once.

The ledger counts a run's items (events and span shipments) by the process that queued them
(`Handover.origin`), wherever they were sent from, and opens a handover only the first time it
comes (`Handover.key`): a caller whose callee died sends what it had handed down again, and the
callee may have sent it.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass

from agents.core.events import Event
from agents.core.steps import Step
from tracing import SpanRecord

__all__ = ["Handover", "Opened", "open_batch", "seal"]

# Whether the ledger sees a run's handover (by key) for the first time.
Fresh = Callable[[str, str], bool]


@dataclass(frozen=True)
class Handover:
    """What one process had queued for a run, handed to another process to send as its own.

    Opaque to everyone but the ledger: `sealed` holds the events (with the handovers this
    process took over, still sealed), the span shipments and the steps. `key` names it among
    the run's handovers; `due` is the wall-clock time by which its oldest item is to reach the
    ledger.
    """

    run_id: str
    sealed: bytes
    origin: str  # the process that queued the items sealed here (not those of inner handovers)
    key: str
    due: float


@dataclass
class Opened:
    """A batch's items, its handovers opened, each with the process that queued it.

    The ledger counts a run's items by that process.
    """

    events: list[tuple[str, Event, str]]  # run, event, origin
    spans: list[tuple[str, list[SpanRecord], str]]  # run, one shipment, origin
    steps: list[tuple[str, Step]]


def seal(
    run_id: str,
    events: list[Event | Handover],
    spans: list[list[SpanRecord]],
    steps: list[Step],
    origin: str,
    key: str,
    due: float,
) -> Handover:
    """One run's queued items as a handover; the handovers among the events stay sealed."""
    sealed = pickle.dumps((events, spans, steps), protocol=pickle.HIGHEST_PROTOCOL)
    return Handover(run_id, sealed, origin, key, due)


def _open(handover: Handover, fresh: Fresh, into: Opened) -> None:
    """Add a handover's items to `into`, unless `fresh` says it came before.

    (The bytes come from Baton's own processes, as everything Ray unpickles does.)
    """
    run_id, origin = handover.run_id, handover.origin
    if not fresh(run_id, handover.key):
        return
    events, spans, steps = pickle.loads(handover.sealed)
    for item in events:
        if isinstance(item, Handover):
            _open(item, fresh, into)
        else:
            into.events.append((run_id, item, origin))
    into.spans += [(run_id, shipment, origin) for shipment in spans]
    into.steps += [(run_id, step) for step in steps]


def open_batch(
    events: list[tuple[str, Event | Handover]],
    spans: list[tuple[str, list[SpanRecord]]],
    steps: list[tuple[str, Step]],
    sender: str,
    fresh: Fresh,
) -> Opened:
    """A batch's events, span shipments and steps with the handovers among them opened in place.

    What the sender queued itself is the sender's; what it took over, its origin's. Handovers
    that came before (`fresh`) add nothing.
    """
    opened = Opened([], [], list(steps))
    for run_id, item in events:
        if isinstance(item, Handover):
            _open(item, fresh, opened)
        else:
            opened.events.append((run_id, item, sender))
    opened.spans += [(run_id, shipment, sender) for run_id, shipment in spans]
    return opened
