"""Spending caps stop a run at the bound the docs state: no model call starts once the calls
counted have reached the cap (a run's own dollars, a key's or a tenant's tokens per day), on a
team fast enough that its replies reach the ledger between two calls only if they are sent."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from agents.core.events import Event, ModelFinished, ModelStarted, SpendWarning
from agents.core.limits import SpendCap
from agents.core.messages import RunStatus
from agents.ray.pool import PoolOptions
from orchestrator.engine import Engine, Execution, Submission
from tests.openai_server import FakeOpenAI
from tests.testkit import config

pytestmark = [pytest.mark.ray, pytest.mark.anyio]

TASK = "Research the history of the Ray project, check the facts, and calculate 17 * 23 + 4"

PRICED = """
name: priced
limits: {{cost_budget_usd: 0.000005}}
agents:
  - name: clerk
    description: Calculates with a priced model.
    tools: [configs.tools:calculate]
    model:
      name: openai/gpt-4o-mini
      params: {{api_base: "{url}", api_key: sk-test-not-a-key}}
"""


def _started_past(events: list[tuple[int, Event]], tokens: int) -> list[str]:
    """The model calls that started once the replies counted before them reached `tokens`.

    In the ledger's order (each event's id): a reply is counted as the ledger appends it, and
    a call starts after its check, so a call after a sum at the cap had no business starting.
    """
    counted, late = 0, []
    for _, event in events:
        if isinstance(event, ModelFinished):
            counted += event.tokens
        elif isinstance(event, ModelStarted) and counted >= tokens:
            late.append(f"{event.agent} at {counted} tokens")
    return late


async def test_a_keys_daily_token_cap_stops_a_fast_team_before_its_next_call(
    default_engine: Engine,
) -> None:
    key = f"key:caps-{uuid.uuid4().hex[:8]}"  # a scope of its own in the shared ledger
    cap = SpendCap(scope=f"key:{key}", tokens=600, warn_at=0.8)
    result = await default_engine.run(
        Submission(TASK, submitted_by=key), Execution(uuid.uuid4().hex, caps=(cap,))
    )
    events, _ = await default_engine.ledger.events(result.run_id)
    finished = [e for _, e in events if isinstance(e, ModelFinished)]
    # The whole run spends 1,428 tokens in 7 calls: it is stopped part of the way.
    assert result.status == RunStatus.BUDGET_EXCEEDED, (result.status, result.usage)
    assert f"key {key} today spent" in (result.error or "")
    assert "no model call was made after it" in (result.error or "")
    spent = sum(e.tokens for e in finished)
    assert 600 <= spent < 1428 and len(finished) < 7
    assert _started_past(events, 600) == []
    assert [e.scope for _, e in events if isinstance(e, SpendWarning)] == [f"key:{key}"]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI("calculate", {"expression": "2 ** 10"})
    yield server
    server.close()


@pytest.fixture(scope="module")
def priced(ray_address: str, fake: FakeOpenAI) -> Iterator[Engine]:
    engine = Engine(config(PRICED.format(url=fake.base_url)), PoolOptions(namespace="baton-tests"))
    engine.start()
    yield engine
    engine.stop()


async def test_a_runs_own_dollar_budget_stops_it_before_the_call_past_it(priced: Engine) -> None:
    # gpt-4o-mini's price for the fake's 11 + 7 tokens: $0.00000585 a call, past the run's
    # $0.000005 with the first; the tool call after it is quick.
    result = await priced.run(Submission("calculate 2 ** 10"))
    assert result.status == RunStatus.BUDGET_EXCEEDED, (result.status, result.usage)
    assert "the run spent $0.0000: reached its cap of $5e-06" in (result.error or "")
    assert result.usage.model_calls == 1
    assert result.usage.cost_usd == pytest.approx(5.85e-06)
