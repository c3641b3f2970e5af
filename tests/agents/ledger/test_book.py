from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
import ray

from agents.core.events import (
    AgentFinished,
    AgentStarted,
    ApprovalRequested,
    InputProvided,
    InputRequested,
    ModelDelta,
    ModelFinished,
    RunFinished,
    RunStarted,
    ToolStarted,
)
from agents.core.limits import SpendCap
from agents.core.messages import RunStatus
from agents.core.waits import Resolution
from agents.ledger.book import MAX_CLOSED_RUNS, MAX_EVENTS_PER_RUN, RunLedger
from agents.ledger.causal import CausalOrder
from agents.ledger.feed import MAX_FEED
from agents.ray import wire
from agents.ray.handover import seal
from agents.ray.ledger_client import EVENT_FLUSH_S, LedgerClient

STARTED = AgentStarted(agent="a")
FINISHED = AgentFinished(agent="a", status=RunStatus.SUCCEEDED, duration_s=0.1, steps=1)
SPAN = {"name": "invoke_agent x", "attributes": {}}


def _span(name: str, *, lost: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "span_id": name,
        "parent_span_id": None,
        "attributes": {"baton.agent.lost": True} if lost else {},
    }


@pytest.fixture
def ledger_actor(ray_cluster: Any) -> Iterator[Any]:
    """A real ledger actor on the session's Ray."""
    from agents.ray.ledger_actor import LedgerActor

    handle = LedgerActor.remote()  # type: ignore[attr-defined]
    yield handle
    ray.kill(handle)


async def _processes(handle: Any) -> tuple[LedgerClient, LedgerClient, LedgerClient]:
    """Three agent processes' ledger clients, and the run "r" opened (by the first)."""
    clients = LedgerClient((handle,)), LedgerClient((handle,)), LedgerClient((handle,))
    await clients[0].open("r", None, RunStarted(agent="a"))
    return clients


def test_the_budget_is_shared_by_every_charge_of_a_run() -> None:
    ledger = RunLedger()
    ledger.open("r", 100)
    ledger.charge("r", 60)
    ledger.charge("r", 30)
    assert ledger.tokens_left("r") == 10
    ledger.charge("r", 30)
    assert ledger.tokens_left("r") == -20
    ledger.close("r")


def test_a_charge_made_again_is_counted_once() -> None:
    # Ray makes a fire-and-forget call again when its answer was lost: the key says it is the
    # same reply's tokens.
    ledger = RunLedger()
    ledger.open("r", 100)
    ledger.charge("r", 40, "inv/1")
    ledger.charge("r", 40, "inv/1")
    ledger.charge("r", 25, "inv/2")
    assert ledger.tokens_left("r") == 35


def test_a_run_without_a_budget_is_unlimited() -> None:
    ledger = RunLedger()
    ledger.open("r", None)
    ledger.charge("r", 10**9)
    assert ledger.tokens_left("r") is None


def test_events_arriving_before_open_are_kept_and_finished_runs_stay_readable() -> None:
    ledger = RunLedger()
    ledger.emit("r", STARTED)
    ledger.open("r", 50)
    ledger.emit("r", FINISHED)
    assert ledger.tokens_left("r") == 50
    ledger.close("r")
    assert [e.type for e in ledger.events("r")] == ["agent_started", "agent_finished"]
    assert ledger.events("r", after=1) == [FINISHED]
    ledger.emit("r", STARTED)  # after close: dropped, not a new run
    assert len(ledger.events("r")) == 2


def test_a_run_finished_for_a_caller_without_a_store_sends_nothing_back_and_stays_readable() -> (
    None
):
    ledger = RunLedger()
    ledger.emit("r", STARTED)
    final = RunFinished(agent="a", status=RunStatus.SUCCEEDED)
    assert ledger.finish("r", final, returning=False) == []
    assert [e.type for e in ledger.events("r")] == ["agent_started", "run_finished"]
    assert ledger.finish("r", final) == list(enumerate(ledger.events("r"), start=1))


