"""Control that comes back: a worker naming an agent up its chain hands control back to it (its
turn ends; the ancestor's waiting turn goes on with the message), as LangGraph's report-back
and ADK's transfer to the parent do; the agents between end their turns too; the diagram draws
it. A team in one process (no Ray), real litellm with the built-in models."""

from __future__ import annotations

import pytest

from agents.core.events import AgentFinished
from agents.core.messages import RunStatus
from tests.testkit import EventList, local_trace
from tracing.sequence import sequence_diagram

pytestmark = pytest.mark.anyio

SUPERVISED = """
allow_cycles: true
agents:
  - name: supervisor
    delegates: [worker]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: delegate_to_worker, arguments: {task: find flights}}]}
          - {tool_calls: [{name: delegate_to_worker, arguments: {task: now hotels}}]}
          - {content: "Booked: LH123 and the Hotel Adlon."}
  - name: worker
    delegates: [supervisor]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: delegate_to_supervisor, arguments: {task: "found: LH123"}}]}
"""


async def test_a_supervisor_and_its_worker_hand_control_back_and_forth_until_it_answers() -> None:
    events = EventList()
    result, spans = await local_trace(SUPERVISED, "book my trip", events=events)
    assert result.status == RunStatus.SUCCEEDED, result.error  # type: ignore[attr-defined]
    assert result.output == "Booked: LH123 and the Hotel Adlon."  # type: ignore[attr-defined]
    workers = result.children  # type: ignore[attr-defined]
    assert [(w.agent, w.handed_back_to, w.output) for w in workers] == [
        ("worker", "supervisor", "found: LH123"),
        ("worker", "supervisor", "found: LH123"),
    ]
    # One invocation of the supervisor: a hand-back resumes its turn, never starts another.
    assert sum(s["name"] == "invoke_agent supervisor" for s in spans) == 1
    finished = [e for e in events.events if isinstance(e, AgentFinished) and e.agent == "worker"]
    assert [e.handed_back_to for e in finished] == ["supervisor", "supervisor"]
    assert "worker handed back to supervisor" in finished[0].describe()
    # Drawn as a hand-back: a note where the worker gives control away, its return so labelled.
    text = sequence_diagram(spans).text
    assert "hands control back to supervisor" in text
    assert "hands back to supervisor" in text


CHAIN = """
allow_cycles: true
agents:
  - name: boss
    delegates: [lead]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: delegate_to_lead, arguments: {task: ship it}}]}
          - {content: done}
  - name: lead
    delegates: [worker]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: delegate_to_worker, arguments: {task: build it}}]}
          - {content: the lead should never get here}
  - name: worker
    delegates: [boss]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: delegate_to_boss, arguments: {task: "needs your sign-off"}}]}
"""


async def test_control_handed_back_past_the_caller_ends_every_turn_between() -> None:
    result, spans = await local_trace(CHAIN, "release")
    assert result.status == RunStatus.SUCCEEDED and result.output == "done"  # type: ignore[attr-defined]
    [lead] = result.children  # type: ignore[attr-defined]
    [worker] = lead.children
    # The worker handed control to the boss: the lead's turn ended with it, untouched.
    assert (worker.handed_back_to, worker.output) == ("boss", "needs your sign-off")
    assert (lead.handed_back_to, lead.output, lead.steps) == ("boss", "needs your sign-off", 1)
    assert sum(s["name"] == "invoke_agent boss" for s in spans) == 1
