"""Typed events: one model per kind, read by every consumer without a parser of its own."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, get_args

import pytest

from agents.core.event_schema import events_json_schema
from agents.core.events import (
    EVENTS,
    AgentStarted,
    Event,
    ModelDelta,
    ModelStarted,
)
from orchestrator.api import create_app
from orchestrator.cli.common import progress
from orchestrator.cli.follow import Display, follow
from orchestrator.service.live_trace import live_spans
from tests.testkit import EventList, config, local_trace
from tests.tracing.test_sequence import DEFAULT_TEAM

pytestmark = pytest.mark.anyio

UI_SCHEMA = Path("orchestrator/web/static/events.schema.json")
KINDS = {cls.model_fields["type"].default for cls in get_args(get_args(Event)[0])}


def test_every_event_kind_is_in_the_openapi_document_and_the_ui_copy_is_generated() -> None:
    def no_service() -> AbstractAsyncContextManager[Any]:
        raise AssertionError("the document needs no service")

    app = create_app(config(DEFAULT_TEAM), no_service)
    route = app.openapi()["paths"]["/v1/runs/{run_id}/events"]["get"]
    stream = route["responses"]["200"]["content"]["text/event-stream"]["itemSchema"]
    payload = stream["properties"]["data"]["contentSchema"]
    assert set(payload["discriminator"]["mapping"]) == KINDS
    assert {"run_started", "model_started", "approval_requested", "run_finished"} <= KINDS
    assert json.loads(UI_SCHEMA.read_text()) == events_json_schema(), "run `make schema`"


async def test_each_invocation_numbers_its_events_in_causal_order() -> None:
    events = EventList()
    await local_trace(DEFAULT_TEAM, "Research the history of Ray and calculate 2+2", events=events)
    by_invocation: dict[str | None, list[Event]] = {}
    for event in events.events:
        by_invocation.setdefault(event.invocation, []).append(event)
    started = [e.agent for e in events.events if isinstance(e, AgentStarted)]
    assert len(by_invocation) == len(started) >= 3  # coordinator and the agents it called
    for own in by_invocation.values():
        assert [e.seq for e in own] == list(range(1, len(own) + 1))
        assert own[0].type == "agent_started" and own[-1].type == "agent_finished"
    # What is stored and streamed reads back as the same typed event.
    for event in events.events:
        assert EVENTS.validate_python(event.model_dump(mode="json")) == event


async def test_a_model_call_under_way_is_an_open_chat_span_in_the_live_trace() -> None:
    events = EventList()
    await local_trace(DEFAULT_TEAM, "calculate 6 * 7", entry="analyst", events=events)
    first_call = next(i for i, e in enumerate(events.events) if isinstance(e, ModelStarted))
    midway = live_spans([], events.events[: first_call + 1])
    chat = [s for s in midway if s["name"] == "chat offline"]
    assert len(chat) == 1 and chat[0]["end_ns"] is None
    assert chat[0]["parent_span_id"] == events.events[0].span_id  # under invoke_agent analyst
    finished = live_spans([], events.events)
    assert all(s["end_ns"] is not None for s in finished if s["name"].startswith("chat "))


async def test_the_cli_shows_progress_events_the_streamed_answer_and_with_verbose_all() -> None:
    def delta(chain: list[str], text: str) -> ModelDelta:
        return ModelDelta(agent=chain[-1], chain=chain, invocation=chain[-1], step=1, text=text)

    shown = [
        AgentStarted(agent="analyst", caller="coordinator"),
        delta(["coordinator", "analyst"], "sub-agent thinking "),
        ModelStarted(agent="analyst", model="baton/offline", step=1),
        delta(["coordinator"], "The answer "),
        delta(["coordinator"], "is 42."),
    ]

    async def stream() -> AsyncIterator[Event | None]:
        for event in shown:
            yield event  # type: ignore[misc]
            await asyncio.sleep(0)

    async def decide(call_id: str, approved: bool, why: str) -> object:
        raise AssertionError("nothing waits for approval")

    printed = {}
    for display in (Display("progress"), Display("verbose", "all"), Display("quiet", "none")):
        shown_on = progress()  # the terminal, or stderr when stdout is not one (as here)
        with shown_on.capture() as captured, shown_on.status("…") as status:
            await follow(stream(), status, display, decide)
        printed[display.events] = captured.get()
    assert "→ analyst (from coordinator)" in printed["progress"]
    assert "asks baton/offline" not in printed["progress"]
    # The entry agent's streamed text on one line, whole; a sub-agent's only when asked for.
    assert "coordinator ▸ The answer is 42.\n" in printed["progress"]
    assert "thinking" not in printed["progress"]
    assert "asks baton/offline (step 1)" in printed["verbose"]
    assert "analyst ▸ sub-agent thinking \n" in printed["verbose"]
    assert printed["quiet"] == ""
