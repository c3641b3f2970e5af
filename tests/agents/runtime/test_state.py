"""Shared state: tools write it through their context, parallel writers merge by the key's
reducer in call order, a write the schema refuses is a tool error naming the key, an answer is
saved at `save_as` and instructions read `{state.key}`, hooks see it with their thread and
invocation, and each write is an event, a span event and a note in the diagram. A team in one
process (no Ray), real litellm with the built-in models."""

from __future__ import annotations

from typing import Any

import pytest

from agents.core.events import StateChanged
from agents.core.messages import RunStatus
from agents.runtime.hooks import HookContext, Hooks
from agents.tools import ToolContext
from tests.testkit import EventList, local_trace
from tracing.sequence import sequence_diagram

pytestmark = pytest.mark.anyio

HERE = "tests.agents.runtime.test_state"


def note(ctx: ToolContext, text: str) -> str:
    """Note a finding in the shared state.

    Args:
        text: the finding.
    """
    ctx.state.set("seen", text)  # appended (the team's reducer)
    ctx.state.set("last", text)  # replaced: the last writer in call order wins
    ctx.state.set("count", ctx.state.get("count", 0) + 1)
    return f"noted {text} (run {ctx.run_id}, by {ctx.agent})"


def miscount(ctx: ToolContext) -> str:
    """Write a count that is not a number."""
    ctx.state.set("count", "many")
    return "written"


def _worker(name: str, text: str) -> str:
    return f"""
  - name: {name}
    tools: [{HERE}:note]
    model:
      name: baton/scripted
      params:
        replies:
          - {{tool_calls: [{{name: note, arguments: {{text: {text}}}}}]}}
          - {{content: done}}
"""


PARALLEL = (
    """
state:
  schema:
    type: object
    properties:
      seen: {type: array, items: {type: string}}
      last: {type: string}
      count: {type: integer}
  reducers: {seen: append}
agents:
  - name: hub
    delegates: [w1, w2, w3]
    model:
      name: baton/scripted
      params:
        replies:
          - tool_calls:
              - {name: delegate_to_w1, arguments: {task: look}}
              - {name: delegate_to_w2, arguments: {task: look}}
              - {name: delegate_to_w3, arguments: {task: look}}
          - {content: all noted}
"""
    + _worker("w1", "one")
    + _worker("w2", "two")
    + _worker("w3", "three")
)


async def test_parallel_writers_merge_by_reducer_in_call_order_whatever_ends_first() -> None:
    events = EventList()
    result, spans = await local_trace(PARALLEL, "find things", events=events)
    assert result.status == RunStatus.SUCCEEDED, result.error  # type: ignore[attr-defined]
    state = result.state  # type: ignore[attr-defined]
    # `seen` appends every writer's value; `last` (no reducer) keeps the last in call order;
    # `count` too: each worker began from the hub's state (none), so each wrote 1.
    assert state == {"seen": ["one", "two", "three"], "last": "three", "count": 1}
    written = [e for e in events.events if isinstance(e, StateChanged)]
    assert sorted(e.agent for e in written) == ["w1", "w2", "w3"]
    assert all(e.keys == ["seen", "last", "count"] for e in written)
    marked = [
        e["attributes"]["keys"]
        for s in spans
        for e in s.get("events", [])
        if e["name"] == "baton.state_changed"
    ]
    assert len(marked) == 3
    assert "✎ state: seen, last, count" in sequence_diagram(spans).text


SCHEMA = f"""
state:
  schema: {{type: object, properties: {{count: {{type: integer}}}}}}
agents:
  - name: counter
    tools: [{HERE}:miscount]
    model:
      name: baton/scripted
      params:
        replies: [{{tool_calls: [{{name: miscount, arguments: {{}}}}]}}, {{content: gave up}}]
"""


async def test_a_write_the_schema_refuses_is_a_tool_error_naming_the_key() -> None:
    result, spans = await local_trace(SCHEMA, "count")
    assert result.status == RunStatus.SUCCEEDED  # type: ignore[attr-defined]
    assert result.state is None  # type: ignore[attr-defined]  # (nothing was written)
    [tool] = [s for s in spans if s["name"] == "execute_tool miscount"]
    assert tool["status"] == "ERROR"
    assert "state key 'count': (top): 'many' is not of type 'integer'" in tool["status_message"]


