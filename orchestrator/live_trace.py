"""The trace of a run still going: the spans finished so far, plus the open ones.

Finished spans of sub-agents reach the ledger when each invocation ends; the rest of the run's
spans are still open in the agents' processes. Every progress event carries the ids of the span
it belongs to, and each event kind says what it tells about that span (`Event.apply`), so the
open spans (and the model calls finished since) are rebuilt with the same ids, names and
parentage the finished trace will have. Views (diagram, waterfall) thus read spans whether the
run is finished or not.
"""

from __future__ import annotations

from collections.abc import Iterable

from agents.core.events import Event
from tracing import SpanRecord

__all__ = ["live_spans"]


def live_spans(finished: list[SpanRecord], events: Iterable[Event]) -> list[SpanRecord]:
    """The finished spans, and those the events say are open (or finished but not yet sent)."""
    known = {s["span_id"] for s in finished}
    built: dict[str, SpanRecord] = {}
    trace_id = finished[0]["trace_id"] if finished else ""
    for event in events:
        if event.span_id and event.span_id not in known:
            event.apply(built, trace_id)
    return [*finished, *built.values()]
