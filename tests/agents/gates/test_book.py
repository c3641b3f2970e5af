"""Provider gates in one process: the book's limits, and a gated model against an
OpenAI-compatible server of ours on 127.0.0.1 that counts what it receives (limits held,
`Retry-After` honoured, fallbacks used), as the trace and the diagram show it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agents.core.gate_spec import GateSpec
from agents.core.messages import RunStatus
from agents.gates.book import GateBook
from tests.openai_server import FakeOpenAI
from tests.testkit import EventList, local_trace
from tracing import attributes as attr
from tracing.sequence import sequence_diagram

pytestmark = pytest.mark.anyio


def test_a_gate_lets_through_its_requests_tokens_and_calls_at_once_per_window() -> None:
    book = GateBook()
    book.declare((GateSpec(models=("p/*",), requests=3, tokens=100, per_s=10, concurrency=2),))
    a, b = book.take("p/*", 10, 60, now=0.0), book.take("p/*", 10, 60, now=1.0)
    assert a.lease and b.lease
    held = book.take("p/*", 10, 60, now=2.0)  # two calls under way: the third waits for one
    assert held.lease is None and held.why == "2 calls at once"
    book.release(a.lease, 70, now=2.0)  # its reply used 70 tokens, not the 10 estimated
    # 70 + 10 + 30 > 100: until `a` leaves the window, `per_s` after it ended.
    over = book.take("p/*", 30, 60, now=2.0)
    assert over.lease is None and over.wait_s == pytest.approx(10.0)
    assert over.why == "100 tokens per 10 s"
    c = book.take("p/*", 20, 60, now=2.0)
    assert c.lease is not None  # 100 exactly
    book.release(b.lease, None, now=3.0)
    fourth = book.take("p/*", 0, 60, now=3.0)  # three calls counted in the window already
    assert fourth.why == "3 requests per 10 s" and fourth.wait_s == pytest.approx(9.0)
    d = book.take("p/*", 1, 60, now=12.5)
    assert d.lease is not None  # `a` left at 12
    book.release(c.lease, 20, now=13.0)
    book.release(d.lease, 1, now=13.0)
    # A provider's Retry-After pauses the gate whatever its counts.
    book.pause("p/*", 5, "Retry-After 5s", now=30.0)
    paused = book.take("p/*", 1, 60, now=31.0)
    assert paused.why == "Retry-After 5s" and paused.wait_s == pytest.approx(4.0)
    assert book.take("p/*", 1, 60, now=35.0).lease is not None
    # A second declaration (another system) makes it stricter, never looser.
    book.declare((GateSpec(models=("p/*",), requests=10, concurrency=1),))
    assert book.specs[0].requests == 3 and book.specs[0].concurrency == 1


def test_a_lease_never_given_back_frees_its_place_after_the_calls_timeout() -> None:
    book = GateBook()
    book.declare((GateSpec(models=("p",), concurrency=1),))
    assert book.take("p", 1, hold_s=5, now=0.0).lease  # its process died mid-call
    assert book.take("p", 1, hold_s=5, now=4.0).lease is None
    assert book.take("p", 1, hold_s=5, now=5.0).lease is not None


def _team(primary: FakeOpenAI, fallback: FakeOpenAI | None, gate: str) -> str:
    fallbacks = ""
    if fallback is not None:
        fallbacks = f"""
      fallbacks:
        - {{name: openai/backup, params: {{api_base: "{fallback.base_url}", api_key: sk-none}}}}"""
    return f"""
name: gated
gates:
  - {gate}
agents:
  - name: stamper
    tools: [tests.testkit:stamp]
    model:
      name: openai/primary
      params: {{api_base: "{primary.base_url}", api_key: sk-none}}{fallbacks}
