"""The dispatcher at its own seam: in-process targets, a stand-in host actor, a missing actor."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
import ray
from opentelemetry import trace

from agents.core.events import AgentFinished
from agents.core.messages import AgentResult, Delegation, RunContext, RunStatus
from agents.ray.dispatch import RayDispatcher, SystemRef
from agents.ray.handover import seal as seal_handover
from agents.ray.ledger_client import LedgerClient
from agents.ray.wire import Arrived, HostCall, HostReply, seal, unseal
from tracing import configure_tracing, workflow_span

pytestmark = [pytest.mark.anyio, pytest.mark.ray]

SYSTEM = SystemRef(namespace="baton-tests", prefix="dispatch-test", replicas={"b": 1, "gone": 1})


class _Ledger:
    """Stands in for the ledger actor's handle (nothing here reaches it: no flush is due)."""

    def __init__(self) -> None:
        self.emit_many = self

    def remote(self, sealed: bytes) -> None:
        pass


@ray.remote
class _Host:
    """Stands in for an agent host: answers as a host does, with a handover and counts."""

    async def invoke(self, sealed: bytes) -> bytes:
        call = unseal(sealed, HostCall)
        run_id = call.delegation.context.run_id
        last = AgentFinished(agent="b", status=RunStatus.SUCCEEDED, duration_s=0.1, steps=1)
        # Due in a minute: it stays queued in the caller's process for the test to see.
        handover = seal_handover(run_id, [last], [], [], "host-b", "host-b.1", time.time() + 60)
        child = AgentResult(agent="c", status=RunStatus.SUCCEEDED, output="from c")
        result = AgentResult(agent="b", status=RunStatus.SUCCEEDED, output="done", children=[child])
        reply = HostReply.of(result, handover if call.hand_back else None, {"host-b": 4})
        return seal(reply)

    async def cancel(self, attempt: str) -> None:
        pass


@pytest.fixture
def host_b(ray_address: str) -> Iterator[Any]:
    name = SYSTEM.actor_name("b", 0)
    handle = _Host.options(name=name, namespace="baton-tests").remote()  # type: ignore[attr-defined]
    yield handle
    ray.kill(handle)


def _delegation(run_id: str = "r") -> Delegation:
    ctx = RunContext(run_id=run_id, chain=("a",), deadline=time.time() + 30)
    return Delegation(task="go", context=ctx.enter("b"), caller="a", call_id="call-1")


async def test_a_target_in_this_process_is_awaited_in_a_fresh_trace_context() -> None:
    seen: list[bool] = []

    async def here(delegation: Delegation) -> AgentResult:
        seen.append(trace.get_current_span().get_span_context().is_valid)
        return AgentResult(agent="b", status=RunStatus.SUCCEEDED, output="local")

    configure_tracing("test")
    dispatcher = RayDispatcher(SYSTEM, LedgerClient((_Ledger(),)), local={"b": here})
    with workflow_span("r", "a", "test"):
        result = await dispatcher.dispatch("b", _delegation())
    # Only the trace context inside the delegation links it to its caller, as across actors.
    assert result.output == "local" and seen == [False]


async def test_an_agent_s_dispatcher_queues_the_callee_s_handover_and_keeps_its_counts(
    host_b: Any,
) -> None:
    ledger = LedgerClient((_Ledger(),))
    dispatcher = RayDispatcher(SYSTEM, ledger, hand_back=True)
    result = await dispatcher.dispatch("b", _delegation("r1"))
    assert isinstance(result, Arrived) and result.output == "done"
    assert result.children == []  # c's result stays sealed until the orchestrator opens it
    assert ledger.outbox.sent("r1") == {"host-b": 4}  # they go up with this process's reply
    batch = ledger.outbox.take_batch("r1")
    assert [type(item).__name__ for _, item in batch.events] == ["Handover"]


async def test_the_orchestrator_s_dispatcher_opens_the_whole_tree(host_b: Any) -> None:
    ledger = LedgerClient((_Ledger(),))
    result = await RayDispatcher(SYSTEM, ledger).dispatch("b", _delegation("r2"))
    assert [n.agent for n in result.walk()] == ["b", "c"]
    assert ledger.outbox.forget("r2") == {"host-b": 4}  # for the ledger to settle the run on


async def test_a_missing_actor_is_a_lost_result_with_a_span_where_the_caller_saw_it(
    ray_address: str,
) -> None:
    collector = configure_tracing("test")
    dispatcher = RayDispatcher(SYSTEM, LedgerClient((_Ledger(),)))
    with workflow_span("r3", "a", "test") as root:
        async with asyncio.timeout(30):
            result = await dispatcher.dispatch("gone", _delegation("r3"))
    assert result.status == RunStatus.FAILED and result.lost
    assert result.error is not None and "no restarts configured" in result.error
    spans = collector.drain(root.get_span_context().trace_id)
    lost = next(s for s in spans if s["name"] == "invoke_agent gone")
    assert lost["status"] == "ERROR" and lost["attributes"]["baton.agent.lost"] is True
