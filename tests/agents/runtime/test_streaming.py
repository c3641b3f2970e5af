"""Streamed model output: `model_delta` events, coalesced, whole, redacted; replies intact.

No Ray: the tool loop with real litellm streaming from the built-in scripted model.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from agents.core.events import ModelDelta, ModelFinished
from agents.core.limits import Limits
from agents.core.messages import Delegation, RunContext, RunStatus
from agents.core.spec import AgentSpec, ModelSpec
from agents.models.client import LiteLLMClient
from agents.runtime.agent import AgentRuntime
from agents.runtime.deltas import DELTA_EVERY_S, Deltas
from agents.tools.base import load_function_tool
from tests.testkit import EventList
from tracing import Redactor

pytestmark = pytest.mark.anyio

ANSWER = " ".join(f"word{i}" for i in range(60))


def delegation(stream: bool) -> Delegation:
    ctx = RunContext(run_id="r", chain=("a",), deadline=time.time() + 30, limits=Limits())
    return Delegation(task="go", context=ctx.model_copy(update={"stream": stream}))


async def run(stream: bool, *replies: dict[str, Any], **params: Any) -> tuple[Any, list[Any]]:
    client = LiteLLMClient(ModelSpec(name="baton/scripted", params={"replies": replies, **params}))
    events = EventList()
    runtime = AgentRuntime(
        AgentSpec(name="a"),
        client,
        [load_function_tool("tests.testkit:stamp")],
        events=events,
    )
    result = await runtime.invoke(delegation(stream))
    assert result.status == RunStatus.SUCCEEDED, result.error
    return result, events.events


async def test_streamed_text_arrives_in_coalesced_deltas_that_add_up_to_the_answer() -> None:
    # 60 words, 4 ms apart: about 240 ms of streaming, so a handful of deltas, not 60.
    result, events = await run(True, {"content": ANSWER}, chunk_ms=4)
    deltas = [e for e in events if isinstance(e, ModelDelta)]
    assert "".join(d.text for d in deltas) == ANSWER == result.output
    assert 2 <= len(deltas) <= 12, [d.text for d in deltas]
    # At most one per 50 ms, but for the rest of the message sent at its end.
    gaps = [b.ts - a.ts for a, b in itertools.pairwise(deltas[:-1])]
    assert all(gap >= DELTA_EVERY_S * 0.9 for gap in gaps), gaps
    # Each belongs to the invocation and to the model call's span, and takes no event number.
    finished = next(e for e in events if isinstance(e, ModelFinished))
    assert {(d.invocation, d.span_id, d.step, d.seq) for d in deltas} == {
        (finished.invocation, finished.span_id, 1, 0)
    }
    assert [e.seq for e in events if e.stored] == list(range(1, len(events) - len(deltas) + 1))


async def test_a_streamed_run_reports_the_same_tokens_and_tool_calls_as_an_unstreamed_one() -> None:
    script = (
        {"tool_calls": [{"name": "stamp", "arguments": {"text": "a long enough argument"}}]},
        {"content": ANSWER},
    )
    plain, plain_events = await run(False, *script)
    streamed, streamed_events = await run(True, *script)
    assert not any(isinstance(e, ModelDelta) for e in plain_events)
    # The tool call came in pieces and was joined: the tool got its arguments whole.
    assert streamed.output == plain.output
    assert streamed.usage == plain.usage, (streamed.usage, plain.usage)
    assert streamed.usage.output_tokens > 0

    def tokens(events: list[Any]) -> list[tuple[int, int, int]]:
        return [
            (e.input_tokens, e.output_tokens, e.tool_calls)
            for e in events
            if isinstance(e, ModelFinished)
        ]

    assert tokens(streamed_events) == tokens(plain_events)


async def test_a_secret_is_never_split_across_deltas_where_the_redactor_cannot_see_it() -> None:
    # A provider may cut a word anywhere; deltas go out as soon as they may (every_s=0).
    secret = "hunter2-the-long-password"
    redactor = Redactor([secret])
    sent: list[str] = []
    deltas = Deltas(lambda text: sent.append(redactor.text(text)), every_s=0)
    for piece in ("the key is hun", "ter2-the-lo", "ng-password and", " nothing else"):
        deltas.add(piece)
    deltas.close()
    assert "".join(sent) == "the key is [REDACTED] and nothing else"
    assert len(sent) >= 3  # it did stream: whole words went out as they were complete
