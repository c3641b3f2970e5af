"""Streaming from an OpenAI-compatible server over real HTTP (ours, on 127.0.0.1): text as it
comes, tool calls sent in pieces joined by litellm, exact token counts, and a stream that
breaks off failing the call cleanly."""

from __future__ import annotations

import time
from typing import Any

import pytest

from agents.core.events import ModelDelta, ModelFinished
from agents.core.messages import AgentResult, Delegation, RunContext, RunStatus
from agents.core.spec import AgentSpec, ModelSpec
from agents.models.client import LiteLLMClient
from agents.runtime.agent import AgentRuntime
from agents.tools.base import load_function_tool
from tests.openai_server import FakeOpenAI
from tests.testkit import EventList

pytestmark = pytest.mark.anyio


async def streamed(fake: FakeOpenAI) -> tuple[AgentResult, list[Any]]:
    model = ModelSpec(
        name="openai/gpt-4o-mini", params={"api_base": fake.base_url, "api_key": "sk-test"}
    )
    events = EventList()
    runtime = AgentRuntime(
        AgentSpec(name="a"),
        LiteLLMClient(model),
        [load_function_tool("tests.testkit:stamp")],
        events=events,
    )
    ctx = RunContext(run_id="r", chain=("a",), deadline=time.time() + 30, stream=True)
    result = await runtime.invoke(Delegation(task="stamp it", context=ctx))
    return result, events.events


async def test_a_streamed_reply_over_http_joins_tool_calls_and_counts_tokens_exactly() -> None:
    fake = FakeOpenAI("stamp", {"text": "a tool argument long enough to be cut in three"})
    try:
        result, events = await streamed(fake)
    finally:
        fake.close()
    assert result.status == RunStatus.SUCCEEDED, result.error
    # The tool got its arguments whole, though they came in three pieces.
    assert result.output is not None
    assert result.output.startswith("The tool said a tool argument long enough to be cut in three")
    assert [r["body"]["stream"] for r in fake.requests] == [True, True]
    assert all(r["body"]["stream_options"] == {"include_usage": True} for r in fake.requests)
    # Usage came in the last chunk only: 11 in, 7 out per call, as the server said.
    assert (result.usage.input_tokens, result.usage.output_tokens) == (22, 14)
    assert [(e.input_tokens, e.output_tokens) for e in events if isinstance(e, ModelFinished)] == [
        (11, 7),
        (11, 7),
    ]
    assert result.usage.cost_usd > 0  # priced from the rebuilt reply
    deltas = [e for e in events if isinstance(e, ModelDelta)]
    assert "".join(d.text for d in deltas) == result.output
    assert {d.step for d in deltas} == {2}  # the tool-call step wrote no text


async def test_a_stream_that_breaks_off_fails_the_call_with_the_cause_and_nothing_hangs() -> None:
    fake = FakeOpenAI("stamp", {"text": "now"}, cut_stream_after=2)
    began = time.monotonic()
    try:
        result, _ = await streamed(fake)
    finally:
        fake.close()
    assert result.status == RunStatus.FAILED
    assert result.error is not None and result.error.startswith("model call failed: ")
    assert "Response payload is not completed" in result.error  # the cause, from the transport
    assert time.monotonic() - began < 20
