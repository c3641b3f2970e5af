"""Hand-offs: an agent hands the conversation over, the receiver continues it and answers;
the guard applies (cycles only with allow_cycles, depth); the diagram draws it apart from a
delegation. A team in one process (no Ray), real litellm with the built-in models."""

from __future__ import annotations

import textwrap

import pytest

from agents.core.errors import ConfigError
from agents.core.messages import RunStatus
from orchestrator.system.config import parse_config
from tests.testkit import local_trace
from tracing.sequence import sequence_diagram

pytestmark = pytest.mark.anyio

DESK = """
agents:
  - name: triage
    description: First contact.
    handoffs: [billing]
    model:
      name: baton/scripted
      params: {replies: [{tool_calls: [{name: transfer_to_billing, arguments: {note: refund}}]}]}
  - name: billing
    description: Money matters.
"""


async def test_the_receiver_continues_the_conversation_and_its_answer_is_the_answer() -> None:
    result, spans = await local_trace(DESK, "I want my money back")
    assert result.status == RunStatus.SUCCEEDED, result.error  # type: ignore[attr-defined]
    [billing] = result.children  # type: ignore[attr-defined]
    assert billing.agent == "billing" and billing.status == RunStatus.SUCCEEDED
    # The receiver had the user's words (the offline model answers the first user message),
    # and its answer is the run's, not a tool result the caller rewrote.
    assert billing.output == "No tool matched, so this is a direct reply to: I want my money back"
    assert result.output == billing.output  # type: ignore[attr-defined]
    assert result.answered_by == "billing"  # type: ignore[attr-defined]
    assert result.total_usage().model_calls == 2  # type: ignore[attr-defined]
    [handoff] = [s for s in spans if s["name"] == "execute_tool transfer_to_billing"]
    assert handoff["attributes"]["baton.delegation.target"] == "billing"
    [receiver] = [s for s in spans if s["name"] == "invoke_agent billing"]
    assert receiver["parent_span_id"] == handoff["span_id"]
    assert receiver["attributes"]["baton.delegation.chain"] == ["triage", "billing"]
    # Drawn with an open arrowhead (a delegation's is filled), the answer coming back.
    text = sequence_diagram(spans).text
    assert "-)+a4: transfer_to_billing" in text and "->>+a4" not in text


def test_a_hand_off_cycle_needs_allow_cycles_and_a_hand_off_names_a_known_agent() -> None:
    loop = """
    agents:
      - {name: a, handoffs: [b]}
      - {name: b, handoffs: [a, ghost]}
    """
    with pytest.raises(ConfigError) as info:
        parse_config(textwrap.dedent(loop), "team.yaml")
    errors = [str(i) for i in info.value.issues if i.severity == "error"]
    assert any("a hand-off to unknown agent 'ghost'" in e for e in errors), errors
    allowed = parse_config(
        textwrap.dedent("""
        allow_cycles: true
        agents:
          - {name: a, handoffs: [b]}
          - {name: b, handoffs: [a]}
        """)
    )
    assert allowed.topology.cycles() == [["a", "b"]]
    assert allowed.topology.handoffs("a") == ["b"] and allowed.topology.delegates("a") == []


async def test_agents_handing_the_conversation_back_and_forth_stop_at_the_visit_limit() -> None:
    pingpong = """
    allow_cycles: true
    limits: {max_steps: 20}
    agents:
      - name: ping
        handoffs: [pong]
        model:
          name: baton/scripted
          params:
            replies: [{tool_calls: [{name: transfer_to_pong, arguments: {}}]}]
            repeat_last: true
      - name: pong
        handoffs: [ping]
        model:
          name: baton/scripted
          params:
            replies: [{tool_calls: [{name: transfer_to_ping, arguments: {note: yours}}]}]
            repeat_last: true
    """
    result, spans = await local_trace(pingpong, "serve")
    # Handing over to the agent up the chain is a hand-back, never a new invocation of it: the
    # chain never grows past ping -> pong; ping goes on each time, until the visit limit.
    agents = [
        s["attributes"]["baton.delegation.chain"]
        for s in spans
        if s["name"].startswith("invoke_agent")
    ]
    assert max(len(chain) for chain in agents) == 2
    assert result.status == RunStatus.LIMIT_EXCEEDED  # type: ignore[attr-defined]
    assert result.error == (  # type: ignore[attr-defined]
        "visit limit: ping handed work to pong in 5 steps of one turn (max_visits 5)"
    )
    pongs = [s for s in spans if s["name"] == "invoke_agent pong"]
    assert len(pongs) == 5
    assert all(s["attributes"]["baton.handed_back_to"] == "ping" for s in pongs)
