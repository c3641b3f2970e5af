"""The service's one stream of the ledger's feed, fanned out to the followers of each run."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

from agents.core.events import ModelDelta, RunFinished, RunStarted
from agents.core.messages import RunStatus
from agents.ledger import shard_of
from agents.ledger.feed import MAX_FEED
from agents.ray.ledger_client import LedgerClient
from agents.ray.wire import Batch, seal
from orchestrator.engine import Engine
from orchestrator.engine.submission import Submission
from orchestrator.service.feed_reader import FeedReader, News
from tests.service import held_service

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
    stream = FeedReader()
    try:
        with stream.subscribe("r") as news:
            between = ModelDelta(agent="a", invocation="i", step=1, text="tool started")
            await handle.emit_many.remote(seal(Batch([("r", between)], sender="p", number=1)))
            stream.start(LedgerClient((handle,)))
            # No other event comes: without the notice, this waits forever.
            assert await asyncio.wait_for(news.get(), 60) is None
    finally:
        await stream.stop()
        ray.kill(handle)


async def test_a_late_follower_of_a_run_the_service_watched_gets_its_events_at_once(
    ray_cluster: Any,
) -> None:
    # The service watches the runs it starts: their followers, even late ones, get every event
    # so far from the stream, without asking the ledger. Other runs' followers still ask it.
    from agents.ray.ledger_actor import LedgerActor

    handle = LedgerActor.remote()  # type: ignore[attr-defined]
    ledger = LedgerClient((handle,))
    stream = FeedReader()
    try:
        with stream.subscribe("-") as placed:
            stream.start(ledger)
            assert await asyncio.wait_for(placed.get(), 60) is None  # in its place
        stream.watch("watched")
        for run_id in ("watched", "other"):
            with stream.subscribe(run_id) as live:
                await ledger.open(run_id, None, RunStarted(agent="a"))
                await ledger.finish(run_id, RunFinished(agent="a", status=RunStatus.SUCCEEDED))
                await _until_finished(live)
        assert stream.complete("watched") and not stream.complete("other")
        with stream.subscribe("watched") as late:
            kept = [late.get_nowait() for _ in range(late.qsize())]
        told = [None if item is None else (item[0], item[1].type) for item in kept]
        assert told == [(1, "run_started"), (2, "run_finished")]
        with stream.subscribe("other") as late:
            assert late.empty()
        stream.watch("watched")  # it starts again (resumed): its old end is not its end now
        with stream.subscribe("watched") as again:
            assert again.empty()
    finally:
        await stream.stop()
        ray.kill(handle)


async def test_the_stream_follows_every_shard_and_is_in_place_once_each_one_is(
    ray_cluster: Any,
) -> None:
    # A ledger of three shards: each run's items go to its id's shard, and the service's one
    # stream reads all three feeds. Watched runs on every shard are kept whole.
    from agents.ray.ledger_actor import LedgerActor

    handles = tuple(LedgerActor.remote(None, MAX_FEED, 3) for _ in range(3))  # type: ignore[attr-defined]
    ledger = LedgerClient(handles)
    runs = {shard_of(r, 3): r for r in (f"run-{n}" for n in range(20))}
    assert sorted(runs) == [0, 1, 2]
    stream = FeedReader()
    try:
        stream.start(ledger)
        assert await stream.in_place(60)  # in its place on all three
        for run_id in runs.values():
            stream.watch(run_id)
            with stream.subscribe(run_id) as live:
                await ledger.open(run_id, None, RunStarted(agent="a"))
                await ledger.finish(run_id, RunFinished(agent="a", status=RunStatus.SUCCEEDED))
                await _until_finished(live)
            # Its events are on its shard's feed only.
            for shard, handle in enumerate(handles):
                items, _, _ = await handle.feed.remote(0, 0.0)
                assert ({r for r, _, _ in items} >= {run_id}) == (shard == shard_of(run_id, 3))
        assert all(stream.complete(r) for r in runs.values())
        assert await asyncio.gather(*(h.shards.remote() for h in handles)) == [3, 3, 3]
    finally:
        await stream.stop()
        for handle in handles:
            ray.kill(handle)


async def test_after_a_gap_the_stream_keeps_the_runs_it_watches_again(ray_cluster: Any) -> None:
    # A stream that fell behind by more than the feed keeps tells its followers to ask the
    # ledger, and drops what it kept (it has holes); its place is the feed's end all the same,
    # so a run watched from then on is kept whole again.
    from agents.ray.ledger_actor import LedgerActor

    handle = LedgerActor.remote()  # type: ignore[attr-defined]
    stream = FeedReader()
    try:
        with stream.subscribe("-") as news:
            stream.start(LedgerClient((handle,)))
            assert await asyncio.wait_for(news.get(), 60) is None  # in its place
            flood = [("-", ModelDelta(agent="a", invocation="i", step=1, text="x"))]
            await handle.emit_many.remote(seal(Batch(flood * (MAX_FEED + 1), sender="p", number=1)))
            assert await asyncio.wait_for(news.get(), 60) is None  # the gap, told first
        stream.watch("after")
        assert stream.complete("after")
    finally:
        await stream.stop()
        ray.kill(handle)


async def test_a_run_followed_before_it_starts_is_followed_without_asking_the_ledger(
    default_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Clients follow a run as soon as it is accepted, before it starts (here its start is held
    # until the follower is in place). The service keeps its events from then on: the follower
    # gets all of them from the stream, and the ledger is asked for none (a call per run).
    service, recording, followed = await held_service(
        default_engine, tmp_path, "early-follower", monkeypatch
    )
    engine = service.engine
    try:
        await asyncio.wait_for(service.events.ready.wait(), 120)
        asked: list[str] = []
        events = engine.ledger.events

        async def counted(run_id: str, *args: Any, **kwargs: Any) -> Any:
            asked.append(run_id)
            return await events(run_id, *args, **kwargs)

        monkeypatch.setattr(engine.ledger, "events", counted)
        subscribe = service.events.reader.subscribe

        @contextlib.contextmanager
        def noticed(run_id: str) -> Iterator[asyncio.Queue[News]]:
            with subscribe(run_id) as news:
                followed.set()
                yield news

        monkeypatch.setattr(service.events.reader, "subscribe", noticed)
        run, _ = await service.submit(Submission(task="calculate 2 + 2"))
        await asyncio.wait_for(recording.wait(), 60)

        async def seen() -> list[str]:
            return [item[1].type async for item in service.events.follow(run) if item is not None]

        kinds = await asyncio.wait_for(seen(), 60)
    finally:
        await service.stop()
        await service.store.close()
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert "agent_finished" in kinds
    assert asked == []


async def _until_finished(news: asyncio.Queue[News]) -> None:
    while True:
        item = await asyncio.wait_for(news.get(), 60)
        if item is not None and isinstance(item[1], RunFinished):
            return
