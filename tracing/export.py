"""Sending a run's spans to an OTLP backend (Jaeger, Tempo, Phoenix, an OTel Collector).

The orchestrator exports each run's complete span set once the run is finished: the spans of
every process, already redacted and bounded, including those made for dead actors. Agent actors
need no route to the backend, and what the backend shows is what the run store holds.

The exporter is the SDK's own OTLP/HTTP exporter, so the standard `OTEL_EXPORTER_OTLP_*`
variables (endpoint, headers, timeout, compression, certificates) apply. In front of it,
`OtlpExport` sends runs' spans in chunks from a thread of its own: a run's spans wait for room
in its bounded queue rather than being dropped (the SDK's `BatchSpanProcessor` drops what does
not fit its 2,048), and a backend that is down is retried, said once in the log, and counted:
only what does not fit while it is down is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.sdk.metrics.export import MetricExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
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


# Spans a request to the backend carries, and spans waiting to be sent at most.
EXPORT_CHUNK = 512
MAX_QUEUED_SPANS = 20_000
# After a failed send, the next try comes after this long, doubling up to the second figure.
RETRY_S = (1.0, 30.0)
# The SDK exporter's loggers: each failed request would be a line (or several) of their own.
_SDK_LOGGERS = ("opentelemetry.exporter.otlp.proto.http.trace_exporter",
                "opentelemetry.exporter.otlp.common.http")  # fmt: skip


class _LastSaid(logging.Filter):
    """Keeps what the SDK exporter said last (the cause of a failure), instead of logging it."""

    def __init__(self) -> None:
        super().__init__()
        self.said = ""

    def filter(self, record: logging.LogRecord) -> bool:
        self.said = record.getMessage()[:300]
        return False


class OtlpExport:
    """Sends finished runs' spans to an OTLP backend, in chunks, from a thread of its own.

    Args:
        exporter: the OTLP exporter (the SDK's).
        destination: where the spans go, as people are told (no credentials in it).
        chunk: spans a request carries.
        max_queued: spans waiting at most; a run's spans wait for room while the backend
            answers, and the oldest are dropped (counted) while it does not.
        retry_s: the first wait after a failed send, and the longest.
    """

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        destination: str = "",
        chunk: int = EXPORT_CHUNK,
        max_queued: int = MAX_QUEUED_SPANS,
        retry_s: tuple[float, float] = RETRY_S,
    ) -> None:
        self.destination = destination
        self._exporter = exporter
        self._chunk = chunk
        self._max_queued = max(max_queued, chunk)
        self._retry_s = retry_s
        self._chunks: deque[list[ReadableSpan]] = deque()
        self._queued = 0  # spans in `_chunks`
        self._sending = 0  # spans of the chunk being sent
        self._changed = threading.Condition()
        self._down = False  # the last send failed
        self._closing = False
        self.sent = 0  # spans the backend took
        self.dropped = 0  # spans that never reached it
        self._worker: threading.Thread | None = None
        self._cause = _LastSaid()
        for name in _SDK_LOGGERS:
            logging.getLogger(name).addFilter(self._cause)

    async def export(self, records: Iterable[SpanRecord]) -> None:
        """Queue a run's spans, waiting for room while the backend answers; never raises.

        (Telemetry never breaks a run.)
        """
        spans: list[ReadableSpan] = []
        resources: dict[Any, Resource] = {}
        for record in records:
            try:
                spans.append(readable_span(record, resources))
            except Exception:
                logger.exception("could not export span %s", record.get("name"))
        for start in range(0, len(spans), self._chunk):
            chunk = spans[start : start + self._chunk]
            if not self._offer(chunk, wait=False):
                await asyncio.to_thread(self._offer, chunk, True)

    def _offer(self, chunk: list[ReadableSpan], wait: bool) -> bool:
        """Queue a chunk if there is room, or make room while the backend is down.

        With `wait`, wait for room while it answers. False: no room, and not waited for.
        """
        with self._changed:
            self._start()
            while self._queued + len(chunk) > self._max_queued and not self._down:
                if not wait or self._closing:
                    return False
                self._changed.wait()
            while self._chunks and self._queued + len(chunk) > self._max_queued:
                dropped = self._chunks.popleft()  # the backend is down: the oldest go
                self._queued -= len(dropped)
                self.dropped += len(dropped)
            self._chunks.append(chunk)
            self._queued += len(chunk)
            self._changed.notify_all()
            return True

    def _start(self) -> None:
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="otlp-export", daemon=True)
            self._worker.start()

    def _work(self) -> None:
        wait = self._retry_s[0]
        while True:
            with self._changed:
                while not self._chunks and not self._closing:
                    self._changed.wait()
                if not self._chunks:
                    return
                chunk = self._chunks.popleft()
                self._queued -= len(chunk)
                self._sending = len(chunk)
            try:
                result = self._exporter.export(chunk)
            except Exception as exc:  # an exporter that raises is a failed send too
                self._cause.said = str(exc)[:300]
                result = SpanExportResult.FAILURE
            with self._changed:
                self._sending = 0
                if result == SpanExportResult.SUCCESS:
                    self.sent += len(chunk)
                    if self._down:
                        logger.warning(
                            "OTLP export to %s works again (%d spans were dropped meanwhile)",
                            self.destination or "the backend",
                            self.dropped,
                        )
                    self._down, wait = False, self._retry_s[0]
                else:
                    if not self._down:
                        logger.error(
                            "OTLP export to %s failed (%s): runs' spans wait for it (up to %d), "
                            "the oldest are dropped beyond; retrying",
                            self.destination or "the backend",
                            self._cause.said or "no answer",
                            self._max_queued,
                        )
                    self._down = True
                    if self._closing:  # no more tries: what is left is lost
                        self.dropped += len(chunk) + self._queued
                        self._chunks.clear()
                        self._queued = 0
                        self._changed.notify_all()
                        return
                    self._chunks.appendleft(chunk)  # tried again first
                    self._queued += len(chunk)
                    self._changed.notify_all()
                    self._changed.wait(wait)
                    wait = min(wait * 2, self._retry_s[1])
                self._changed.notify_all()

    @property
    def down(self) -> bool:
        """Whether the last send failed (the backend is down or refuses)."""
        return self._down

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every queued span is sent (or dropped); False if that took too long."""
        with self._changed:
            return self._changed.wait_for(
                lambda: not self._chunks and not self._sending, timeout=timeout_s
            )

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Send what is queued (within `timeout_s`), then stop; what is left is counted lost."""
        self.flush(timeout_s)
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        if self._worker is not None:
            self._worker.join(timeout_s)
        self._exporter.shutdown()
        for name in _SDK_LOGGERS:
            logging.getLogger(name).removeFilter(self._cause)


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
