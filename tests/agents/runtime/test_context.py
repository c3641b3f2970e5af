"""Context that fits: before each model call, the oldest tool results are dropped, or the oldest
messages summarized (by a model call of its own), to fit the budget; the agent's record keeps
everything. A team in one process (no Ray), real litellm with the built-in models."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from agents.core.messages import RunStatus
from agents.runtime.context import DROPPED
from agents.runtime.hooks import HookContext, Hooks, ModelRequest
from tests.testkit import local_trace

pytestmark = pytest.mark.anyio

LONG = "x" * 2000  # about 500 tokens a result


class Sent(Hooks):
    """Keeps the messages of every model request (after fitting)."""

    requests: ClassVar[list[list[dict[str, Any]]]] = []

    async def before_model(self, ctx: HookContext, request: ModelRequest) -> None:
        self.requests.append(request.messages)


def team(context: str, rules: str = "[]") -> str:
    calls = "\n".join(
        f"              - {{tool_calls: [{{name: stamp, arguments: {{text: {n}{LONG}}}}}]}}"
        for n in "abc"
    )
    return f"""
    agents:
      - name: reader
        tools: [tests.testkit:stamp]
        hooks: [tests.agents.runtime.test_context:Sent]
        context: {context}
        step_rules: {rules}
        model:
          name: baton/scripted
          params:
            replies:
{calls}
              - {{content: done}}
    """


def events(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["attributes"] for s in spans for e in s["events"] if e["name"] == "context_fitted"]


async def test_the_oldest_tool_results_are_dropped_to_fit_and_the_record_keeps_them() -> None:
    Sent.requests.clear()
    result, spans = await local_trace(
        team("{max_tokens: 1200, strategy: drop_oldest_tool_results, keep_last: 2}"), "read"
    )
    assert result.status == RunStatus.SUCCEEDED, result.error  # type: ignore[attr-defined]
    last = Sent.requests[-1]
    tools = [m["content"] for m in last if m["role"] == "tool"]
    assert tools[:2] == [DROPPED, DROPPED] and tools[2].startswith("c" + LONG)
    assert Sent.requests[0] == [{"role": "user", "content": "read"}]  # nothing to drop yet
    fitted = events(spans)
    assert fitted and all(e["dropped_tool_results"] >= 1 for e in fitted)
    assert fitted[-1]["tokens"] <= 1200


async def test_the_oldest_messages_are_summarized_by_a_model_call_of_its_own() -> None:
    Sent.requests.clear()
    # (The scripted model picks its reply by the assistant turns it sees, fewer once they are
    # summarized: a step rule gives the last step a model that answers.)
    answers = "{name: baton/scripted, params: {replies: [{content: done}]}}"
    done = f"{{when: {{step: 4}}, use: {{model: {answers}}}}}"
    result, spans = await local_trace(
        team(
            "{max_tokens: 1200, strategy: summarize, keep_last: 2, model: baton/offline}",
            f"[{done}]",
        ),
        "read",
    )
    assert result.status == RunStatus.SUCCEEDED, result.error  # type: ignore[attr-defined]
    last = Sent.requests[-1]
    assert last[0] == {"role": "user", "content": "read"}  # the task stays
    assert last[1]["content"].startswith("Summary of the conversation so far")
    assert last[-1]["role"] == "tool" and last[-1]["content"].startswith("c" + LONG)
    # Each summary is a chat span of its own, counted in the usage.
    summaries = [s for s in spans if s["name"] == "chat offline"]
    assert summaries and result.usage.model_calls == 4 + len(summaries)  # type: ignore[attr-defined]
    assert all(e["summarized_messages"] >= 2 for e in events(spans))