def test_a_second_decision_is_decided_already_even_after_the_run_closed() -> None:
    ledger = RunLedger()
    ledger.open("r", None)
    asked = ApprovalRequested(
        agent="clerk", call_id="c", tool_call_id="c", tool="stamp", arguments="{}", expires_at=0
    )
    first = ledger.open_wait("r", asked)
    second = ledger.open_wait("r", asked)  # a second call, never decided
    assert first != second
    assert ledger.resolve("r", first, Resolution.decision(True, "ok"))[0] == "decided"
    ledger.close("r")  # the run ends before the second word arrives
    outcome, decision = ledger.resolve("r", first, Resolution.decision(False, "no"))
    assert outcome == "already_decided" and decision is not None and decision["approved"]
    assert ledger.resolve("r", second, Resolution.decision(True)) == ("unknown", None)
    assert ledger.resolve("other", first, Resolution.decision(True)) == ("unknown", None)


def test_a_wait_is_resolved_only_by_a_word_of_its_kind() -> None:
    ledger = RunLedger()
    ledger.open("r", None)
    asked = InputRequested(agent="clerk", call_id="q-1", question="which?", expires_at=0)
    question = ledger.open_wait("r", asked)
    assert ledger.desk("r").waits_for() == "input"
    assert ledger.resolve("r", question, Resolution.decision(True)) == ("unknown", None)
    outcome, answer = ledger.resolve("r", question, Resolution.reply("that one", who="ann"))
    assert outcome == "decided" and answer == {"answer": "that one", "by": "person", "who": "ann"}
    assert ledger.waiting("r") == [] and ledger.desk("r").waits_for() is None
    provided = ledger.events("r")[-1]
    assert isinstance(provided, InputProvided) and provided.answer == "that one"


def test_the_same_wait_opened_again_after_a_resume_is_announced_once() -> None:
    ledger = RunLedger()
    ledger.open("r", None)
    asked = ApprovalRequested(
        agent="clerk",
        invocation="inv",
        call_id="c",
        tool_call_id="c",
        tool="stamp",
        arguments="{}",
        expires_at=0,
        record_key="s1/approval/c",
    )
    first = ledger.open_wait("r", asked)
    ledger.resume("r", None, epoch=1, base=0)  # its invocation asks again at the same place
    assert ledger.open_wait("r", asked) == first
    assert [e.type for e in ledger.events("r")] == ["approval_requested"]


def test_memory_is_bounded_per_run_and_across_finished_runs() -> None:
    ledger = RunLedger()
    ledger.open("big", None)
    for i in range(MAX_EVENTS_PER_RUN + 5):
        ledger.emit("big", ToolStarted(tool="t", call_id=str(i)))
    assert len(ledger.events("big")) == MAX_EVENTS_PER_RUN
    ledger.close("big")
    for i in range(MAX_CLOSED_RUNS + 1):
        ledger.open(f"r{i}", None)
        ledger.emit(f"r{i}", STARTED)
        ledger.close(f"r{i}")
    assert ledger.events("r0") == []
    assert ledger.events(f"r{MAX_CLOSED_RUNS}") == [STARTED]


def test_a_run_is_settled_once_each_process_s_counted_items_are_in() -> None:
    # Each process counts the events and span shipments it queued for the run; its count
    # travels up with its results, and the ledger settles the run once it has that many.
    ledger = RunLedger()
    ledger.open("r", None)
    ledger.emit("r", STARTED, "p1")
    ledger.keep_spans("r", [{"name": "chat m"}], "p1")
    ledger.emit("r", STARTED, "p2")
    sent = {"p1": 3, "p2": 1}
    assert not ledger.settled("r", sent, traced=True)
    ledger.keep_spans("r", [{"name": "invoke_agent a"}], "p1")  # p1's last shipment
    assert ledger.settled("r", sent, traced=True)
    assert not ledger.settled("r", {**sent, "p3": 1}, traced=False)  # untraced: events too


