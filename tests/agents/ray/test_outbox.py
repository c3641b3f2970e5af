"""A process's outbox on its own: batching, numbering, counting and handing over, no Ray.

The ledger actor's handle is a stand-in that keeps what it is sent, so that each test reads the
batches exactly as the ledger would get them.
"""

from __future__ import annotations

import asyncio
import pickle
import time
from typing import Any

import pytest

from agents.core.events import AgentFinished, AgentStarted
from agents.core.messages import RunStatus
from agents.core.steps import Step
from agents.ledger import shard_of
from agents.ray import wire
from agents.ray.handover import Handover
from agents.ray.outbox import EVENT_FLUSH_S, MAX_RUNS_COUNTED, Outbox, Outboxes

pytestmark = pytest.mark.anyio

STARTED = AgentStarted(agent="a")
FINISHED = AgentFinished(agent="a", status=RunStatus.SUCCEEDED, duration_s=0.1, steps=1)
SPAN: dict[str, Any] = {"name": "chat m", "attributes": {}}


class _Ledger:
    """Stands in for the ledger actor's handle: keeps the batches sent to `emit_many`."""

    def __init__(self) -> None:
        self.batches: list[wire.Batch] = []
        self._came = asyncio.Event()
        self.emit_many = self  # `handle.emit_many.remote(sealed)`

    def remote(self, sealed: bytes) -> None:
        self.batches.append(wire.unseal(sealed, wire.Batch))
        self._came.set()

    async def until_sent(self, count: int) -> None:
        async with asyncio.timeout(5):
            while len(self.batches) < count:
                self._came.clear()
                await self._came.wait()


def _steps(handover: Handover) -> list[Step]:
    _, _, steps = pickle.loads(handover.sealed)
    return list(steps)


async def test_what_an_invocation_queues_in_one_turn_goes_in_one_numbered_batch() -> None:
    ledger = _Ledger()
    outbox = Outbox(ledger)
    outbox.emit("r", STARTED)
    outbox.keep_spans("r", [SPAN])
    outbox.record("r", Step(invocation="i", key="m1", kind="model", data={}))
    outbox.emit("r", FINISHED)
    outbox.flush()  # an invocation ended: sent at the end of this turn, not 50 ms later
    assert ledger.batches == []
    await ledger.until_sent(1)
    (batch,) = ledger.batches
    assert [e for _, e in batch.events] == [STARTED, FINISHED]
    assert batch.spans == [("r", [SPAN])] and len(batch.steps) == 1
    assert (batch.sender, batch.number) == (outbox.name, 1)
    outbox.emit("r", STARTED)
    outbox.flush()
    await ledger.until_sent(2)
    assert ledger.batches[1].number == 2  # the ledger applies them in this order


async def test_an_event_waits_at_most_the_flush_interval() -> None:
    ledger = _Ledger()
    outbox = Outbox(ledger)
    began = time.monotonic()
    outbox.emit("r", STARTED)
    await ledger.until_sent(1)
    assert time.monotonic() - began < EVENT_FLUSH_S + 0.5


async def test_a_run_s_items_are_counted_by_process_with_those_heard_from_callees() -> None:
    outbox = Outbox(_Ledger())
    outbox.emit("r", STARTED)
    outbox.keep_spans("r", [SPAN, SPAN])  # one shipment
    outbox.keep_spans("r", [])  # nothing: not a shipment
    outbox.record("r", Step(invocation="i", key="m1", kind="model", data={}))  # not counted
    outbox.emit("other", STARTED)
    outbox.heard("r", {"callee": 3})
    outbox.heard("r", {"callee": 2})  # an older count of the same process: the larger holds
    assert outbox.sent("r") == {outbox.name: 2, "callee": 3}
    assert outbox.forget("r") == {outbox.name: 2, "callee": 3}
    assert outbox.sent("r") == {} and outbox.sent("other") == {outbox.name: 1}


async def test_counts_are_kept_for_the_newest_runs_only() -> None:
    outbox = Outbox(_Ledger())
    outbox.emit("busy", STARTED)
    for i in range(MAX_RUNS_COUNTED):
        outbox.emit(f"r{i}", STARTED)
        if i == MAX_RUNS_COUNTED // 2:
            outbox.emit("busy", FINISHED)  # a run still going is not forgotten
    assert outbox.sent("busy") == {outbox.name: 2}
    assert outbox.sent("r0") == {}  # the oldest is


