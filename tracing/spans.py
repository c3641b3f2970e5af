"""One typed factory per span kind.

Library code uses only the OpenTelemetry API: with no SDK configured these spans cost almost
nothing, and the process that configures an SDK gets them all.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from tracing import attributes as attr

__all__ = [
    "TRACER_NAME",
    "agent_span",
    "chat_span",
    "clip",
    "lost_agent_span",
    "record_content",
    "span_ids",
    "tool_span",
    "workflow_span",
]

TRACER_NAME = "baton"
_tracer = trace.get_tracer(TRACER_NAME)


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more chars]"


def span_ids(span: Span) -> dict[str, Any]:
    """The ids (and, once ended, the times) of a recording span, for events that refer to it.

    Empty when tracing is off.
    """
    if not span.is_recording() and getattr(span, "end_time", None) is None:
        return {}
    context = span.get_span_context()
    if not context.is_valid or not context.trace_flags.sampled:
        return {}
    parent = getattr(span, "parent", None)
    ids: dict[str, Any] = {
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_span_id": f"{parent.span_id:016x}" if parent is not None else None,
    }
    start, end = getattr(span, "start_time", None), getattr(span, "end_time", None)
    if end is not None:
        ids["start_ns"], ids["end_ns"] = start, end
    return ids


def record_content(span: Span, key: str, value: Any, limit: int) -> None:
    """Record message content on `span` (callers check that content capture is on)."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    span.set_attribute(key, clip(text, limit))


@contextmanager
def workflow_span(
    run_id: str, entry_agent: str, workflow: str, *, record: bool = True
) -> Iterator[Span]:
    """The root span of a run.

    With `record=False` the run gets an unsampled trace context: every span below it, in every
    process, is a no-op (the W3C flags carry the decision).
    """
    if not record:
        unsampled = SpanContext(
            trace_id=random.getrandbits(128) or 1,
            span_id=random.getrandbits(64) or 1,
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.DEFAULT),
        )
        with trace.use_span(NonRecordingSpan(unsampled)) as span:
            yield span
        return
    with _tracer.start_as_current_span(
        attr.WORKFLOW_SPAN,
        kind=SpanKind.INTERNAL,
        attributes={
            attr.GEN_AI_OPERATION_NAME: attr.OP_INVOKE_WORKFLOW,
            attr.GEN_AI_WORKFLOW_NAME: workflow,
            attr.BATON_RUN_ID: run_id,
            attr.GEN_AI_CONVERSATION_ID: run_id,
            attr.GEN_AI_AGENT_NAME: entry_agent,
        },
    ) as span:
        yield span


def _agent_attributes(
    agent: str, actor_id: str, run_id: str, chain: tuple[str, ...]
) -> dict[str, Any]:
    return {
        attr.GEN_AI_OPERATION_NAME: attr.OP_INVOKE_AGENT,
        attr.GEN_AI_AGENT_NAME: agent,
        attr.GEN_AI_AGENT_ID: actor_id,
        attr.BATON_RUN_ID: run_id,
        attr.GEN_AI_CONVERSATION_ID: run_id,
        attr.BATON_DELEGATION_DEPTH: len(chain),
        attr.BATON_DELEGATION_CHAIN: list(chain),
    }


@contextmanager
def agent_span(
    agent: str, actor_id: str, run_id: str, chain: tuple[str, ...], parent: Context | None
) -> Iterator[Span]:
    """The span of one agent invocation, under `parent` (the caller's, from the carrier)."""
    with _tracer.start_as_current_span(
        attr.agent_span_name(agent),
        context=parent,
        kind=SpanKind.INTERNAL,
        attributes=_agent_attributes(agent, actor_id, run_id, chain),
    ) as span:
        yield span


@contextmanager
def tool_span(tool: str, call_id: str, *, delegate_to: str | None = None) -> Iterator[Span]:
    """The span of one tool call (a delegation names its target agent)."""
    attributes: dict[str, Any] = {
        attr.GEN_AI_OPERATION_NAME: attr.OP_EXECUTE_TOOL,
        attr.GEN_AI_TOOL_NAME: tool,
        attr.GEN_AI_TOOL_CALL_ID: call_id,
        attr.GEN_AI_TOOL_TYPE: "function",
    }
    if delegate_to is not None:
        attributes[attr.BATON_DELEGATION_TARGET] = delegate_to
    with _tracer.start_as_current_span(attr.tool_span_name(tool), attributes=attributes) as span:
        yield span


@contextmanager
def chat_span(model: str) -> Iterator[Span]:
    """The span of one model call."""
    provider, sep, _ = model.partition("/")
    attributes: dict[str, Any] = {
        attr.GEN_AI_OPERATION_NAME: attr.OP_CHAT,
        attr.GEN_AI_REQUEST_MODEL: model,
    }
    if sep:
        attributes[attr.GEN_AI_PROVIDER_NAME] = provider
    with _tracer.start_as_current_span(
        attr.chat_span_name(model), kind=SpanKind.CLIENT, attributes=attributes
    ) as span:
        yield span


def lost_agent_span(
    agent: str,
    actor_id: str,
    run_id: str,
    chain: tuple[str, ...],
    start_ns: int,
    error_type: str,
    message: str,
) -> None:
    """An error `invoke_agent` span for an invocation that could not report its own.

    Its actor died, or it was abandoned past the deadline; whoever saw it go makes it.
    """
    span = _tracer.start_span(
        attr.agent_span_name(agent),
        kind=SpanKind.INTERNAL,
        start_time=start_ns,
        attributes={
            **_agent_attributes(agent, actor_id, run_id, chain),
            attr.ERROR_TYPE: error_type,
            attr.BATON_AGENT_LOST: True,
        },
    )
    span.set_status(Status(StatusCode.ERROR, message))
    span.end()
