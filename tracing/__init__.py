"""The record: OpenTelemetry spans and their propagation.

Imports neither agents nor orchestrator.
"""

from tracing.collector import SpanCollector, configure_tracing
from tracing.propagation import extract_context, inject_context
from tracing.records import SpanRecord, span_record
from tracing.spans import agent_span, chat_span, lost_agent_span, tool_span, workflow_span

__all__ = [
    "SpanCollector",
    "SpanRecord",
    "agent_span",
    "chat_span",
    "configure_tracing",
    "extract_context",
    "inject_context",
    "lost_agent_span",
    "span_record",
    "tool_span",
    "workflow_span",
]
