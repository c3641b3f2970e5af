"""Which tool calls may run again: idempotent ones retried with the same key, others never."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.core.errors import ConfigError
from tests.testkit import config, local_trace

pytestmark = pytest.mark.anyio

TEAM = """
agents:
  - name: caller
    tools: [{tool}]
    model:
      name: baton/scripted
      params:
        replies:
          - {{tool_calls: [{{name: flaky, arguments: {{path: "{path}"}}}}]}}
          - {{content: finished}}
"""


async def test_an_idempotent_tool_is_retried_with_the_same_idempotency_key(tmp_path: Path) -> None:
    log = tmp_path / "tries"
    tool = "{function: 'tests.testkit:flaky', idempotent: true, retries: 2}"
    _, spans = await local_trace(TEAM.format(tool=tool, path=log), "go")
    keys = log.read_text().splitlines()
    assert len(keys) == 2 and keys[0] == keys[1] == "local-run:call_1_1"
    tool_span = next(s for s in spans if s["name"] == "execute_tool flaky")
    assert tool_span["status"] != "ERROR"  # the retry succeeded


async def test_a_tool_that_is_not_idempotent_is_never_retried(tmp_path: Path) -> None:
    log = tmp_path / "tries"
    _, spans = await local_trace(TEAM.format(tool="tests.testkit:flaky", path=log), "go")
    assert len(log.read_text().splitlines()) == 1
    tool_span = next(s for s in spans if s["name"] == "execute_tool flaky")
    assert tool_span["status"] == "ERROR"
    assert "ConnectionError: the service hiccuped" in tool_span["status_message"]


def test_retries_are_refused_for_a_tool_not_known_to_be_idempotent() -> None:
    with pytest.raises(ConfigError) as declared_not:
        config("""
            agents:
              - name: a
                tools: [{function: "tests.testkit:flaky", idempotent: false, retries: 1}]
        """)
    assert [str(i) for i in declared_not.value.issues] == [
        "test.yaml:4:13: error: agents[0].tools[0]: "
        "retries need an idempotent tool (idempotent: true)"
    ]
    with pytest.raises(ConfigError) as not_declared:
        config("""
            agents:
              - name: a
                tools: [{function: "tests.testkit:flaky", retries: 3}]
        """)
    assert [str(i) for i in not_declared.value.issues] == [
        "test.yaml:4:47: error: agents[0].tools[0].retries: retries need an idempotent tool: "
        "tests.testkit:flaky does not declare itself idempotent; add idempotent: true if it is"
    ]


def test_the_model_never_sees_the_idempotency_key() -> None:
    from agents.tools.base import load_function_tool

    tool = load_function_tool("tests.testkit:flaky")
    assert list(tool.parameters["properties"]) == ["path"]
