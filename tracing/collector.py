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
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from typing_extensions import override

from tracing import attributes as attr
from tracing.records import SpanRecord, resource_record, span_record
from tracing.redaction import Redactor, install_log_redaction, secret_values_from_env
from tracing.spans import TRACER_NAME

__all__ = ["MAX_SPANS_PER_TRACE", "SpanCollector", "configure_tracing"]

logger = logging.getLogger(__name__)

MAX_SPANS_PER_TRACE = 100_000
# Traces nobody drains (spans made outside a run) must not grow without bound.
MAX_TRACES = 4096


class SpanCollector(SpanProcessor):
    """Keeps finished spans per trace until they are drained, redacted and bounded.

    Only traces that hold a Baton span (a run's) are kept: spans that other libraries make in
    the same process (FastAPI's, for each HTTP request) would otherwise pile up undrained. A
    library span inside a run (an MCP client call, say) is kept, being in the run's trace.
    """

    def __init__(
        self,
        role: str,
        redactor: Redactor | None = None,
        resource: Mapping[str, Any] | None = None,
    ) -> None:
        # Also on each record, in case this collector joined a provider configured elsewhere.
        self.role = role
        self.redactor = redactor or Redactor()
        self._process = {
            attr.BATON_PROCESS_ROLE: role,
            "process.pid": os.getpid(),
            **(resource or {}),
        }
        # One per resource (that is, per provider): the same for every span of this process.
        self._resources: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._spans: OrderedDict[int, list[SpanRecord]] = OrderedDict()
        self._runs: OrderedDict[int, None] = OrderedDict()  # traces with a Baton span
        self.dropped = 0

    @override
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        scope = span.instrumentation_scope
        if scope is not None and scope.name == TRACER_NAME:
            trace_id = span.get_span_context().trace_id
            with self._lock:
                self._runs[trace_id] = None
                self._runs.move_to_end(trace_id)
                if len(self._runs) > MAX_TRACES:
                    self._runs.popitem(last=False)

    @override
    def on_end(self, span: ReadableSpan) -> None:
        try:
            trace_id = span.get_span_context().trace_id  # type: ignore[union-attr]
            if trace_id not in self._runs:
                return  # not part of a run
            resource = self._resources.get(id(span.resource))
            if resource is None:
                resource = {**resource_record(span), **self._process}
                self._resources[id(span.resource)] = resource
            record = span_record(span, self.redactor, resource)
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

    @override
    def shutdown(self) -> None:
        pass

    @override
    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


_lock = threading.Lock()
_collector: SpanCollector | None = None


def configure_tracing(
    role: str, secrets: Iterable[str] = (), resource: Mapping[str, Any] | None = None
) -> SpanCollector:
    """Install Baton's tracer provider and log redaction in this process (once).

    Returns the process's collector.

    Args:
        role: what this process is ("orchestrator", or the agent actor's name), recorded on
            every span's resource.
        secrets: values never to record. Later calls add theirs; the values of environment
            variables whose names say they hold credentials are always included.
        resource: more attributes of this process for every span (its node, say).
    """
    global _collector
    with _lock:
        if _collector is not None:
            _collector.redactor.add(secrets)
            return _collector
        redactor = Redactor(secret_values_from_env(os.environ))
        redactor.add(secrets)
        install_log_redaction(redactor)
        collector = SpanCollector(role, redactor, resource)
        provider = TracerProvider(
            resource=Resource.create(
                {
                    "service.name": "baton",
                    attr.BATON_PROCESS_ROLE: role,
                    "process.pid": os.getpid(),
                    **(resource or {}),
                }
            )
        )
        provider.add_span_processor(collector)
        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):
            # Someone (a test, an embedding app) configured the SDK first: join it.
            current.add_span_processor(collector)
        else:
            trace.set_tracer_provider(provider)
        _collector = collector
        return collector
