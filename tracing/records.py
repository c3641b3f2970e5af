"""Finished spans as plain, bounded dicts: what crosses processes, what the store keeps."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["MAX_ATTRIBUTES", "MAX_ATTRIBUTE_CHARS", "MAX_EVENTS", "SpanRecord", "span_record"]

SpanRecord = dict[str, Any]

MAX_ATTRIBUTES = 64
MAX_ATTRIBUTE_CHARS = 4096
MAX_EVENTS = 32


def _value(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= MAX_ATTRIBUTE_CHARS else value[:MAX_ATTRIBUTE_CHARS] + "…"
    if isinstance(value, tuple | list):
        return [_value(v) for v in list(value)[:MAX_ATTRIBUTES]]
    return value


def _attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    if not attributes:
        return {}
    return {k: _value(v) for k, v in list(attributes.items())[:MAX_ATTRIBUTES]}


def span_record(span: ReadableSpan) -> SpanRecord:
    """A finished span as a JSON-ready dict (ids in hex, times in Unix nanoseconds)."""
    context = span.get_span_context()
    parent = span.parent
    return {
        "trace_id": f"{context.trace_id:032x}" if context else "",
        "span_id": f"{context.span_id:016x}" if context else "",
        "parent_span_id": f"{parent.span_id:016x}" if parent else None,
        "name": span.name,
        "kind": span.kind.name,
        "start_ns": span.start_time or 0,
        "end_ns": span.end_time or 0,
        "status": span.status.status_code.name,
        "status_message": span.status.description,
        "attributes": _attributes(span.attributes),
        "events": [
            {"name": e.name, "time_ns": e.timestamp, "attributes": _attributes(e.attributes)}
            for e in list(span.events)[:MAX_EVENTS]
        ],
        "resource": _attributes(span.resource.attributes),
    }
