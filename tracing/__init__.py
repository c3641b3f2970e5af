"""The record: OpenTelemetry spans and their propagation.

Imports neither agents nor orchestrator.
"""

from tracing.propagation import extract_context, inject_context
from tracing.spans import agent_span, chat_span, tool_span, workflow_span

__all__ = [
    "agent_span",
    "chat_span",
    "extract_context",
    "inject_context",
    "tool_span",
    "workflow_span",
]
