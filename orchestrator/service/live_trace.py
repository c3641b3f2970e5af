"""The trace of a run still going: the spans finished so far, plus the open ones.

Finished spans reach the ledger after each step and when each invocation ends; the rest of
the run's spans are still open in the agents' processes. Every progress event carries the ids
of the span it belongs to, and each event kind says what it tells about that span
(`Event.apply`), so the open spans (and the model calls finished since) are rebuilt with the
same ids, names and parentage the finished trace will have. Views (diagram, waterfall) thus
read spans whether the run is finished or not.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from agents.core.events import Event
from agents.core.messages import RunStatus
from tracing import SpanRecord
from tracing import attributes as attr

__all__ = ["interrupted_spans", "live_spans"]


def live_spans(finished: list[SpanRecord], events: Iterable[Event]) -> list[SpanRecord]:
    """The finished spans, and those the events say are open (or finished but not yet sent)."""
    known = {s["span_id"] for s in finished}
    built: dict[str, SpanRecord] = {}
    trace_id = finished[0]["trace_id"] if finished else ""
    for event in events:
        if event.span_id and event.span_id not in known:
            event.apply(built, trace_id)
    return [*finished, *built.values()]


def interrupted_spans(
    finished: list[SpanRecord], events: Iterable[Event], reason: str
) -> list[SpanRecord]:
    """The trace of a run cut off mid-way (its service died).

    What was finished and sent, and what the events say was open, closed now as interrupted.
    """
    spans = live_spans(finished, events)
    now = time.time_ns()
    for span in spans:
        if not span.get("end_ns"):
            span["end_ns"] = now
            span["status"] = "ERROR"
            span["status_message"] = reason
            span["attributes"][attr.ERROR_TYPE] = RunStatus.INTERRUPTED.value
    return spans
