"""The record: OpenTelemetry spans and their propagation, redaction and export.

Imports neither agents nor orchestrator.
"""

from tracing import genai
from tracing.collector import SpanCollector, configure_tracing
from tracing.export import OtlpExport, otlp_export_from_env, otlp_metrics_from_env, readable_span
from tracing.operations import memory_operation
from tracing.propagation import extract_context, inject_context
from tracing.records import SpanRecord, agent_span_counts, span_record
from tracing.redaction import (
    REDACTED,
    Redactor,
    is_secret_name,
    secret_values_from_env,
    secret_values_in,
)
from tracing.spans import (
    ContentOptions,
    agent_span,
    chat_span,
    end_workflow,
    gate_wait_span,
    host_came_back,
    host_wait_span,
    lost_agent_span,
    memory_span,
    record_content,
    set_outcome,
    span_ids,
    tool_span,
    workflow_span,
)

__all__ = [
    "REDACTED",
    "ContentOptions",
    "OtlpExport",
    "Redactor",
    "SpanCollector",
    "SpanRecord",
    "agent_span",
    "agent_span_counts",
    "chat_span",
    "configure_tracing",
    "end_workflow",
    "extract_context",
    "gate_wait_span",
    "genai",
    "host_came_back",
    "host_wait_span",
    "inject_context",
    "is_secret_name",
    "lost_agent_span",
    "memory_operation",
    "memory_span",
    "otlp_export_from_env",
    "otlp_metrics_from_env",
    "readable_span",
    "record_content",
    "secret_values_from_env",
    "secret_values_in",
    "set_outcome",
    "span_ids",
    "span_record",
    "tool_span",
    "workflow_span",
]
