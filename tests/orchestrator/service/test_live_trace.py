"""A running run's trace, rebuilt from its progress events, is the trace it will have."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.service.live_trace import live_spans
from tests.testkit import EventList, local_trace
from tests.tracing.test_sequence import FAILING

pytestmark = pytest.mark.anyio


def shape(spans: list[dict[str, object]]) -> set[tuple[object, ...]]:
    return {(s["span_id"], s["parent_span_id"], s["name"], s["status"] == "ERROR") for s in spans}


@pytest.mark.parametrize(
    ("yaml_text", "task"),
    [
        (Path("configs/default.yaml").read_text(), "Research the history of Ray and calculate 2+2"),
        (FAILING, "go"),
    ],
)
async def test_events_alone_rebuild_every_agent_tool_and_model_span(
    yaml_text: str, task: str
) -> None:
    events = EventList()
    _, spans = await local_trace(yaml_text, task, events=events)
    finished = [s for s in spans if s["name"] != "invoke_workflow baton"]  # the engine's own
    rebuilt = live_spans([], events.events)
    assert shape(rebuilt) == shape(finished)
    assert all(s["end_ns"] is not None for s in rebuilt)  # every one was closed by an event


async def test_spans_already_sent_win_and_open_ones_stay_open() -> None:
    events = EventList()
    _, spans = await local_trace(FAILING, "go", events=events)
    worker = next(s for s in spans if s["name"] == "invoke_agent worker")
    # As it looks midway: the worker's spans have arrived, the boss has not finished.
    midway = [e for e in events.events if e.type != "agent_finished" or e.agent == "worker"]
    rebuilt = live_spans([worker], midway)  # type: ignore[list-item]
    by_name = {s["name"]: s for s in rebuilt}
    assert by_name["invoke_agent worker"] is worker
    assert by_name["invoke_agent boss"]["end_ns"] is None
