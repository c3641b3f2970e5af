"""Finished spans as plain, bounded dicts: what crosses processes, what the store keeps."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from typing_extensions import TypedDict

from tracing import attributes as attr
from tracing.redaction import Redactor

__all__ = [
    "MAX_ATTRIBUTES",
    "MAX_ATTRIBUTE_CHARS",
    "MAX_EVENTS",
    "SpanEventRecord",
    "SpanRecord",
    "agent_span_counts",
    "span_record",
]


class SpanEventRecord(TypedDict):
    """An event on a span (a refusal, a tripped guardrail, a fitted context...)."""

    name: str
    time_ns: int
    attributes: dict[str, Any]


class SpanRecord(TypedDict):
    """A span as every process sends it, the store keeps it and the views read it.

    Ids in hex; times in Unix nanoseconds (`end_ns` None or 0: still open, in a trace rebuilt
    from a run's events); strings bounded and redacted (`span_record`).
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: str  # OpenTelemetry's SpanKind name: INTERNAL, CLIENT, ...
    start_ns: int
    end_ns: int | None
    status: str  # UNSET, OK or ERROR
    status_message: str | None
    attributes: dict[str, Any]
    events: list[SpanEventRecord]
    resource: dict[str, Any]  # the attributes of the process that made it


MAX_ATTRIBUTES = 64
MAX_ATTRIBUTE_CHARS = 16_384
MAX_EVENTS = 32


def _value(value: Any, redact: Redactor | None) -> Any:
    if isinstance(value, str):
        if redact is not None:
            value = redact.text(value)
        return value if len(value) <= MAX_ATTRIBUTE_CHARS else value[:MAX_ATTRIBUTE_CHARS] + "…"
    if isinstance(value, tuple | list):
        return [_value(v, redact) for v in list(value)[:MAX_ATTRIBUTES]]
    return value


def _attributes(attributes: Mapping[str, Any] | None, redact: Redactor | None) -> dict[str, Any]:
    if not attributes:
        return {}
    return {k: _value(v, redact) for k, v in list(attributes.items())[:MAX_ATTRIBUTES]}


def agent_span_counts(records: list[SpanRecord]) -> tuple[int, int]:
    """How many `invoke_agent` spans are invocations' own, and how many stand for lost ones.

    A lost invocation (a dead actor) has a span made by its caller.
    """
    own = lost = 0
    for record in records:
        if str(record["name"]).startswith(attr.AGENT_SPAN_PREFIX):
            if (record.get("attributes") or {}).get(attr.BATON_AGENT_LOST):
                lost += 1
            else:
                own += 1
    return own, lost


def resource_record(span: ReadableSpan) -> dict[str, Any]:
    """The attributes of the resource (the process) that made `span`."""
    return _attributes(span.resource.attributes, None)


def span_record(
    span: ReadableSpan,
    redact: Redactor | None = None,
    resource: dict[str, Any] | None = None,
) -> SpanRecord:
    """A finished span as a JSON-ready dict: ids in hex, times in Unix nanoseconds.

    Bounded in size, with every string passed through `redact`. `resource` saves recomputing the
    process's resource attributes for each span.
    """
    context = span.get_span_context()
    parent = span.parent
    status = span.status.description
    return {
        "trace_id": f"{context.trace_id:032x}" if context else "",
        "span_id": f"{context.span_id:016x}" if context else "",
        "parent_span_id": f"{parent.span_id:016x}" if parent else None,
        "name": _value(span.name, redact),
        "kind": span.kind.name,
        "start_ns": span.start_time or 0,
        "end_ns": span.end_time or 0,
        "status": span.status.status_code.name,
        "status_message": _value(status, redact) if status is not None else None,
        "attributes": _attributes(span.attributes, redact),
        "events": [
            {
                "name": e.name,
                "time_ns": e.timestamp,
                "attributes": _attributes(e.attributes, redact),
            }
            for e in list(span.events)[:MAX_EVENTS]
        ],
        "resource": resource if resource is not None else resource_record(span),
    }
