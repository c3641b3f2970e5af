"""The service's one stream of the ledger's feed, fanned out to the followers of each run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import ray

from agents.core.events import ModelDelta
from agents.ray.ledger_client import LedgerClient
from orchestrator.stream import RunStream

pytestmark = [pytest.mark.ray, pytest.mark.anyio]


async def test_a_follower_who_asked_the_ledger_before_the_stream_began_asks_again(
    ray_cluster: Any,
) -> None:
    # A service's first follower subscribes, asks the ledger for the run's events so far, and
    # starts the stream; an event that reaches the ledger between that question and the
    # stream's first read is in neither. The follower must hear that it may have missed some,
    # at once: not when the run's next event shows the gap, seconds later in a long tool call.
    from agents.ray.ledger_actor import LedgerActor

    handle = LedgerActor.remote()  # type: ignore[attr-defined]
    stream = RunStream()
    try:
        with stream.subscribe("r") as news:
            between = ModelDelta(agent="a", invocation="i", step=1, text="tool started")
            await handle.emit_many.remote([("r", between)], [], "p", None, 1)
            stream.start(LedgerClient(handle))
            # No other event comes: without the notice, this waits forever.
            assert await asyncio.wait_for(news.get(), 60) is None
    finally:
        await stream.stop()
        ray.kill(handle)
