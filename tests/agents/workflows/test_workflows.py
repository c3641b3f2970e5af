"""Workflows in one process (no Ray): code and declared shapes calling agents, typed data between
them, failures said with their cause, and diagrams that draw what ran at once as `par`."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agents.core.errors import ConfigError
from agents.core.messages import RunStatus
from orchestrator.system.config import parse_config
from tests.service import PROFILER
from tests.testkit import local_trace
from tracing.sequence import sequence_diagram

pytestmark = pytest.mark.anyio

ANALYST = """
  - name: analyst
    description: Calculates.
    tools: [configs.tools:calculate]
"""


def team(workflow: str, calls: str, *agents: str, extra: str = "") -> str:
    head = f"""
name: flows
{extra}
agents:
  - name: flow
    description: A workflow.
    workflow: {workflow}
    delegates: [{calls}]
"""
    return textwrap.dedent(head) + "".join(agents)


def spans_named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name]


async def test_calls_that_ran_at_once_overlap_and_are_drawn_as_par_never_as_a_loop() -> None:
    result, spans = await local_trace(
        team("tests.flows:one_then_two_at_once", "analyst", ANALYST), "go"
    )
    assert result.status == RunStatus.SUCCEEDED, result.error  # type: ignore[attr-defined]
    assert result.output == "- calculate: 42 | - calculate: 5 | - calculate: 9"  # type: ignore[attr-defined]
    calls = sorted(
        spans_named(spans, "execute_tool delegate_to_analyst"), key=lambda s: s["start_ns"]
    )
    assert [c["attributes"]["baton.workflow.place"] for c in calls] == ["w1", "w2", "w3"]
    first, second, third = calls
    assert first["end_ns"] <= second["start_ns"]  # one, then...
    assert (
        second["start_ns"] < third["end_ns"] and third["start_ns"] < second["end_ns"]
    )  # two at once
    drawn = sequence_diagram(spans).text
    assert drawn.count("par delegate_to_analyst #35;1") == 1 and "loop" not in drawn
    # The workflow made no model call of its own.
    assert "Note over a3: flow: 1 invocation, 0 model calls" in drawn


async def test_calls_one_after_another_are_drawn_as_a_loop_never_as_par() -> None:
    _, spans = await local_trace(team("tests.flows:three_in_a_row", "analyst", ANALYST), "go")
    drawn = sequence_diagram(spans).text
    assert "loop \N{MULTIPLICATION SIGN}3 alike calls" in drawn and "par " not in drawn


async def test_typed_data_goes_in_and_comes_back_as_data() -> None:
    traced = "tracing: {capture_content: true}"
    result, spans = await local_trace(
        team("tests.flows:structured", "profiler", PROFILER, extra=traced),
        "make a card",
        given={"name": "Ada"},
    )
    assert result.status == RunStatus.SUCCEEDED, result.error  # type: ignore[attr-defined]
    import json

    answer = json.loads(result.output)  # type: ignore[attr-defined]
    assert answer["asked_by"] == "make a card" and answer["card"]["age"] == 30
    [profiler] = spans_named(spans, "invoke_agent profiler")
    assert json.loads(profiler["attributes"]["baton.input"]) == {"name": "Ada", "age": 30}


async def test_input_that_does_not_fit_is_refused_naming_the_field_and_nothing_runs() -> None:
    # A workflow's call: refused before the call, the workflow fails saying why.
    result, spans = await local_trace(team("tests.flows:misfit_input", "profiler", PROFILER), "go")
    assert result.status == RunStatus.FAILED  # type: ignore[attr-defined]
    assert result.error == (  # type: ignore[attr-defined]
        "WorkflowError: invalid input for profiler: (top): 'age' is a required property; "
        "name: 5 is not of type 'string'"
    )
    assert spans_named(spans, "invoke_agent profiler") == []
    # The entry agent's own input, on arrival.
    alone = "agents:\n" + textwrap.dedent(PROFILER)
    result, _ = await local_trace(alone, "profile", given={"name": "Ada", "age": -1})
    assert result.status == RunStatus.FAILED  # type: ignore[attr-defined]
    assert result.error == "the input does not fit profiler: age: -1 is less than the minimum of 0"  # type: ignore[attr-defined]
    # A model that delegates with input that does not fit gets a tool error naming the field.
    caller = """
      - name: asker
        description: Asks for a card.
        delegates: [profiler]
        model:
          name: baton/scripted
          params:
            replies:
              - tool_calls:
                  - {name: delegate_to_profiler, arguments: {task: card, input: {name: Ada}}}
              - {content: done}
    """
    result, spans = await local_trace(
        "agents:" + textwrap.dedent(caller) + textwrap.dedent(PROFILER), "go"
    )
    [call] = spans_named(spans, "execute_tool delegate_to_profiler")
    assert call["status"] == "ERROR"
    assert (
        "invalid input for profiler: (top): 'age' is a required property" in call["status_message"]
    )
    assert spans_named(spans, "invoke_agent profiler") == []


async def test_a_workflow_that_raises_fails_its_run_with_the_exceptions_message() -> None:
    result, spans = await local_trace(team("tests.flows:raises", "analyst", ANALYST), "go")
    assert result.status == RunStatus.FAILED  # type: ignore[attr-defined]
    assert result.error == "RuntimeError: the ledger of parcels does not add up"  # type: ignore[attr-defined]
    [flow] = spans_named(spans, "invoke_agent flow")
    assert flow["status"] == "ERROR" and "parcels" in flow["status_message"]
    assert len(result.children) == 1  # type: ignore[attr-defined]  # (the call before is kept)


async def test_a_workflow_calls_only_the_agents_it_lists() -> None:
    result, _ = await local_trace(
        team("tests.flows:calls_a_stranger", "analyst", ANALYST, PROFILER), "go"
    )
    assert result.status == RunStatus.FAILED  # type: ignore[attr-defined]
    assert result.error == (  # type: ignore[attr-defined]
        "WorkflowError: flow does not call 'profiler': list it under its delegates"
    )


async def test_the_guard_holds_for_workflow_calls() -> None:
    result, _ = await local_trace(
        team("tests.flows:three_in_a_row", "analyst", ANALYST, extra="limits: {max_depth: 1}"),
        "go",
    )
    assert result.status == RunStatus.FAILED  # type: ignore[attr-defined]
    assert "ended refused" in result.error and "depth" in result.error  # type: ignore[attr-defined]


def test_a_workflow_that_does_not_import_is_a_config_error_at_its_file_and_line(
    tmp_path: Path,
) -> None:
    package = tmp_path / "broken_flows"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "flows.py").write_text("import asyncio\n\nasync def go(flow)\n    pass\n")
    (package / "plain.py").write_text("def go(flow):\n    return 'sync'\n")
    sys.path.insert(0, str(tmp_path))
    try:
        for path, said in [
            ("broken_flows.flows:go", f"SyntaxError at {package / 'flows.py'}:3"),
            ("broken_flows.plain:go", "is not an async function"),
            ("broken_flows.nothere:go", "no module named 'broken_flows.nothere'"),
        ]:
            with pytest.raises(ConfigError) as caught:
                parse_config(team(path, "analyst", ANALYST), "team.yaml")
            assert "agents[0].workflow" in str(caught.value) and said in str(caught.value)
    finally:
        sys.path.remove(str(tmp_path))


LOOP = """
name: loops
agents:
  - name: editor
    workflow:
      loop:
        steps:
          - {{agent: writer, as: draft}}
          - {{agent: critic, task: "Review: {{draft}}"}}
        until: {{field: approved, equals: true}}
        max_iterations: 3
  - name: writer
    description: Writes.
  - name: critic
    description: Reviews.
    output_schema:
      type: object
      properties: {{approved: {{type: boolean, default: {approves}}}}}
      required: [approved]
