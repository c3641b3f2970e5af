"""One typed factory per span kind.

Library code uses only the OpenTelemetry API: with no SDK configured these spans cost almost
nothing, and the process that configures an SDK gets them all.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

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
from tracing import genai
from tracing.genai import clip, clip_strings
from tracing.operations import memory_attributes

__all__ = [
    "CANCELLED",
    "TRACER_NAME",
    "ContentOptions",
    "agent_span",
    "chat_span",
    "end_workflow",
    "gate_wait_span",
    "host_wait_span",
    "lost_agent_span",
    "memory_span",
    "record_content",
    "set_outcome",
    "span_ids",
    "tool_span",
    "workflow_span",
]

TRACER_NAME = "baton"
_tracer = trace.get_tracer(TRACER_NAME)
# `error.type` of work cut off before it ended (a run cancelled, or its service stopping).
CANCELLED = "cancelled"


@contextmanager
def _cut_off_is_an_error(span: Span) -> Iterator[Span]:
    """A span whose work is cancelled ends with status ERROR and `error.type` cancelled.

    OpenTelemetry marks a span an error only for an `Exception`; a cancellation
    (`asyncio.CancelledError`, a `BaseException`) would leave it unset, read as a success.
    """
    try:
        yield span
    except asyncio.CancelledError:
        if span.is_recording():
            set_outcome(span, "cancelled before it ended", CANCELLED)
        raise


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
    """Record message content on `span` (callers check that content capture is on).

    Structured content (the conventions' message arrays) is stored as JSON with each string in
    it clipped, so that the attribute stays valid JSON however long the conversation.
    """
    if isinstance(value, str):
        span.set_attribute(key, clip(value, limit))
    else:
        span.set_attribute(key, json.dumps(clip_strings(value, limit), default=str))


def set_outcome(span: Span, error: str | None, error_type: str | None = None) -> None:
    """End-of-work status: OK when `error` is None, else ERROR with its message and type.

    An explicit OK lets a viewer tell a success from a span whose outcome was not recorded.
    """
    if error is None:
        span.set_status(Status(StatusCode.OK))
        return
    if error_type is not None:
        span.set_attribute(attr.ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, error))


@contextmanager
def workflow_span(
    run_id: str,
    entry_agent: str,
    workflow: str,
    *,
    record: bool = True,
    epoch: int = 0,
    parent: Context | None = None,
    thread_id: str | None = None,
) -> Iterator[Span]:
    """The root span of a run (`epoch`: how many times it was resumed).

    `thread_id`: the thread the run is a turn of. `parent`: the context of a caller in
    another system (A2A), whose trace the run joins.

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
    with (
        _tracer.start_as_current_span(
            attr.WORKFLOW_SPAN,
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes={
                attr.GEN_AI_OPERATION_NAME: attr.OP_INVOKE_WORKFLOW,
                attr.GEN_AI_WORKFLOW_NAME: workflow,
                attr.BATON_RUN_ID: run_id,
                attr.GEN_AI_CONVERSATION_ID: thread_id or run_id,
                attr.GEN_AI_AGENT_NAME: entry_agent,
                attr.OPENINFERENCE_SPAN_KIND: attr.OPENINFERENCE_CHAIN,
                **({attr.BATON_RUN_EPOCH: epoch} if epoch else {}),
            },
        ) as span,
        _cut_off_is_an_error(span),
    ):
        yield span


class ContentOptions(Protocol):
    """Whether message content is recorded on spans, and how much of each text."""

    capture_content: bool
    max_content_chars: int


def end_workflow(
    span: Span,
    options: ContentOptions,
    task: str,
    answer: str | None,
    *,
    failure: str | None = None,
    error: str | None = None,
) -> None:
    """The root span's outcome, and (with content capture) the task and the answer.

    Trace viewers list a trace by its root span: with these they show what was asked and what
    came back.
    """
    if options.capture_content and span.is_recording():
        limit = options.max_content_chars
        record_content(span, attr.GEN_AI_INPUT_MESSAGES, genai.text_messages("user", task), limit)
        record_content(span, attr.INPUT_VALUE, task, limit)
        if answer is not None:
            output = genai.text_messages("assistant", answer, "stop")
            record_content(span, attr.GEN_AI_OUTPUT_MESSAGES, output, limit)
            record_content(span, attr.OUTPUT_VALUE, answer, limit)
    set_outcome(span, None if failure is None else (error or failure), failure)


def _agent_attributes(
    agent: str, actor_id: str, run_id: str, chain: tuple[str, ...], thread_id: str | None
) -> dict[str, Any]:
    return {
        attr.GEN_AI_OPERATION_NAME: attr.OP_INVOKE_AGENT,
        attr.GEN_AI_AGENT_NAME: agent,
        attr.GEN_AI_AGENT_ID: actor_id,
        attr.BATON_RUN_ID: run_id,
        attr.GEN_AI_CONVERSATION_ID: thread_id or run_id,
        attr.BATON_DELEGATION_DEPTH: len(chain),
        attr.BATON_DELEGATION_CHAIN: list(chain),
    }


@contextmanager
def agent_span(
    agent: str,
    actor_id: str,
    run_id: str,
    chain: tuple[str, ...],
    parent: Context | None,
    thread_id: str | None = None,
) -> Iterator[Span]:
    """The span of one agent invocation, under `parent` (the caller's, from the carrier).

    `thread_id`: the thread the run is a turn of (`gen_ai.conversation.id`; else the run).
    """
    with (
        _tracer.start_as_current_span(
            attr.agent_span_name(agent),
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=_agent_attributes(agent, actor_id, run_id, chain, thread_id),
        ) as span,
        _cut_off_is_an_error(span),
    ):
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
    with (
        _tracer.start_as_current_span(attr.tool_span_name(tool), attributes=attributes) as span,
        _cut_off_is_an_error(span),
    ):
        yield span


@contextmanager
def chat_span(
    name: str,
    *,
    model: str | None = None,
    provider: str | None = None,
    server: tuple[str, int | None] | None = None,
) -> Iterator[Span]:
    """The span of one model call, `chat {model}` as the GenAI conventions name it.

    `model`, `provider` and `server` say who answers, as the conventions name them (the model
    without the provider's prefix); by default, what `provider/model` in `name` (the model as
    configured) says.
    """
    if model is None:
        prefix, sep, rest = name.partition("/")
        model, provider = (rest, provider or prefix) if sep else (name, provider)
    attributes: dict[str, Any] = {
        attr.GEN_AI_OPERATION_NAME: attr.OP_CHAT,
        attr.GEN_AI_REQUEST_MODEL: model,
    }
    if provider:
        attributes[attr.GEN_AI_PROVIDER_NAME] = provider
    if server is not None:
        attributes[attr.SERVER_ADDRESS] = server[0]
        if server[1] is not None:
            attributes[attr.SERVER_PORT] = server[1]
    with (
        _tracer.start_as_current_span(
            attr.chat_span_name(model), kind=SpanKind.CLIENT, attributes=attributes
        ) as span,
        _cut_off_is_an_error(span),
    ):
        yield span


def lost_agent_span(
    agent: str,
    actor_id: str,
    run_id: str,
    chain: tuple[str, ...],
    start_ns: int,
    error_type: str,
    message: str,
    thread_id: str | None = None,
) -> None:
    """An error `invoke_agent` span for an invocation that could not report its own.

    Its actor died, or it was abandoned past the deadline; whoever saw it go makes it.
    """
    span = _tracer.start_span(
        attr.agent_span_name(agent),
        kind=SpanKind.INTERNAL,
        start_time=start_ns,
        attributes={
            **_agent_attributes(agent, actor_id, run_id, chain, thread_id),
            attr.ERROR_TYPE: error_type,
            attr.BATON_AGENT_LOST: True,
        },
    )
    span.set_status(Status(StatusCode.ERROR, message))
    span.end()


@contextmanager
def host_wait_span(agent: str, actor_id: str, run_id: str) -> Iterator[Span]:
    """A wait for an agent's host replica to come back after it died (`wait_for_host {agent}`).

    Ended by the caller's `host_came_back` with how the wait ended; an error unless it is back.
    """
    with _tracer.start_as_current_span(
        attr.HOST_WAIT_SPAN_PREFIX + agent,
        kind=SpanKind.INTERNAL,
        attributes={
            attr.GEN_AI_AGENT_NAME: agent,
            attr.BATON_HOST_ACTOR: actor_id,
            attr.BATON_RUN_ID: run_id,
        },
    ) as span:
        yield span


@contextmanager
def memory_span(
    op: str, tenant: str, namespace: str, key: str | None = None, query: str | None = None
) -> Iterator[Span]:
    """A read or write of long-term memory (`baton.memory {op}`), under the current span.

    The caller sets what came back (`baton.memory.found`); an exception marks it an error.
    """
    attributes = memory_attributes(tenant, namespace, key, query)
    with _tracer.start_as_current_span(
        attr.MEMORY_SPAN_PREFIX + op, kind=SpanKind.INTERNAL, attributes=attributes
    ) as span:
        yield span


def gate_wait_span(gate: str, started_ns: int, waited_s: float, why: str, passed: bool) -> None:
    """Record a wait at a provider gate, once it is over (`baton.gate.wait`).

    Under the current span (the model call's); a wait that ended without a lease is an error
    (the call went to a fallback, or failed).
    """
    span = _tracer.start_span(
        attr.GATE_WAIT_SPAN,
        kind=SpanKind.INTERNAL,
        start_time=started_ns,
        attributes={
            attr.BATON_GATE: gate,
            attr.BATON_GATE_WAITED: round(waited_s, 3),
            attr.BATON_GATE_REASON: why,
        },
    )
    if not passed:
        span.set_attribute(attr.ERROR_TYPE, "gate_closed")
        span.set_status(Status(StatusCode.ERROR, why))
    span.end(end_time=started_ns + int(waited_s * 1e9))


def host_came_back(span: Span, state: str, restarts: int, cause: str | None) -> None:
    """Record on a `host_wait_span` how the wait ended."""
    span.set_attribute(attr.BATON_HOST_STATE, state)
    span.set_attribute(attr.BATON_HOST_RESTARTS, restarts)
    if cause:
        span.set_attribute(attr.BATON_HOST_CAUSE, cause)
    if state != "alive":
        span.set_attribute(attr.ERROR_TYPE, state)
        span.set_status(Status(StatusCode.ERROR, cause or state))