def test_a_run_without_counts_is_settled_once_every_started_invocation_has_its_span() -> None:
    # The entry agent's call did not answer (cancelled, its actor lost): no counts came back,
    # and every invocation that started sends (or its caller makes) an `invoke_agent` span.
    ledger = RunLedger()
    ledger.keep_spans("r", [_span("invoke_agent a")])  # may arrive before `open`
    ledger.open("r", None)
    for _ in range(3):
        ledger.emit("r", STARTED)
    assert not ledger.settled("r", {}, traced=True)
    assert ledger.settled("r", {}, traced=False)  # nothing to wait for
    ledger.keep_spans("r", [_span("invoke_agent b"), _span("chat m")])
    assert not ledger.settled("r", {}, traced=True)
    ledger.keep_spans("r", [_span("invoke_agent c", lost=True)])  # made by c's caller
    assert ledger.settled("r", {}, traced=True)
    names = ["invoke_agent a", "invoke_agent b", "chat m", "invoke_agent c"]
    assert [s["name"] for s in ledger.spans("r")] == names
    assert [s["name"] for s in ledger.spans("r")] == names  # read, not taken
    ledger.close("r")
    ledger.keep_spans("r", [_span("invoke_agent late")])  # too late for the record: dropped
    assert ledger.spans("r") == []  # a finished run's spans live in the store


def test_started_invocations_are_counted_past_the_event_bound() -> None:
    ledger = RunLedger()
    ledger.open("r", None)
    for _ in range(MAX_EVENTS_PER_RUN + 3):
        ledger.emit("r", STARTED)
    ledger.keep_spans("r", [{"name": "invoke_agent a"}] * (MAX_EVENTS_PER_RUN + 2))
    assert not ledger.settled("r", {}, traced=True)
    ledger.keep_spans("r", [{"name": "invoke_agent a"}])
    assert ledger.settled("r", {}, traced=True)


def test_a_lost_invocation_s_sent_spans_hang_under_its_stand_in() -> None:
    # b's actor died mid-invocation: the spans it had sent name its `invoke_agent` span as
    # their parent, which died with it; the stand-in its caller made takes that span's id.
    ledger = RunLedger()
    ledger.open("r", None)
    opened = AgentStarted(agent="b", span_id="b-span", parent_span_id="a-tool")
    ledger.emit("r", opened)
    chat = {"name": "chat m", "span_id": "chat", "parent_span_id": "b-span"}
    stand_in = {
        "name": "invoke_agent b",
        "span_id": "made-by-a",
        "parent_span_id": "a-tool",
        "attributes": {"baton.agent.lost": True, "gen_ai.agent.name": "b"},
    }
    ledger.keep_spans("r", [chat, stand_in])
    spans = {s["name"]: s for s in ledger.spans("r")}
    assert spans["invoke_agent b"]["span_id"] == "b-span"
    assert spans["chat m"]["parent_span_id"] == spans["invoke_agent b"]["span_id"]


def test_the_feed_carries_every_runs_events_in_order_and_says_when_some_were_missed() -> None:
    ledger = RunLedger()
    _, now, missed = ledger.feed(-1)  # "from now on"
    assert (now, missed) == (0, False)
    ledger.emit("a", STARTED)
    ledger.emit("b", STARTED)
    ledger.emit("a", FINISHED)
    items, now, missed = ledger.feed(0)
    assert [(run, seq, e.type) for run, seq, e in items] == [
        ("a", 1, "agent_started"),
        ("b", 1, "agent_started"),
        ("a", 2, "agent_finished"),
    ]
    assert (now, missed) == (3, False)
    assert ledger.feed(now) == ([], 3, False)
    assert [e for _, _, e in ledger.feed(2)[0]] == [FINISHED]
    # A reader that fell behind by more than the feed keeps is told so.
    for i in range(MAX_FEED + 1):
        ledger.emit(f"r{i % 7}", ToolStarted(tool="t", call_id=str(i)))
    items, now, missed = ledger.feed(3)
    assert missed and len(items) == MAX_FEED and now == MAX_FEED + 4
    calls = [getattr(e, "call_id", None) for _, _, e in items]
    assert calls[0] == "1" and calls[-1] == str(MAX_FEED)  # the newest kept, oldest first
    assert [getattr(e, "call_id", None) for _, _, e in ledger.feed(now - 2)[0]] == calls[-2:]
    # And one that read a ledger before this one (restarted) too.
    assert RunLedger().feed(now) == ([], 0, True)


