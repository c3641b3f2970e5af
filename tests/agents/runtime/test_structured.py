"""Structured output: answers validated against an agent's `output_schema`, sent back with the
error until they match (bounded), asked for natively or in the prompt. No Ray: real litellm
with the built-in models, a team in one process."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from pydantic import BaseModel

from agents.core.limits import Limits
from agents.core.messages import Delegation, RunContext, RunStatus
from agents.core.spec import AgentSpec, ModelSpec
from agents.runtime.agent import AgentRuntime
from tests.recording import RecordingClient
from tests.testkit import local_trace

pytestmark = pytest.mark.anyio

VERDICT = {
    "type": "object",
    "properties": {"verdict": {"enum": ["true", "false"]}, "confidence": {"type": "number"}},
    "required": ["verdict", "confidence"],
    "additionalProperties": False,
}


class Verdict(BaseModel):
    """A fact check's outcome (a pydantic model named by import path)."""

    verdict: bool
    sources: list[str] = []


async def answer(*replies: str, **spec: Any) -> tuple[Any, RecordingClient]:
    client = RecordingClient(
        ModelSpec(name="baton/scripted", params={"replies": [{"content": r} for r in replies]})
    )
    lim = Limits()
    ctx = RunContext(run_id="r", chain=("a",), deadline=time.time() + 30, limits=lim)
    runtime = AgentRuntime(AgentSpec(name="a", **spec), client)
    return await runtime.invoke(Delegation(task="is it true?", context=ctx)), client


async def test_an_answer_that_does_not_match_is_sent_back_with_the_error_until_it_does() -> None:
    result, client = await answer(
        "It is true.",
        '```json\n{"verdict": "yes", "confidence": 0.9}\n```',
        '```json\n{"verdict": "true", "confidence": 0.9}\n```',
        output_schema=VERDICT,
    )
    assert result.status == RunStatus.SUCCEEDED, result.error
    assert json.loads(result.output) == {"verdict": "true", "confidence": 0.9}
    assert result.steps == 3 and result.usage.model_calls == 3
    told = [m["content"] for m in client.seen[-1] if m["role"] == "user"][1:]
    assert told[0].startswith("Your answer does not match the required JSON Schema: the answer")
    assert "is not JSON" in told[0]
    assert "verdict: 'yes' is not one of ['true', 'false']" in told[1]
    # Asked natively (the built-in models take a schema), and reminded in the instructions.
    assert client.formats[0] == {
        "type": "json_schema",
        "json_schema": {"name": "a_output", "schema": VERDICT},
    }
    assert '"required":["verdict","confidence"]' in client.seen[0][0]["content"]


async def test_after_its_retries_an_agent_that_never_matches_fails_with_the_last_error() -> None:
    result, client = await answer("no", "still no", output_schema=VERDICT, output_retries=1)
    assert result.status == RunStatus.FAILED
    assert result.error == (
        "the answer did not match the output schema after 2 tries: the answer is not JSON "
        "(Expecting value: line 1 column 1 (char 0))"
    )
    assert len(client.seen) == 2


async def test_a_pydantic_model_by_import_path_validates_and_normalizes_the_answer() -> None:
    path = "tests.agents.runtime.test_structured:Verdict"
    result, client = await answer(
        '{"verdict": "maybe"}', '{"verdict": "true"}', output_schema=path, output_mode="prompt"
    )
    assert result.status == RunStatus.SUCCEEDED, result.error
    assert json.loads(result.output) == {"verdict": True, "sources": []}  # the model's dump
    assert "verdict: Input should be a valid boolean" in client.seen[1][-1]["content"]
    # Prompt mode: the schema is in the instructions only.
    assert client.formats[0] is None
    assert "JSON Schema" in client.seen[0][0]["content"]


async def test_a_delegating_agent_gets_the_sub_agents_structured_answer_as_its_tool_result() -> (
    None
):
    team = f"""
    agents:
      - name: boss
        description: Asks the checker.
        delegates: [checker]
      - name: checker
        description: Checks facts.
        capabilities: [check, facts]
        output_schema: {json.dumps(VERDICT)}
    """
    result, _ = await local_trace(team, "check the facts")
    checker = result.children[0]  # type: ignore[attr-defined]
    assert checker.status == RunStatus.SUCCEEDED, checker.error
    shaped = json.loads(checker.output)  # the offline model answers in the shape asked for
    assert set(shaped) == {"verdict", "confidence"} and shaped["verdict"] == "true"
    assert f"- checker: {checker.output}" in result.output  # type: ignore[attr-defined]
