"""A run's steps in words, and two runs' differences, on real spans from teams run here."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from tests.testkit import local_trace
from tracing import SpanRecord
from tracing.compare import differences, run_steps, step_label

pytestmark = pytest.mark.anyio

DEFAULT_TEAM = Path("configs/default.yaml").read_text()


async def trace(yaml_text: str, task: str, entry: str | None = None) -> list[SpanRecord]:
    _, spans = await local_trace(yaml_text, task, entry=entry)
    return cast("list[SpanRecord]", spans)


HANDOFF = """
name: desk
entry: desk
agents:
  - name: desk
    description: hands refunds over
    handoffs: [refunds]
    model:
      name: baton/scripted
      params: {replies: [{tool_calls: [{name: transfer_to_refunds, arguments: {}}]}]}
  - name: refunds
    description: decides refunds
"""


async def test_each_invocation_is_told_step_by_step() -> None:
    spans = await trace(DEFAULT_TEAM, "calculate 6 * 7", entry="coordinator")
    told = {(i.agent, i.occurrence): (i.outcome, i.steps) for i in run_steps(spans)}
    assert told[("coordinator", 1)] == ("ok", ["delegated to analyst", "answered directly"])
    assert told[("analyst", 1)] == ("ok", ["called calculate", "answered directly"])
    handed = await trace(HANDOFF, "refund me")
    assert run_steps(handed)[0].steps == ["handed over to refunds"]


async def test_differences_are_one_sentence_each_and_none_for_the_same_steps() -> None:
    direct = await trace(DEFAULT_TEAM, "say hello", entry="coordinator")
    delegated = await trace(DEFAULT_TEAM, "calculate 6 * 7", entry="coordinator")
    again = await trace(DEFAULT_TEAM, "calculate 6 * 7", entry="coordinator")
    assert differences(delegated, again) == []
    said = differences(direct, delegated)
    assert said[:3] == [
        "coordinator, step 1: answered directly, now delegates to analyst",
        "coordinator, step 2: no such step before, now answers directly",
        "analyst: not called before, now called",
    ]
    back = differences(delegated, direct)
    assert "coordinator, step 2: answered directly, now no such step" in back
    assert "analyst: called before, not now" in back


async def test_a_span_is_named_as_a_step_a_person_can_find() -> None:
    spans = await trace(DEFAULT_TEAM, "calculate 6 * 7", entry="coordinator")
    by_name: dict[str, str] = {}
    for span in spans:
        by_name.setdefault(str(span["name"]), str(span["span_id"]))

    def label(name: str) -> str:
        return step_label(spans, by_name[name])

    assert label("execute_tool delegate_to_analyst") == "coordinator, step 1: delegated to analyst"
    assert label("execute_tool calculate") == "analyst, step 1: called calculate"
    assert label("invoke_agent analyst") == "analyst, from its start"
    first_chat = next(
        str(s["span_id"])
        for s in spans
        if s["name"] == "chat offline" and s["parent_span_id"] == by_name["invoke_agent analyst"]
    )
    assert step_label(spans, first_chat) == "analyst, step 1: the model call (called calculate)"