def test_a_run_s_last_events_reach_readers_once_they_are_stored() -> None:
    # The ledger writes a run's end and its last events in one transaction, and lets those
    # events out when it is done: whoever sees `run_finished` finds the run recorded.
    ledger = RunLedger()
    ledger.open("r", None)
    ledger.emit("r", STARTED)
    final = RunFinished(agent="a", status=RunStatus.SUCCEEDED)
    ended = ledger.finish("r", final, until_stored=True)
    assert [e for _, e in ended] == [STARTED, final]  # (the caller has them all)
    assert [e for _, _, e in ledger.feed(0)[0]] == [STARTED]
    assert ledger.events("r") == [STARTED] and ledger.snapshot("r")[1] == [STARTED]
    assert ledger.state("r") == "open"  # a reader keeps waiting for the rest
    ledger.emit("r", FINISHED)  # late: the run is closed
    ledger.announce("r")
    assert [(seq, e) for _, seq, e in ledger.feed(0)[0]] == [(1, STARTED), (2, final)]
    assert ledger.events("r") == [STARTED, final] and ledger.state("r") == "closed"


def test_an_event_whose_cause_never_comes_reaches_the_feed_after_the_hold() -> None:
    now = [0.0]
    ledger = RunLedger()
    ledger.open("r", None)
    ledger._runs["r"].order = CausalOrder(hold_s=1.0, clock=lambda: now[0])
    # A callee's start whose caller's tool_started is lost (its process died).
    orphan = AgentStarted(agent="b", chain=["a", "b"], invocation="b1", seq=1, call_id="c1")
    ledger.emit("r", orphan)
    assert ledger.feed(0)[0] == []
    now[0] = 1.0  # past the hold: the next read lets it out
    assert [e for _, _, e in ledger.feed(0)[0]] == [orphan]


@pytest.mark.anyio
async def test_a_process_s_batches_reach_followers_in_the_order_it_sent_them(
    ledger_actor: Any,
) -> None:
    # Ray's async actors may start one caller's calls out of order; the ledger waits for a
    # batch's predecessor, so that a streamed reply reads as it was written.
    ledger = ledger_actor  # called directly, as an agent process's batches call it
    piece = ModelDelta(agent="a", invocation="i", step=1, text="")

    def batch(text: str, number: int) -> bytes:
        events = [("r", piece.model_copy(update={"text": text}))]
        return wire.seal(wire.Batch(events, sender="p", number=number))

    second = ledger.emit_many.remote(batch("b ", 2))
    first = ledger.emit_many.remote(batch("a ", 1))
    await asyncio.gather(first, second)
    items, _, _ = await ledger.feed.remote(0, 1.0)
    assert [event.text for _, _, event in items] == ["a ", "b "]
    # A batch whose predecessor never comes goes on alone, shortly.
    await ledger.emit_many.remote(batch("c ", 9))
    items, _, _ = await ledger.feed.remote(0, 1.0)
    assert [event.text for _, _, event in items] == ["a ", "b ", "c "]
    # A batch Ray sends again (the first call's reply was lost) is applied once; one that came
    # late (after the ledger went on without it) is applied when it comes.
    await ledger.emit_many.remote(batch("b ", 2))
    await ledger.emit_many.remote(batch("late ", 5))
    items, _, _ = await ledger.feed.remote(0, 1.0)
    assert [event.text for _, _, event in items] == ["a ", "b ", "c ", "late "]