"""


@pytest.fixture
def servers() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    primary, backup = FakeOpenAI("stamp", {"text": "now"}), FakeOpenAI("stamp", {"text": "now"})
    yield primary, backup
    primary.close()
    backup.close()


async def test_a_provider_retry_after_pauses_the_gate_and_the_call_is_asked_again(
    servers: tuple[FakeOpenAI, FakeOpenAI],
) -> None:
    primary, _ = servers
    primary.busy_first, primary.retry_after = 1, 1.0
    team = _team(primary, None, "{models: [openai/primary], requests: 50, retries: 2}")
    result, spans = await local_trace(team, "stamp it")
    assert result.status == RunStatus.SUCCEEDED, result.error
    refused, *asked = primary.arrivals
    assert len(asked) == 2 and asked[0] - refused >= 1.0  # not before its Retry-After
    [chat, _] = [s for s in spans if s["name"].startswith("chat")]
    [retry] = chat["events"]
    assert retry["name"] == attr.EVENT_MODEL_RETRY and retry["attributes"]["delay_s"] == 1.0
    # The second call of the run found the gate open: no wait span.
    waits = [s for s in spans if s["name"] == attr.GATE_WAIT_SPAN]
    assert [w["attributes"][attr.BATON_GATE_REASON] for w in waits] == [
        "openai/primary: Retry-After 1s"
    ]


async def test_a_gate_holds_calls_to_its_window_and_a_wait_is_a_span_and_a_note(
    servers: tuple[FakeOpenAI, FakeOpenAI],
) -> None:
    primary, _ = servers
    team = _team(primary, None, "{name: slow, models: ['openai/*'], requests: 1, per_s: 0.6}")
    events = EventList()
    result, spans = await local_trace(team, "stamp", events=events)
    assert result.status == RunStatus.SUCCEEDED, result.error
    first, second = primary.arrivals
    assert second - first >= 0.6  # the first counts until 0.6 s after it ended
    [wait] = [s for s in spans if s["name"] == attr.GATE_WAIT_SPAN]
    assert wait["attributes"][attr.BATON_GATE] == "slow"
    assert wait["attributes"][attr.BATON_GATE_WAITED] >= 0.5
    finished = [e for e in events.events if e.type == "model_finished"]
    assert finished[1].gate_wait_s >= 0.5 and finished[0].gate_wait_s == 0
    diagram = sequence_diagram(spans, detail="full").text
    assert "◴ gate slow waited 0." in diagram and "1 requests per 0.6 s" in diagram


async def test_a_model_that_stays_busy_falls_back_to_the_next_one(
    servers: tuple[FakeOpenAI, FakeOpenAI],
) -> None:
    primary, backup = servers
    primary.busy_always = True
    gate = "{models: [openai/primary], requests: 100, retries: 1, backoff_s: 0.05}"
    events = EventList()
    team = _team(primary, backup, gate)
    result, spans = await local_trace(team, "stamp", events=events)
    assert result.status == RunStatus.SUCCEEDED, result.error
    assert len(primary.arrivals) == 4 and len(backup.arrivals) == 2  # 2 tries each call
    finished = [e for e in events.events if e.type == "model_finished"]
    assert {(e.model, e.answered_by) for e in finished} == {("openai/primary", "openai/backup")}
    chats = [s for s in spans if s["name"].startswith("chat")]
    assert {c["attributes"][attr.BATON_MODEL_USED] for c in chats} == {"openai/backup"}
    fallback = [e for c in chats for e in c["events"] if e["name"] == attr.EVENT_MODEL_FALLBACK]
    assert len(fallback) == 2 and "RateLimitError" in fallback[0]["attributes"]["reason"]
    assert "↪ openai/primary → openai/backup" in sequence_diagram(spans, detail="full").text


async def test_every_model_busy_fails_the_call_saying_what_each_one_said(
    servers: tuple[FakeOpenAI, FakeOpenAI],
) -> None:
    primary, backup = servers
    primary.busy_always = backup.busy_always = True
    team = _team(primary, backup, "{models: ['openai/*'], concurrency: 4, retries: 0}")
    result, _ = await local_trace(team, "stamp")
    assert result.status == RunStatus.FAILED
    assert "openai/primary: " in result.error and "; openai/backup: " in result.error
