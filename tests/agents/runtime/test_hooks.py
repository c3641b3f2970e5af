"""Hooks (Python, by import path) and step rules (YAML): they observe, change the model request,
veto a tool call, replace a result or end the invocation; a hook that raises fails it visibly.
A team in one process (no Ray), real litellm with the built-in models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agents.core.events import Steered
from agents.core.messages import RunStatus
from agents.runtime.hooks import HookContext, Hooks, ModelRequest, Stop, Veto
from tests.testkit import EventList, local_trace
from tracing.sequence import sequence_diagram

pytestmark = pytest.mark.anyio

SUPPORT = Path("configs/support.yaml")


class Audit(Hooks):
    """Records what it sees; vetoes `stamp`; makes `calculate`'s result shout."""

    seen: ClassVar[list[tuple[str, Any]]] = []

    async def on_start(self, ctx: HookContext, task: str) -> None:
        self.seen.append(("start", task))

    async def before_model(self, ctx: HookContext, request: ModelRequest) -> None:
        self.seen.append(("model", (ctx.step, request.model, request.messages[0]["content"])))

    async def before_tool(
        self, ctx: HookContext, tool: str, arguments: dict[str, Any]
    ) -> Veto | None:
        self.seen.append(("tool", (tool, arguments)))
        return Veto("stamping is not allowed today") if tool == "stamp" else None

    def after_tool(self, ctx: HookContext, tool: str, result: str) -> str:  # sync works too
        return f"{result.upper()} (audited)"

    async def on_end(self, ctx: HookContext, result: Any) -> None:
        self.seen.append(("end", result.status))


class Gatekeeper(Hooks):
    async def on_start(self, ctx: HookContext, task: str) -> Stop | None:
        return Stop("closed on Sundays") if "sunday" in task.lower() else None


class Broken(Hooks):
    async def before_model(self, ctx: HookContext, request: ModelRequest) -> None:
        raise ValueError("no model today")


HOOKED = """
agents:
  - name: clerk
    instructions: Be brief.
    hooks: [tests.agents.runtime.test_hooks:Audit, tests.agents.runtime.test_hooks:Gatekeeper]
    tools: [configs.tools:calculate, tests.testkit:stamp]
    model:
      name: baton/scripted
      params:
        replies:
          - tool_calls:
              - {name: calculate, arguments: {expression: "6 * 7"}}
              - {name: stamp, arguments: {text: now}}
          - {content: done}
  - name: broken
    hooks: [tests.agents.runtime.test_hooks:Broken]
"""


async def test_hooks_observe_veto_tool_calls_and_change_their_results() -> None:
    Audit.seen.clear()
    events = EventList()
    result, spans = await local_trace(HOOKED, "work please", entry="clerk", events=events)
    assert result.status == RunStatus.SUCCEEDED, result.error  # type: ignore[attr-defined]
    kinds = [kind for kind, _ in Audit.seen]
    assert kinds == ["start", "model", "tool", "tool", "model", "end"]
    assert Audit.seen[1][1] == (1, "baton/scripted", "Be brief.")
    assert ("tool", ("calculate", {"expression": "6 * 7"})) in Audit.seen
    tools = {s["name"]: s for s in spans if s["name"].startswith("execute_tool")}
    assert tools["execute_tool stamp"]["status_message"] == (
        "error: vetoed by Audit: stamping is not allowed today"
    )
    vetoes = [e for e in tools["execute_tool stamp"]["events"] if e["name"] == "hook_veto"]
    assert vetoes[0]["attributes"]["reason"] == "stamping is not allowed today"
    # Each change a hook made is an event of the run too: a veto, a replaced result.
    steered = [(e.by, e.change) for e in events.events if isinstance(e, Steered)]
    assert ("Audit", "vetoed stamp: stamping is not allowed today") in steered
    assert any(change.startswith("replaced the result of calculate") for _, change in steered)


async def test_a_hook_can_end_an_invocation_and_one_that_raises_fails_it_visibly() -> None:
    stopped, _ = await local_trace(HOOKED, "work on sunday", entry="clerk")
    assert stopped.status == RunStatus.FAILED  # type: ignore[attr-defined]
    assert stopped.error == "stopped by hook Gatekeeper.on_start: closed on Sundays"  # type: ignore[attr-defined]
    assert stopped.usage.model_calls == 0  # type: ignore[attr-defined]
    broken, _ = await local_trace(HOOKED, "anything", entry="broken")
    assert broken.status == RunStatus.FAILED  # type: ignore[attr-defined]
    assert broken.error == (  # type: ignore[attr-defined]
        "hook tests.agents.runtime.test_hooks:Broken.before_model raised ValueError: no model today"
    )