@pytest.mark.anyio
async def test_a_chain_s_handed_back_items_reach_the_ledger_once_in_order_sealed_where_made(
    ledger_actor: Any,
) -> None:
    # Agents in processes of their own, c called by b called by a: each process hands what it
    # still has queued for the run back with its result, and the caller's process sends it as
    # its own. What c queued travels through b's process as c sealed it (not pickled again),
    # and the ledger gets every event and span once, events in order.
    a, b, c = await _processes(ledger_actor)
    a.outbox.emit("r", AgentStarted(agent="a"))
    b.outbox.emit("r", AgentStarted(agent="b"))
    c.outbox.emit("r", AgentStarted(agent="c"))
    c.outbox.keep_spans("r", [SPAN, SPAN])
    c.outbox.emit("r", FINISHED.model_copy(update={"agent": "c"}))
    c.outbox.keep_spans("r", [SPAN])
    from_c = c.outbox.hand_over("r")
    assert from_c is not None and c.outbox.hand_over("r") is None

    b.outbox.take_over(from_c)
    b.outbox.heard("r", c.outbox.sent("r"))  # c's counts came with its result
    b.outbox.emit("r", FINISHED.model_copy(update={"agent": "b"}))
    b.outbox.keep_spans("r", [SPAN])
    from_b = b.outbox.hand_over("r")
    assert from_b is not None and from_c.sealed in from_b.sealed

    a.outbox.take_over(from_b)
    a.outbox.heard("r", b.outbox.sent("r"))
    a.outbox.emit("r", FINISHED.model_copy(update={"agent": "a"}))
    a.outbox.flush("r")
    # Each process's items count as its own, whoever sent them: the run settles at once (a
    # wrong count keeps it waiting for items that never come, 5 s).
    sent = a.outbox.sent("r")
    assert sorted(sent.values()) == [2, 3, 4]
    final = RunFinished(agent="a", status=RunStatus.SUCCEEDED)
    closed = await asyncio.wait_for(a.finish("r", final, settle=wire.RunSettle("r", sent)), 3.0)
    spans, events = closed.spans, closed.events
    assert len(spans) == 4
    order = [(e.type, e.agent) for _, e in events]
    assert order == [
        ("run_started", "a"),
        ("agent_started", "a"),
        ("agent_started", "b"),
        ("agent_started", "c"),
        ("agent_finished", "c"),
        ("agent_finished", "b"),
        ("agent_finished", "a"),
        ("run_finished", "a"),
    ]


@pytest.mark.anyio
async def test_a_caller_s_items_ride_down_with_a_delegation_and_are_recorded_once_if_sent_again(
    ledger_actor: Any,
) -> None:
    # a delegates to b in another process: what a has queued goes with the call and b's
    # process sends it with its own. When the call fails, a cannot know whether b sent it
    # before dying, so it sends it again: the ledger records it once.
    a, b, entry = await _processes(ledger_actor)
    entry.outbox.emit("r", STARTED.model_copy(update={"agent": "entry"}))
    entry.outbox.keep_spans("r", [SPAN])
    entry.outbox.flush("r")

    a.outbox.emit("r", AgentStarted(agent="a"))
    a.outbox.keep_spans("r", [SPAN])
    down = a.outbox.hand_over("r")
    assert down is not None
    assert a.outbox.hand_over("r") is None  # nothing left queued

    b.outbox.take_over(down)
    b.outbox.emit("r", AgentStarted(agent="b"))
    b.outbox.keep_spans("r", [SPAN])
    b.outbox.flush("r")  # b's process sends a's items with its own, then dies
    a.outbox.take_over(down)  # the call failed: a sends them itself
    a.outbox.emit("r", FINISHED.model_copy(update={"agent": "a"}))
    a.outbox.flush("r")

    sent = {**entry.outbox.sent("r"), **a.outbox.sent("r"), **b.outbox.sent("r")}
    final = RunFinished(agent="a", status=RunStatus.SUCCEEDED)
    closed = await asyncio.wait_for(a.finish("r", final, settle=wire.RunSettle("r", sent)), 3.0)
    spans, events = closed.spans, closed.events
    assert len(spans) == 3  # a's once
    kinds = sorted((e.type, e.agent) for _, e in events)
    assert kinds == [
        ("agent_finished", "a"),
        ("agent_started", "a"),
        ("agent_started", "b"),
        ("agent_started", "entry"),
        ("run_finished", "a"),
        ("run_started", "a"),
    ]