SEEN: list[tuple[str | None, str, Any]] = []  # what Recorder's hook saw


class Recorder(Hooks):
    def on_end(self, ctx: HookContext, result: Any) -> None:
        SEEN.append((ctx.thread_id, ctx.invocation, ctx.state.get("city")))


SAVED = f"""
tracing: {{capture_content: true}}
state:
  schema:
    type: object
    properties:
      city: {{type: string}}
      season: {{type: string, default: spring}}
agents:
  - name: hub
    delegates: [scout, planner]
    model:
      name: baton/scripted
      params:
        replies:
          - {{tool_calls: [{{name: delegate_to_scout, arguments: {{task: pick a city}}}}]}}
          - {{tool_calls: [{{name: delegate_to_planner, arguments: {{task: plan it}}}}]}}
          - {{content: planned}}
  - name: scout
    save_as: city
    model: {{name: baton/scripted, params: {{replies: [{{content: Lisbon}}]}}}}
  - name: planner
    hooks: [{HERE}:Recorder]
    instructions: Plan a trip to {{state.city}} in {{state.season}}.
    model: {{name: baton/scripted, params: {{replies: [{{content: a plan}}]}}}}
"""


async def test_an_answer_saved_in_the_state_fills_a_later_agents_instructions() -> None:
    SEEN.clear()
    result, spans = await local_trace(SAVED, "a trip")
    assert result.status == RunStatus.SUCCEEDED, result.error  # type: ignore[attr-defined]
    assert result.state == {"city": "Lisbon"}  # type: ignore[attr-defined]
    # What the planner's model was asked: the state's value, and the schema's default where
    # the state has none.
    chats = [s for s in spans if s["name"].startswith("chat")]
    asked = [str(s["attributes"].get("gen_ai.input.messages")) for s in chats]
    assert sum("Plan a trip to Lisbon in spring." in a for a in asked) == 1, asked
    [(thread, invocation, city)] = SEEN
    assert thread is None and invocation and city == "Lisbon"


async def test_a_placeholder_the_state_cannot_fill_fails_the_call_naming_it() -> None:
    team = SAVED.replace("save_as: city", "save_as: town")
    result, _ = await local_trace(team, "a trip")
    [_, planner] = result.children  # type: ignore[attr-defined]
    assert planner.status == RunStatus.FAILED
    assert planner.error.startswith("the instructions use {state.city}, which the state")


FLOW = """
state: {reducers: {seen: append}}
agents:
  - name: trip
    workflow: tests.flows:saves_its_answers
    delegates: [scout]
  - name: scout
    tools: [tests.agents.runtime.test_state:note]
    model:
      name: baton/scripted
      params:
        replies: [{tool_calls: [{name: note, arguments: {text: found}}]}, {content: Porto}]
"""


async def test_a_workflow_reads_and_writes_the_state_and_saves_an_answer_in_it() -> None:
    result, _ = await local_trace(FLOW, "a trip")
    assert result.status == RunStatus.SUCCEEDED, result.error  # type: ignore[attr-defined]
    # The scout's own write came back with its answer; the call saved the answer; the
    # workflow's own write appended to the scout's.
    assert result.output == "Porto after ['found', 'the scout']"  # type: ignore[attr-defined]
    assert result.state == {  # type: ignore[attr-defined]
        "seen": ["found", "the scout"],
        "last": "found",
        "count": 1,
        "city": "Porto",
    }


def test_baton_check_holds_save_as_and_placeholders_to_the_states_schema() -> None:
    from agents.core.errors import ConfigError
    from orchestrator.system.config import parse_config

    closed = """
state:
  schema:
    type: object
    additionalProperties: false
    properties: {city: {type: string}, season: {type: string, default: spring}}
agents:
  - {name: scout, save_as: town, instructions: "Go to {state.city} in {state.season}."}
"""
    with pytest.raises(ConfigError) as info:
        parse_config(closed, "team.yaml")
    errors = [str(i) for i in info.value.issues if i.severity == "error"]
    assert len(errors) == 1 and "agents[0].save_as" in errors[0], errors
    assert "the state's schema has no key 'town' (it lists city, season)" in errors[0]
    # A key with no default is a warning: something may write it before the call.
    fine = parse_config(closed.replace("save_as: town", "save_as: city"), "team.yaml")
    [warning] = [str(i) for i in fine.warnings]
    assert "{state.city} has no default in the state's schema" in warning
