"""An OTLP/HTTP trace receiver on 127.0.0.1: what a backend (Jaeger, Phoenix, a Collector) gets."""

from __future__ import annotations

import http.server
import threading
import time

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.ports import free_port

__all__ = ["OtlpReceiver"]


class OtlpReceiver:
    """Takes `POST /v1/traces` (protobuf) and keeps each span's id, by trace id (hex).

    `delay_s`: how long each request takes to answer (a slow backend). Starts on `port` (a
    free one by default); `close` and a new receiver on the same port stand for a backend that
    goes down and comes back.
    """

    def __init__(self, port: int | None = None, delay_s: float = 0.0) -> None:
        self.spans: dict[str, set[str]] = {}
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                time.sleep(delay_s)
                with receiver._lock:
                    receiver.requests += 1
                    for resource in request.resource_spans:
                        for scope in resource.scope_spans:
                            for span in scope.spans:
                                trace = receiver.spans.setdefault(span.trace_id.hex(), set())
                                trace.add(span.span_id.hex())
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self.port = port or free_port()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The traces endpoint (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)."""
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def of(self, trace_id: str) -> set[str]:
        """The span ids received of a trace."""
        with self._lock:
            return set(self.spans.get(trace_id, ()))

    def close(self) -> None:
        """Stop answering (the port is free again)."""
        self._server.shutdown()
        self._server.server_close()
