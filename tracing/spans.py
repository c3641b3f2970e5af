"""One typed factory per span kind. Library code uses only the OpenTelemetry API: with no SDK
configured these spans cost almost nothing, and the process that configures an SDK gets them all.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from tracing import attributes as attr

__all__ = ["agent_span", "chat_span", "lost_agent_span", "tool_span", "workflow_span"]

_tracer = trace.get_tracer("baton")


@contextmanager
def workflow_span(run_id: str, entry_agent: str) -> Iterator[Span]:
    with _tracer.start_as_current_span(
        "invoke_workflow baton",
        kind=SpanKind.INTERNAL,
        attributes={
            attr.GEN_AI_OPERATION_NAME: "invoke_workflow",
            attr.BATON_RUN_ID: run_id,
            attr.GEN_AI_CONVERSATION_ID: run_id,
            attr.GEN_AI_AGENT_NAME: entry_agent,
        },
    ) as span:
        yield span


@contextmanager
def agent_span(
    agent: str, actor_id: str, run_id: str, chain: tuple[str, ...], parent: Context | None
) -> Iterator[Span]:
    with _tracer.start_as_current_span(
        f"invoke_agent {agent}",
        context=parent,
        kind=SpanKind.INTERNAL,
        attributes={
            attr.GEN_AI_OPERATION_NAME: "invoke_agent",
            attr.GEN_AI_AGENT_NAME: agent,
            attr.GEN_AI_AGENT_ID: actor_id,
            attr.BATON_RUN_ID: run_id,
            attr.GEN_AI_CONVERSATION_ID: run_id,
            attr.BATON_DELEGATION_DEPTH: len(chain),
            attr.BATON_DELEGATION_CHAIN: list(chain),
        },
    ) as span:
        yield span


@contextmanager
def tool_span(tool: str, call_id: str) -> Iterator[Span]:
    with _tracer.start_as_current_span(
        f"execute_tool {tool}",
        attributes={
            attr.GEN_AI_OPERATION_NAME: "execute_tool",
            attr.GEN_AI_TOOL_NAME: tool,
            attr.GEN_AI_TOOL_CALL_ID: call_id,
        },
    ) as span:
        yield span


@contextmanager
def chat_span(model: str) -> Iterator[Span]:
    with _tracer.start_as_current_span(
        f"chat {model}",
        kind=SpanKind.CLIENT,
        attributes={attr.GEN_AI_OPERATION_NAME: "chat", attr.GEN_AI_REQUEST_MODEL: model},
    ) as span:
        yield span


def lost_agent_span(
    agent: str,
    actor_id: str,
    run_id: str,
    chain: tuple[str, ...],
    start_ns: int,
    error: BaseException,
) -> None:
    """An `invoke_agent` span for an invocation whose actor died before it could report."""
    span = _tracer.start_span(
        f"invoke_agent {agent}",
        kind=SpanKind.INTERNAL,
        start_time=start_ns,
        attributes={
            attr.GEN_AI_OPERATION_NAME: "invoke_agent",
            attr.GEN_AI_AGENT_NAME: agent,
            attr.GEN_AI_AGENT_ID: actor_id,
            attr.BATON_RUN_ID: run_id,
            attr.BATON_DELEGATION_DEPTH: len(chain),
            attr.BATON_DELEGATION_CHAIN: list(chain),
            attr.ERROR_TYPE: type(error).__name__,
        },
    )
    span.set_status(Status(StatusCode.ERROR, f"actor unavailable: {type(error).__name__}"))
    span.end()
