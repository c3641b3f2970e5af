"""Events reach every consumer in causal order, whatever order their batches arrive in."""

from __future__ import annotations

import random

import pytest

from agents.core.events import AgentStarted, Event, RunFinished, RunStarted, ToolStarted
from agents.core.messages import RunStatus
from agents.ledger.book import RunLedger
from agents.ledger.causal import CausalOrder
from tests.testkit import EventList, causal_breaks, local_trace
from tests.tracing.test_sequence import DEFAULT_TEAM

pytestmark = pytest.mark.anyio


def _finished(agent: str) -> RunFinished:
    return RunFinished(agent=agent, status=RunStatus.SUCCEEDED)


async def _real_events() -> list[Event]:
    events = EventList()
    task = "Research the history of Ray, check the facts, and calculate 2+2"
    await local_trace(DEFAULT_TEAM, task, events=events)
    assert len({e.invocation for e in events.events}) == 4  # three delegations, one nested
    return events.events


async def test_the_ledger_releases_shuffled_arrivals_in_causal_order() -> None:
    emitted = await _real_events()
    assert causal_breaks(emitted) == []
    for seed in range(40):
        arrived = list(emitted)
        random.Random(seed).shuffle(arrived)
        assert causal_breaks(arrived)  # the test's input is out of order...
        ledger = RunLedger()
        ledger.emit("r", RunStarted(agent="coordinator"))
        for event in arrived:
            ledger.emit("r", event)
        # ... every cause came, so nothing waits for the end of the run
        released = ledger.events("r")
        assert len(released) == len(emitted) + 1, f"seed {seed}: some still held"
        done = [e for _, e in ledger.finish("r", _finished("coordinator"))]
        assert causal_breaks(done) == [], f"seed {seed}"
        assert sorted(map(id, done[1:-1])) == sorted(map(id, emitted))  # nothing lost


async def test_run_started_comes_first_when_the_agents_batches_overtake_it() -> None:
    # The run's first event travels with the entry agent's events: another process's batch
    # (a sub-agent with actors of its own) may arrive before it.
    emitted = await _real_events()
    for seed in range(20):
        arrived = [RunStarted(agent="coordinator"), *emitted]
        random.Random(seed).shuffle(arrived)
        ledger = RunLedger()
        for event in arrived:
            ledger.emit("r", event)
        released = ledger.events("r")
        assert len(released) == len(arrived), f"seed {seed}: some still held"
        assert released[0].type == "run_started", f"seed {seed}: {released[0].type} first"
        assert causal_breaks(released) == [], f"seed {seed}"


def test_the_run_s_first_event_counts_once_when_a_retried_entry_sends_it_again() -> None:
    ledger = RunLedger()
    for _ in range(2):  # each attempt at the entry delegation carries it
        ledger.emit("r", RunStarted(agent="a"))
    done = [e.type for _, e in ledger.finish("r", _finished("a"), RunStarted(agent="a"))]
    assert done == ["run_started", "run_finished"]


def test_a_run_whose_entry_agent_was_never_reached_still_begins_with_its_first_event() -> None:
    ledger = RunLedger()  # refused, cancelled before its call, or its actor dead
    done = [e.type for _, e in ledger.finish("r", _finished("a"), RunStarted(agent="a"))]
    assert done == ["run_started", "run_finished"]


def _child_start() -> AgentStarted:
    return AgentStarted(
        agent="b", chain=["a", "b"], invocation="b1", seq=1, call_id="c1", caller="a"
    )


def test_an_event_whose_cause_never_comes_goes_out_after_the_hold() -> None:
    now = [0.0]
    order = CausalOrder(hold_s=1.0, clock=lambda: now[0])
    assert order.admit(_child_start()) == []  # waits for a's tool_started
    second = AgentStarted(agent="b", chain=["a", "b"], invocation="b1", seq=2)
    assert order.admit(second) == [] and order.holding
    now[0] = 0.5
    assert order.overdue() == []
    now[0] = 1.0  # a's process died: b's events go out, in their order
    assert [e.seq for e in order.overdue()] == [1, 2]
    assert not order.holding


def test_a_caller_s_tool_started_releases_its_callee_at_once() -> None:
    order = CausalOrder()
    assert order.admit(_child_start()) == []
    started = ToolStarted(
        agent="a", chain=["a"], invocation="a1", seq=1, tool="delegate_to_b", call_id="c1"
    )
    assert [e.type for e in order.admit(started)] == ["tool_started", "agent_started"]


def test_a_run_s_end_lets_out_what_still_waits() -> None:
    ledger = RunLedger()
    ledger.emit("r", _child_start())
    assert ledger.events("r") == []
    done = [e.type for _, e in ledger.finish("r", _finished("a"))]
    assert done == ["agent_started", "run_finished"]