async def test_a_handover_takes_the_run_s_items_only_and_they_stay_the_giver_s() -> None:
    ledger = _Ledger()
    giver, taker = Outbox(ledger), Outbox(ledger)
    giver.emit("r", STARTED)
    giver.emit("other", STARTED)
    giver.keep_spans("r", [SPAN])
    giver.record("r", Step(invocation="i", key="m1", kind="model", data={}))
    handover = giver.hand_over("r")
    assert handover is not None and handover.origin == giver.name
    assert len(_steps(handover)) == 1
    assert giver.hand_over("r") is None  # nothing of the run left queued
    assert giver.sent("r") == {giver.name: 2}  # still its items, whoever sends them
    taker.take_over(handover)
    taker.flush()
    await ledger.until_sent(1)
    (batch,) = ledger.batches
    assert [item for _, item in batch.events] == [handover]  # sealed as the giver made it
    assert taker.sent("r") == {}  # the taker's own count is untouched
    giver.flush()
    await ledger.until_sent(2)
    assert [e for _, e in ledger.batches[1].events] == [STARTED]  # the other run's stayed


async def test_a_handover_keeps_its_due_time_wherever_it_goes() -> None:
    ledger = _Ledger()
    outbox = Outbox(ledger)
    late = Handover("r", pickle.dumps(([STARTED], [], [])), "x", "x.1", time.time() - 1.0)
    outbox.take_over(late)  # overdue: sent at once, not a flush interval later
    await ledger.until_sent(1)
    giver = Outbox(ledger)
    giver.emit("r", STARTED)
    handover = giver.hand_over("r")
    assert handover is not None and handover.due <= time.time() + EVENT_FLUSH_S


async def test_a_call_that_must_follow_the_queue_takes_it_as_the_next_batch() -> None:
    ledger = _Ledger()
    outbox = Outbox(ledger)
    outbox.emit("r", STARTED)
    batch = outbox.take_batch()  # goes with the call (an approval, a commit), not by itself
    assert [e for _, e in batch.events] == [STARTED] and batch.number == 1
    await asyncio.sleep(EVENT_FLUSH_S * 2)
    assert ledger.batches == []  # nothing left to send


async def test_a_closed_outbox_sends_what_it_has_and_nothing_after() -> None:
    ledger = _Ledger()
    outbox = Outbox(ledger)
    outbox.emit("r", STARTED)
    outbox.close()
    assert len(ledger.batches) == 1
    outbox.emit("r", FINISHED)
    outbox.flush()
    await asyncio.sleep(EVENT_FLUSH_S * 2)
    assert len(ledger.batches) == 1


async def test_each_run_s_items_go_to_its_shard_as_that_shard_s_own_numbered_batches() -> None:
    shards = (_Ledger(), _Ledger())
    outboxes = Outboxes(shards)
    on = {shard_of(r, 2): r for r in ("r1", "r2", "r3", "r4")}  # a run on each shard
    for run_id in on.values():
        outboxes.emit(run_id, STARTED)
        outboxes.keep_spans(run_id, [SPAN])
    # A call about the run on shard 1 takes its shard's queue only, numbered 1 there.
    batch = outboxes.take_batch(on[1])
    assert {r for r, _ in batch.events} == {on[1]} and batch.number == 1
    # An invocation of the run on shard 0 ends: that shard's queue is sent at once.
    outboxes.emit(on[1], FINISHED)
    outboxes.flush(on[0])
    await shards[0].until_sent(1)
    [sent] = shards[0].batches
    assert {r for r, _ in sent.events} == {on[0]} and sent.number == 1
    # Shard 1's queue waits for its timer: a flush per shard at every end cost each shard as
    # many calls as one shard took.
    assert shards[1].batches == []
    await shards[1].until_sent(1)
    assert [e for _, e in shards[1].batches[0].events] == [FINISHED]
    # Each shard counts a run's items by the process's name there.
    assert outboxes.sent(on[0]) == {sent.sender: 2} and batch.sender != sent.sender