async def test_step_rules_force_a_tool_add_an_instruction_and_switch_the_model() -> None:
    team = """
    agents:
      - name: analyst
        tools: [configs.tools:calculate, tests.testkit:stamp]
        hooks: [tests.agents.runtime.test_hooks:Audit]
        step_rules:
          - when: {step: 1}
            use: {force_tool: stamp}
          - when: {after_tool: stamp}
            use:
              instruction: Now answer in one line.
              model:
                name: baton/scripted
                params: {replies: [{content: "one line"}], repeat_last: true}
    """
    Audit.seen.clear()
    result, spans = await local_trace(team, "hello there")
    # The offline model would have answered at once ("hello" names no tool): it was made to
    # call stamp (vetoed by the hook, but called), then the second rule switched model.
    assert result.output == "one line"  # type: ignore[attr-defined]
    models = [seen for kind, seen in Audit.seen if kind == "model"]
    assert models[0][:2] == (1, "baton/offline")
    assert models[1] == (2, "baton/scripted", "Now answer in one line.")
    assert ("tool", ("stamp", {"text": "hello there"})) in Audit.seen
    chats = [s["name"] for s in spans if s["name"].startswith("chat ")]
    assert chats == ["chat offline", "chat scripted"]
    [agent] = [s for s in spans if s["name"] == "invoke_agent analyst"]
    applied = [e["attributes"] for e in agent["events"] if e["name"] == "step_rules"]
    assert applied == [{"step": 1, "rules": [0]}, {"step": 2, "rules": [1]}]
    # What they changed is said, and drawn where it happened: a reader sees why.
    drawn = sequence_diagram(spans, detail="full").text
    assert "Note over a3: ↪ step rules #35;1 forced stamp on the next model call" in drawn
    assert "↪ step rules #35;2 switched the model to baton/scripted, changed the messages" in drawn
    assert "↪ Audit vetoed stamp: stamping is not allowed today" in drawn


async def test_the_support_example_runs_offline_and_hands_a_refund_over_to_billing() -> None:
    team = SUPPORT.read_text()  # noqa: ASYNC240 (a small local file)
    result, _ = await local_trace(team, "I want a refund for my invoice")
    assert result.status == RunStatus.SUCCEEDED, result.error  # type: ignore[attr-defined]
    took_over = [c for c in result.children if c.agent == "billing"]  # type: ignore[attr-defined]
    assert took_over and result.output == took_over[0].output  # type: ignore[attr-defined]
    refused, _ = await local_trace(team, "my card is 4111111111111111, refund it")
    assert refused.status == RunStatus.GUARDRAIL_TRIPPED  # type: ignore[attr-defined]
    assert "card numbers are not taken here" in refused.error  # type: ignore[attr-defined]
    checked, _ = await local_trace(
        team, "check the claim that refunds take a week", entry="checker"
    )
    assert checked.status == RunStatus.SUCCEEDED  # type: ignore[attr-defined]
    assert json.loads(checked.output)["verdict"] in ("true", "false", "unknown")  # type: ignore[attr-defined]


class Tripwire(Hooks):
    async def before_tool(self, ctx: HookContext, tool: str, arguments: dict[str, Any]) -> Stop:
        return Stop(f"{tool} is off limits", run=True)


async def test_a_hook_deep_in_the_tree_can_end_the_whole_run() -> None:
    team = """
    agents:
      - name: boss
        delegates: [worker]
      - name: worker
        description: Calculates.
        capabilities: [calculate]
        tools: [configs.tools:calculate]
        hooks: [tests.agents.runtime.test_hooks:Tripwire]
    """
    result, _ = await local_trace(team, "calculate 1 + 1")
    # The worker's hook ended the run: the boss ended with it instead of answering.
    assert result.status == RunStatus.FAILED  # type: ignore[attr-defined]
    assert result.error == "stopped the run Tripwire.before_tool: calculate is off limits"  # type: ignore[attr-defined]
    assert result.stops_run and result.usage.model_calls == 1  # type: ignore[attr-defined]
