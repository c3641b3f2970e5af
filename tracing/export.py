"""Sending a run's spans to an OTLP backend (Jaeger, Tempo, Phoenix, an OTel Collector).

The orchestrator exports each run's complete span set once the run is finished: the spans of
every process, already redacted and bounded, including those made for dead actors. Agent actors
need no route to the backend, and what the backend shows is what the run store holds.

The exporter is the SDK's own OTLP/HTTP exporter behind a `BatchSpanProcessor`, so the standard
`OTEL_EXPORTER_OTLP_*` variables (endpoint, headers, timeout, compression, certificates) apply.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.sdk.metrics.export import MetricExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from tracing.records import SpanRecord

__all__ = ["OtlpExport", "otlp_export_from_env", "otlp_metrics_from_env", "readable_span"]

logger = logging.getLogger(__name__)

_SCOPE = InstrumentationScope("baton")
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def _context(trace_id: str, span_id: str) -> SpanContext:
    return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=False, trace_flags=_SAMPLED)


def readable_span(record: SpanRecord, resources: dict[Any, Resource] | None = None) -> ReadableSpan:
    """Rebuild an SDK span from its stored record (for exporters)."""
    resource_attributes = record.get("resource") or {}
    key = tuple(sorted((k, str(v)) for k, v in resource_attributes.items()))
    cache = resources if resources is not None else {}
    resource = cache.get(key)
    if resource is None:
        resource = cache[key] = Resource(resource_attributes)
    parent = record.get("parent_span_id")
    status = StatusCode[record.get("status") or "UNSET"]
    return ReadableSpan(
        name=record["name"],
        context=_context(record["trace_id"], record["span_id"]),
        parent=_context(record["trace_id"], parent) if parent else None,
        resource=resource,
        attributes=record.get("attributes") or {},
        events=[
            Event(e["name"], e.get("attributes") or {}, e.get("time_ns"))
            for e in record.get("events") or []
        ],
        kind=SpanKind[record.get("kind") or "INTERNAL"],
        status=Status(status, record.get("status_message") if status == StatusCode.ERROR else None),
        start_time=record["start_ns"],
        end_time=record["end_ns"],
        instrumentation_scope=_SCOPE,
    )


class OtlpExport:
    """Hands finished runs' spans to an exporter, batched, off the caller's path."""

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        destination: str = "",
        schedule_delay_millis: float = 500,
    ) -> None:
        """`destination`: where the spans go, as people are told (no credentials in it)."""
        self.destination = destination
        self._processor = BatchSpanProcessor(exporter, schedule_delay_millis=schedule_delay_millis)

    def export(self, records: Iterable[SpanRecord]) -> None:
        """Queue a run's spans; never raises (telemetry never breaks a run)."""
        resources: dict[Any, Resource] = {}
        for record in records:
            try:
                self._processor.on_end(readable_span(record, resources))
            except Exception:
                logger.exception("could not export span %s", record.get("name"))

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Send what is queued, waiting up to `timeout_s`; False if it did not finish."""
        return self._processor.force_flush(int(timeout_s * 1000))

    def shutdown(self) -> None:
        """Send what is queued and stop."""
        self._processor.shutdown()  # type: ignore[no-untyped-call]


_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def otlp_export_from_env(environ: Mapping[str, str]) -> OtlpExport | None:
    """An OTLP/HTTP export when an OTLP endpoint is configured, else None.

    Export is on when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is
    set and `OTEL_TRACES_EXPORTER` is not `none`; the exporter reads the other `OTEL_*` variables.

    Raises:
        ValueError: `OTEL_EXPORTER_OTLP_PROTOCOL` asks for something other than http/protobuf.
    """
    if not any(environ.get(name) for name in _ENDPOINT_VARIABLES):
        return None
    if environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return None
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if protocol != "http/protobuf":
        raise ValueError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported; Baton exports OTLP over "
            "HTTP (http/protobuf, usually port 4318)"
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OtlpExport(OTLPSpanExporter(), destination=_destination(environ))


def otlp_metrics_from_env(environ: Mapping[str, str]) -> MetricExporter | None:
    """An OTLP/HTTP metric exporter when an OTLP endpoint is configured, else None.

    On with `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`, unless
    `OTEL_METRICS_EXPORTER` is `none` (the exporter reads the other `OTEL_*` variables).
    """
    names = ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
    if not any(environ.get(name) for name in names):
        return None
    if environ.get("OTEL_METRICS_EXPORTER", "otlp").strip().lower() == "none":
        return None
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter()


def _destination(environ: Mapping[str, str]) -> str:
    """The traces endpoint the exporter sends to, without credentials or query."""
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if not endpoint:
        endpoint = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").rstrip("/") + "/v1/traces"
    where = urlsplit(endpoint.strip())
    host = where.hostname or ""
    port = f":{where.port}" if where.port else ""
    return f"{where.scheme}://{host}{port}{where.path}" if where.scheme else endpoint
