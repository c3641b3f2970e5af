"""The OTLP export sends every span of a run, however many, and a backend that is down costs a
counted figure and one clear log line, not a silent loss."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from tests.testkit import OtlpReceiver
from tracing import OtlpExport, SpanRecord

pytestmark = [pytest.mark.anyio]


def _run(trace: str, spans: int) -> list[SpanRecord]:
    """A run's spans: a root and `spans - 1` children under it."""
    now = time.time_ns()
    root = f"{1:016x}"

    def span(i: int) -> SpanRecord:
        return SpanRecord(
            trace_id=trace,
            span_id=f"{i + 1:016x}",
            parent_span_id=None if i == 0 else root,
            name="invoke_workflow baton" if i == 0 else "invoke_agent worker",
            kind="INTERNAL",
            start_ns=now,
            end_ns=now + 1000,
            status="OK",
            status_message=None,
            attributes={"baton.run.id": trace},
            events=[],
            resource={"service.name": "baton"},
        )

    return [span(i) for i in range(spans)]


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    server = OtlpReceiver(delay_s=0.01)  # a backend that takes its time
    yield server
    server.close()


async def test_a_run_larger_than_the_queue_reaches_the_backend_whole(
    receiver: OtlpReceiver,
) -> None:
    # Ten times the queue's room, from two runs: nothing is dropped, the runs wait for room.
    export = OtlpExport(OTLPSpanExporter(endpoint=receiver.url), chunk=100, max_queued=500)
    runs = [_run(os.urandom(16).hex(), 2500), _run(os.urandom(16).hex(), 2500)]
    try:
        for spans in runs:
            await export.export(spans)
        assert export.flush(30)
    finally:
        export.shutdown()
    for spans in runs:
        assert receiver.of(spans[0]["trace_id"]) == {s["span_id"] for s in spans}
    assert (export.sent, export.dropped) == (5000, 0)


async def test_a_backend_that_is_down_is_said_once_counted_and_sent_to_once_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = OtlpReceiver()
    port = down.port
    down.close()  # nothing listens on its port
    export = OtlpExport(
        OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=0.5),
        destination=f"127.0.0.1:{port}",
        chunk=100,
        max_queued=300,
        retry_s=(0.1, 0.2),
    )
    caplog.set_level(logging.WARNING)
    try:
        lost = _run(os.urandom(16).hex(), 1000)
        await export.export(lost)  # does not wait for a backend that is down
        assert export.down
        assert 600 <= export.dropped <= 1000  # all but the queue and the chunk being sent
        back = OtlpReceiver(port=port)
        try:
            kept = _run(os.urandom(16).hex(), 200)
            await export.export(kept)
            assert export.flush(30)
            assert receiver_has(back, kept)
        finally:
            back.close()
    finally:
        export.shutdown()
    said = [r.getMessage() for r in caplog.records if "OTLP export" in r.getMessage()]
    assert len([s for s in said if "failed" in s]) == 1, said
    assert f"OTLP export to 127.0.0.1:{port} failed (" in said[0]
    assert any("works again" in s for s in said), said
    # Nothing else the exporter said while it was down reached the log.
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry.exporter")]


def receiver_has(receiver: OtlpReceiver, spans: list[SpanRecord]) -> bool:
    return receiver.of(spans[0]["trace_id"]) == {s["span_id"] for s in spans}