"""


async def test_a_loop_ends_at_its_verdict_or_at_max_iterations() -> None:
    for approves, rounds in (("true", 1), ("false", 3)):
        result, spans = await local_trace(LOOP.format(approves=approves), "a haiku")
        assert result.status == RunStatus.SUCCEEDED, result.error  # type: ignore[attr-defined]
        critics = spans_named(spans, "execute_tool delegate_to_critic")
        assert sorted(c["attributes"]["baton.workflow.iteration"] for c in critics) == list(
            range(1, rounds + 1)
        )
        drawn = sequence_diagram(spans).text
        plural = "s" if rounds > 1 else ""
        assert f"loop loop: {rounds} iteration{plural}, one after another" in drawn


ROUTE = """
name: routes
agents:
  - name: desk
    workflow:
      route:
        by: "{input.kind}"
        cases: {billing: billing, technical: {agent: support, task: "fix: {task}"}}
        default: general
  - name: billing
    description: Bills.
  - name: support
    description: Fixes.
  - name: general
    description: Everything else.
"""


async def test_a_route_takes_each_branch_and_the_diagram_says_which_and_why() -> None:
    for kind, agent in (("billing", "billing"), ("technical", "support"), ("other", "general")):
        result, spans = await local_trace(ROUTE, "help", given={"kind": kind})
        assert result.status == RunStatus.SUCCEEDED, result.error  # type: ignore[attr-defined]
        [call] = [s for s in spans if s["name"].startswith("execute_tool delegate_to_")]
        assert call["name"] == f"execute_tool delegate_to_{agent}"
        chosen = kind if kind != "other" else "other (default)"
        assert call["attributes"]["baton.workflow.route"] == f"{chosen} by {{input.kind}}"
        assert f"opt route: {chosen} by #123;input.kind#125;" in sequence_diagram(spans).text


def test_a_shape_that_names_an_unknown_agent_or_misses_a_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(ROUTE.replace("default: general", "default: nobody"), "team.yaml")
    assert "agents[0].workflow: a step calls unknown agent 'nobody'" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        parse_config(ROUTE.replace('by: "{input.kind}"', "kind: x"), "team.yaml")
    assert "route" in str(caught.value)


def test_a_shapes_check_function_that_does_not_import_is_a_config_error() -> None:
    broken = LOOP.format(approves="true").replace(
        "until: {field: approved, equals: true}", "until: {check: configs.checks:no_such_check}"
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(broken, "team.yaml")
    said = str(caught.value)
    assert "agents[0].workflow: cannot import configs.checks:no_such_check" in said


FACED = """
agents:
  - name: lead
    description: Asks for a summary.
    delegates: [summarizer]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: summarize, arguments: {task: sum it up}}]}
          - {content: done}
  - name: summarizer
    description: Summarizes.
    tool:
      name: summarize
      description: Summarize a text in one line.
      output: summary
    output_schema:
      type: object
      properties: {summary: {type: string}, words: {type: integer}}
      required: [summary, words]
