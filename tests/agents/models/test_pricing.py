"""Cost: known where litellm has a price, free for the built-in models, unknown (not zero)
otherwise. litellm talks to an OpenAI-compatible server of ours on 127.0.0.1."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from agents.core.messages import Delegation, RunContext, Usage
from agents.core.spec import AgentSpec, ModelSpec
from agents.models.client import LiteLLMClient
from agents.runtime.agent import AgentRuntime
from agents.tools.base import load_function_tool
from orchestrator.cli.report import _money
from tests.openai_server import FakeOpenAI

pytestmark = pytest.mark.anyio


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI("stamp", {"text": "now"})
    yield server
    server.close()


async def usage_of(model: str, fake: FakeOpenAI | None) -> Usage:
    params = {"api_base": fake.base_url, "api_key": "sk-test-not-a-key"} if fake else {}
    runtime = AgentRuntime(
        AgentSpec(name="a"),
        LiteLLMClient(ModelSpec(name=model, params=params)),
        [load_function_tool("tests.testkit:stamp")],
    )
    ctx = RunContext(run_id="r", chain=("a",), deadline=time.time() + 30)
    result = await runtime.invoke(Delegation(task="stamp the time", context=ctx))
    assert result.status == "succeeded", result.error
    return result.usage


async def test_a_model_without_a_price_has_an_unknown_cost_not_a_zero(fake: FakeOpenAI) -> None:
    unknown = await usage_of("openai/baton-model-with-no-price", fake)
    assert (unknown.model_calls, unknown.unpriced_calls, unknown.cost_usd) == (2, 2, 0.0)
    assert _money(unknown) == "\N{EN DASH}"
    priced = await usage_of("openai/gpt-4o-mini", fake)
    assert priced.unpriced_calls == 0 and priced.cost_usd > 0
    assert _money(priced + unknown).startswith("≥ $")
    free = await usage_of("baton/offline", None)
    assert free.unpriced_calls == 0 and _money(free) == "$0.0000"
