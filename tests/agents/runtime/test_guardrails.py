"""Guardrails: on an agent's input and output (a regex, a Python callable, a judging model), on
tool calls (reject the arguments, redact the result), per agent and for the whole system. A team
in one process (no Ray), real litellm with the built-in models."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from agents.core.errors import ConfigError
from agents.core.messages import RunStatus
from orchestrator.system.config import parse_config
from tests.testkit import local_trace

pytestmark = pytest.mark.anyio


def no_digits(text: str) -> str | None:
    """A guardrail function: trips on any digit."""
    return "the answer has digits" if any(c.isdigit() for c in text) else None


def events(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e["attributes"] for s in spans for e in s.get("events", []) if e["name"] == name]


async def test_an_input_guardrail_ends_the_invocation_before_any_model_call() -> None:
    team = """
    agents:
      - name: desk
        guardrails:
          input: [{name: no-passwords, regex: "(?i)password"}]
    """
    result, spans = await local_trace(team, "what is the admin PASSWORD?")
    assert result.status == RunStatus.GUARDRAIL_TRIPPED  # type: ignore[attr-defined]
    assert result.error == (  # type: ignore[attr-defined]
        "guardrail no-passwords tripped on the input: the text matched its pattern"
    )
    assert result.usage.model_calls == 0  # type: ignore[attr-defined]
    [tripped] = events(spans, "guardrail_tripped")
    assert tripped["baton.guardrail.name"] == "no-passwords"
    assert tripped["baton.guardrail.stage"] == "input"
    [agent] = [s for s in spans if s["name"] == "invoke_agent desk"]
    assert agent["status"] == "ERROR" and agent["attributes"]["error.type"] == "guardrail_tripped"


async def test_output_guardrails_check_the_final_answer_by_function_and_by_judge() -> None:
    team = """
    agents:
      - name: counter
        tools: [configs.tools:calculate]
        guardrails:
          output: [{function: "tests.agents.runtime.test_guardrails:no_digits"}]
      - name: polite
        model: {name: baton/scripted, params: {replies: [{content: "Go away."}]}}
        guardrails:
          output:
            - judge:
                model: {name: baton/scripted, params: {replies: [{content: "FAIL: rude"}]}}
                instructions: Is the text polite?
    """
    counted, _ = await local_trace(team, "calculate 6 * 7", entry="counter")
    assert counted.status == RunStatus.GUARDRAIL_TRIPPED  # type: ignore[attr-defined]
    assert counted.error.endswith(  # type: ignore[attr-defined]
        "no_digits tripped on the output: the answer has digits"
    )
    judged, spans = await local_trace(team, "say hello", entry="polite")
    assert judged.status == RunStatus.GUARDRAIL_TRIPPED  # type: ignore[attr-defined]
    assert judged.error == "guardrail judge tripped on the output: rude"  # type: ignore[attr-defined]
    # The judge's call is a model call of its own: a span, and tokens in the usage.
    assert [s["name"] for s in spans].count("chat scripted") == 2
    assert judged.usage.model_calls == 2  # type: ignore[attr-defined]


async def test_tool_guardrails_reject_arguments_and_redact_results() -> None:
    team = """
    tracing: {capture_content: true}
    agents:
      - name: clerk
        tools: [configs.tools:calculate, tests.testkit:stamp]
        model:
          name: baton/scripted
          params:
            replies:
              - tool_calls:
                  - {name: calculate, arguments: {expression: "10 ** 100"}}
                  - {name: stamp, arguments: {text: "card 4111111111111111"}}
              - {content: done}
        guardrails:
          tools:
            - {name: no-powers, tool: calculate, regex: "\\\\*\\\\*", message: no powers}
            - {tool: "*", check: result, action: redact, regex: "\\\\d{16}"}
    """
    result, spans = await local_trace(team, "go")
    assert result.status == RunStatus.SUCCEEDED  # type: ignore[attr-defined]
    tools = {s["name"]: s for s in spans if s["name"].startswith("execute_tool")}
    calc = tools["execute_tool calculate"]
    assert calc["status"] == "ERROR"
    assert calc["status_message"].startswith(
        "error: guardrail no-powers tripped on the arguments of calculate: no powers"
    )
    [tripped] = events(spans, "guardrail_tripped")
    assert tripped["baton.guardrail.stage"] == "arguments of calculate"
    stamped = tools["execute_tool stamp"]
    assert stamped["status"] != "ERROR"
    # The model (and the trace) saw the result with the number replaced.
    assert stamped["attributes"]["gen_ai.tool.call.result"].startswith("card [REDACTED] at ")


async def test_system_guardrails_guard_every_agent_and_a_caller_sees_the_trip() -> None:
    team = """
    guardrails:
      output: [{name: no-leaks, regex: "(?i)confidential", message: leaks a secret}]
    agents:
      - name: boss
        delegates: [vault]
      - name: vault
        description: Keeps files.
        capabilities: [files]
        model: {name: baton/scripted, params: {replies: [{content: "CONFIDENTIAL plans"}]}}
    """
    result, _ = await local_trace(team, "open the files")
    [vault] = result.children  # type: ignore[attr-defined]
    assert vault.status == RunStatus.GUARDRAIL_TRIPPED
    assert vault.error == "guardrail no-leaks tripped on the output: leaks a secret"
    assert "guardrail_tripped" in result.output  # type: ignore[attr-defined]


def test_a_guardrail_is_one_kind_and_its_function_must_import() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(
            textwrap.dedent("""
            guardrails:
              input: [{regex: x, function: "a.b:c"}]
            agents:
              - name: a
                guardrails:
                  output: [{function: "no.such.module:check"}]
                  tools: [{tool: t, function: "x:y", action: redact}]
            """),
            "team.yaml",
        )
    errors = [str(i) for i in info.value.issues]
    assert any("give exactly one of regex, function or judge" in e for e in errors)
    assert any("action redact needs a regex" in e for e in errors)