"""


async def test_an_agent_offered_as_a_tool_has_the_name_description_and_output_its_config_says() -> (
    None
):
    result, spans = await local_trace("tracing: {capture_content: true}\n" + FACED, "go")
    assert result.status == RunStatus.SUCCEEDED, result.error  # type: ignore[attr-defined]
    [call] = spans_named(spans, "execute_tool summarize")
    assert call["attributes"]["baton.delegation.target"] == "summarizer"
    # The caller's model was told the summary field only, not the whole JSON answer.
    said = call["attributes"]["gen_ai.tool.call.result"]
    assert said.startswith("No tool matched") and "words" not in said
    offered = [s["attributes"].get("gen_ai.tool.definitions") for s in spans]
    assert any("Summarize a text in one line." in str(o) for o in offered)
    drawn = sequence_diagram(spans).text
    assert "->>+a4: summarize" in drawn  # (the arrow goes to the summarizer, by its tool name)


def test_a_tool_name_that_collides_with_the_callers_own_tool_is_a_config_error() -> None:
    clash = FACED.replace("name: summarize\n", "name: calculate\n").replace(
        "    delegates: [summarizer]\n",
        "    delegates: [summarizer]\n    tools: [configs.tools:calculate]\n",
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(clash, "team.yaml")
    assert "agents[1].tool.name: tool name 'calculate' collides, for lead, with" in str(
        caught.value
    )
