"""An agent host at its own seam: one host and a ledger on the session's Ray, called directly."""

from __future__ import annotations

import asyncio
import pickle
import time
from collections.abc import Iterator
from typing import Any

import pytest
import ray
from ray.exceptions import TaskCancelledError

from agents.core.limits import TraceOptions
from agents.core.messages import Delegation, RunContext, RunStatus
from agents.core.spec import AgentSpec, ModelSpec
from agents.ray.dispatch import SystemRef
from agents.ray.host import AgentHost
from agents.ray.ledger_actor import LedgerActor
from agents.ray.ledger_client import LedgerClient
from agents.ray.wire import HostCall, HostReply, RunSettle, seal, unseal

pytestmark = [pytest.mark.anyio, pytest.mark.ray]

SYSTEM = SystemRef(namespace="baton-tests", prefix="host-test", replicas={"solo": 1})


@pytest.fixture(scope="module")
def host(ray_address: str) -> Iterator[tuple[Any, Any]]:
    ledger = LedgerActor.remote()  # type: ignore[attr-defined]
    spec = AgentSpec(
        name="solo",
        model=ModelSpec(
            name="baton/scripted", params={"replies": [{"content": "hello"}], "repeat_last": True}
        ),
    )
    handle = AgentHost.options(  # type: ignore[attr-defined]
        name=SYSTEM.actor_name("solo", 0), namespace="baton-tests"
    ).remote([spec], [spec.card()], {"solo": []}, SYSTEM, (ledger,), 0, TraceOptions(), {}, True)
    ray.get(handle.ready.remote(), timeout=120)
    yield handle, ledger
    ray.kill(handle)
    ray.kill(ledger)


def _call(run_id: str, *, hand_back: bool = False, attempt: str = "") -> bytes:
    ctx = RunContext(
        run_id=run_id, deadline=time.time() + 30, attempts=(attempt,) if attempt else ()
    )
    delegation = Delegation(task="say hello", context=ctx.enter("solo"))
    return seal(HostCall("solo", delegation, hand_back=hand_back))


async def test_a_reply_counts_what_the_host_sent_and_the_ledger_settles_on_it(
    host: tuple[Any, Any],
) -> None:
    handle, ledger = host
    reply = unseal(await handle.invoke.remote(_call("h1")), HostReply)
    assert (reply.result.status, reply.result.output) == (RunStatus.SUCCEEDED, "hello")
    assert reply.handover is None  # its caller is the orchestrator: it flushed them itself
    ((_, count),) = reply.sent.items()  # one process: this host
    assert count >= 4  # agent_started, model_started, model_finished, agent_finished, spans
    async with asyncio.timeout(10):  # a wrong count would hold it for the full wait
        spans = await LedgerClient((ledger,)).settle(RunSettle("h1", reply.sent))
    assert {s["name"] for s in spans} >= {"invoke_agent solo", "chat scripted"}


async def test_a_reply_to_an_agent_carries_the_host_s_last_items(host: tuple[Any, Any]) -> None:
    handle, _ = host
    reply = unseal(await handle.invoke.remote(_call("h2", hand_back=True)), HostReply)
    assert reply.handover is not None and reply.handover.run_id == "h2"
    events, spans, _ = pickle.loads(reply.handover.sealed)
    assert events[-1].type == "agent_finished"
    assert any(s["name"] == "invoke_agent solo" for shipment in spans for s in shipment)


async def test_a_call_cancelled_before_it_comes_is_refused(host: tuple[Any, Any]) -> None:
    handle, _ = host
    await handle.cancel.remote("early-1")  # Ray alone would drop this cancellation
    with pytest.raises((TaskCancelledError, asyncio.CancelledError)):
        await handle.invoke.remote(_call("h3", attempt="early-1"))
    reply = unseal(await handle.invoke.remote(_call("h3", attempt="later-1")), HostReply)
    assert reply.result.output == "hello"  # only that attempt was refused


async def test_stats_say_where_the_host_runs_and_how_busy_each_agent_is(
    host: tuple[Any, Any],
) -> None:
    handle, _ = host
    await handle.invoke.remote(_call("h4"))
    stats = await handle.stats.remote()
    assert stats["actor"] == SYSTEM.actor_name("solo", 0) and stats["restarted"] is False
    assert stats["agents"]["solo"]["inflight"] == 0
    assert stats["agents"]["solo"]["invocations"] >= 1