@pytest.mark.anyio
async def test_what_a_process_takes_over_keeps_its_deadline_down_and_up_a_chain(
    ledger_actor: Any,
) -> None:
    # Events travelling with calls still reach followers by the time they were due (50 ms
    # after they were emitted), however many processes they pass through on the way.
    a, b, c = await _processes(ledger_actor)
    a.outbox.emit("r", AgentStarted(agent="a"))
    from_a = a.outbox.hand_over("r")
    assert from_a is not None and from_a.due <= time.time() + EVENT_FLUSH_S
    b.outbox.take_over(from_a)
    b.outbox.emit("r", AgentStarted(agent="b"))  # younger: it does not put the deadline off
    from_b = b.outbox.hand_over("r")
    assert from_b is not None and from_b.due == from_a.due
    late = seal("r", [AgentStarted(agent="x")], [], [], "x", "x.1", time.time() - 1.0)
    c.outbox.take_over(late)  # overdue: due at once, here and wherever it is handed on
    from_c = c.outbox.hand_over("r")
    assert from_c is not None and from_c.due <= time.time()


def test_a_capped_runs_reply_counts_as_it_arrives_and_only_once() -> None:
    """A batch may wait for an earlier one of its process: the cap does not wait with it."""
    ledger = RunLedger()
    ledger.open("r", None)
    ledger.spend.open("r", "acme", "ci", (SpendCap(scope="run", tokens=100),))
    reply = ModelFinished(agent="a", invocation="inv", seq=3, model="m", step=1, tool_calls=0,
                          tokens=120, input_tokens=100, output_tokens=20)  # fmt: skip
    ledger.count_on_arrival("r", reply)  # its batch waits for its turn...
    assert ledger.spend_check("r")[0] == "the run spent 120 tokens: reached its cap of 100"
    ledger.emit("r", reply)  # ...then takes it
    assert ledger.spend.check("r")[0] is not None
    assert ledger.spend._runs["r"].own.tokens == 120  # counted once


def test_a_run_taken_up_from_its_record_goes_on_after_it_and_keeps_its_waits() -> None:
    written: list[tuple[str, int, str]] = []
    ledger = RunLedger(on_event=lambda run, seq, event: written.append((run, seq, event.type)))
    started = AgentStarted(agent="clerk", invocation="i", seq=1)
    asked = ApprovalRequested(
        agent="clerk", invocation="i", seq=2, call_id="c", tool_call_id="c", tool="stamp",
        arguments="{}", expires_at=0,
    )  # fmt: skip
    decided = asked.resolved("c", Resolution.decision(True, "fine", who="ops"))
    budget = RunStarted(agent="clerk", token_budget=100)
    replied = ModelFinished(
        agent="clerk", invocation="i", seq=3, model="m", tokens=30, input_tokens=20,
        output_tokens=10, duration_ms=1, step=1, tool_calls=0,
    )  # fmt: skip
    stored = [(1, budget), (2, started), (3, asked), (4, decided), (5, replied)]
    ledger.recover("r", 0, stored, [_span("s1")])
    # What came before is known: the decision, the budget spent, the spans.
    assert ledger.state("r") == "open" and ledger.waiting("r") == []
    assert ledger.desk("r").resolution("c") == {"approved": True, "message": "fine", "by": "person",
                                           "who": "ops"}  # fmt: skip
    assert ledger.tokens_left("r") == 70 and [s["name"] for s in ledger.spans("r")] == ["s1"]
    # A batch sent again (it was in flight when the ledger died) is not recorded twice; what
    # is new goes on after the stored ids.
    ledger.emit("r", replied)
    ledger.emit("r", ToolStarted(agent="clerk", invocation="i", seq=4, tool="stamp", call_id="c"))
    assert written == [("r", 6, "tool_started")]
    # A run that had ended is taken up closed.
    ledger.recover("done", 0, [(1, budget), (2, RunFinished(status=RunStatus.SUCCEEDED))], [])
    assert ledger.state("done") == "closed"
