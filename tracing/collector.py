"""Span collection inside each process, and the once-per-process SDK set-up.

Every process that runs agents (the driver and each actor) installs one `SpanCollector`. It keeps
finished spans by trace id until the runtime drains them at the end of an invocation, so a
delegation's spans travel back with its result: nothing stays buffered in an actor that may die.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from tracing.records import SpanRecord, span_record

__all__ = ["MAX_SPANS_PER_TRACE", "SpanCollector", "configure_tracing"]

logger = logging.getLogger(__name__)

MAX_SPANS_PER_TRACE = 100_000
# Traces nobody drains (spans made outside a run) must not grow without bound.
MAX_TRACES = 4096


class SpanCollector(SpanProcessor):
    """Keeps finished spans per trace until they are drained."""

    def __init__(self, role: str) -> None:
        # Also on each record, in case this collector joined a provider configured elsewhere.
        self.role = role
        self._process = {"baton.process.role": role, "process.pid": os.getpid()}
        self._lock = threading.Lock()
        self._spans: OrderedDict[int, list[SpanRecord]] = OrderedDict()
        self.dropped = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        try:
            record = span_record(span)
            record["resource"].update(self._process)
            trace_id = span.get_span_context().trace_id  # type: ignore[union-attr]
            with self._lock:
                bucket = self._spans.get(trace_id)
                if bucket is None:
                    bucket = self._spans[trace_id] = []
                    if len(self._spans) > MAX_TRACES:
                        _, oldest = self._spans.popitem(last=False)
                        self.dropped += len(oldest)
                if len(bucket) >= MAX_SPANS_PER_TRACE:
                    self.dropped += 1
                    return
                bucket.append(record)
        except Exception:  # telemetry never breaks a run
            logger.exception("could not record a finished span")

    def drain(self, trace_id: int) -> list[SpanRecord]:
        """Take every finished span of `trace_id` collected in this process so far."""
        with self._lock:
            return self._spans.pop(trace_id, [])

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


_lock = threading.Lock()
_collector: SpanCollector | None = None


def configure_tracing(role: str) -> SpanCollector:
    """Install Baton's tracer provider in this process (once) and return its collector.

    Args:
        role: what this process is ("orchestrator", or the agent actor's name), recorded on
            every span's resource.
    """
    global _collector
    with _lock:
        if _collector is not None:
            return _collector
        collector = SpanCollector(role)
        resource = Resource.create(
            {"service.name": "baton", "baton.process.role": role, "process.pid": os.getpid()}
        )
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(collector)
        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):
            # Someone (a test, an embedding app) configured the SDK first: join it.
            current.add_span_processor(collector)
        else:
            trace.set_tracer_provider(provider)
        _collector = collector
        return collector
