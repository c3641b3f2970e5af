"""A run's progress events as they happen, for every follower (SSE, `baton run`, MCP).

While a run is in flight its events come from the system's ledger (shared by every service
instance) through the service's one `FeedReader`; once it is finished and gone from there, from
the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Collection
from dataclasses import dataclass, field
from typing import Literal

from agents.core.events import Event, RunFinished
from agents.core.ports import RunState
from agents.core.store_faults import store_unavailable
from orchestrator.service.feed_reader import FeedReader, News
from orchestrator.service.versions import Versions
from orchestrator.store import RunStore, StoredRun

__all__ = ["RunEvents"]

# A finished run whose event log the ledger still holds open this long after the end was
# left open by an instance that died: the store has its events.
_STALE_S = 5.0


@dataclass
class RunEvents:
    """Follows runs' events; `ready` is set once the agents (and so the ledger) are up."""

    versions: Versions  # (their ledger, which every version's runs share)
    store: RunStore
    ready: asyncio.Event
    heartbeat_s: float
    reader: FeedReader = field(default_factory=FeedReader)

    async def follow(
        self, run: StoredRun, after: int = 0
    ) -> AsyncGenerator[tuple[int, Event] | None]:
        """The run's events with ids above `after`, as they happen, ending with `run_finished`.

        `None` marks a quiet heartbeat period. Events that are not stored (`model_delta`, id 0)
        come only to those following when they happen.
        """
        last = after
        async for item in self._until_ready(run.id, after):
            yield item
            last = item[0] if item is not None else last
        if self.ready.is_set():
            async for item in self._live(run, last):
                yield item

    async def _until_ready(self, run_id: str, last: int) -> AsyncIterator[tuple[int, Event] | None]:
        """Before the agents (and so the ledger) are up: heartbeats, or the store's record."""
        while not self.ready.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.heartbeat_s):
                    await self.ready.wait()
            if not self.ready.is_set():
                stored = await self.store.get(run_id)
                if stored is None or stored.finished:
                    if stored is not None:
                        async for item in self._stored(stored, last):
                            yield item
                    return
                yield None

    async def _live(self, run: StoredRun, last: int) -> AsyncIterator[tuple[int, Event] | None]:
        """From the service's one stream, asking the ledger itself only to fill a gap."""
        run_id = run.id
        known: StoredRun | None = run  # read just now: the first look needs no other
        self.reader.start(self.versions.ledger)  # once, for every follower of this service
        # Subscribed before the ledger is asked, so that nothing falls between the two (what
        # comes twice is told apart by its id).
        with self.reader.subscribe(run_id) as news:
            # A run this service started has all its events so far in `news` already.
            ask, quiet = not self.reader.complete(run_id), False
            while True:
                if ask:  # what the ledger has past `last`: at first, after a gap, when quiet
                    found, state = await self.versions.ledger.events(run_id, last)
                    for seq, event in found:
                        yield seq, event
                        last = seq
                        if isinstance(event, RunFinished):
                            return
                    if not found:
                        rest = await self._over(run_id, state, last, known)
                        if rest is not None:
                            async for item in rest:
                                yield item
                            return
                        if quiet:
                            yield None
                known = None
                got = await self._next(news, last)
                ask, quiet = not isinstance(got, tuple), got == "quiet"
                if isinstance(got, tuple):
                    yield got
                    last = max(last, got[0])
                    if isinstance(got[1], RunFinished):
                        return

    async def _next(
        self, news: asyncio.Queue[News], last: int
    ) -> tuple[int, Event] | Literal["ask", "quiet"]:
        """The next new event of the run, or: ask the ledger (a gap), or a quiet period."""
        while True:
            try:
                async with asyncio.timeout(self.heartbeat_s):
                    item = await news.get()
            except TimeoutError:
                return "quiet"
            if item is None or item[0] > last + 1:  # missed some: the ledger has them
                return "ask"
            if item[0] > last or not item[0]:  # new, or not stored (streamed text)
                return item

    async def _over(
        self, run_id: str, state: RunState, last: int, known: StoredRun | None
    ) -> AsyncIterator[tuple[int, Event]] | None:
        """If the ledger has nothing more for the run: the rest, from the store (None: wait)."""
        if state == "closed":
            return _nothing()
        try:
            stored = known or await self.store.get(run_id)
        except Exception as exc:
            if not store_unavailable(exc):
                raise
            return None  # the store is away: go on with what the ledger says

        if stored is None:
            return _nothing()
        # Gone from the ledger, or left open there by an instance that died: the store has
        # the rest.
        if stored.finished and (state == "unknown" or _long_ago(stored.finished_at)):
            return self._stored(stored, last)
        return None

    async def stored_of(self, run: StoredRun, types: Collection[str]) -> list[tuple[int, Event]]:
        """The run's stored events of these types (`input_requested`, ...), in order."""
        return await self.store.events_of(run.id, types)

    async def close(self) -> None:
        """Stop reading the ledger's stream."""
        await self.reader.stop()

    async def _stored(self, run: StoredRun, after: int) -> AsyncIterator[tuple[int, Event]]:
        last = after
        for seq, event in await self.store.events(run.id, after):
            yield seq, event
            last = seq
            if isinstance(event, RunFinished):
                return
        # Interrupted runs have no stored events: say how the run ended all the same.
        yield (
            last + 1,
            RunFinished(
                agent=run.entry_agent or "",
                status=run.status,
                output=run.output,
                error=run.error,
                duration_s=run.duration_s,
            ),
        )


async def _nothing() -> AsyncIterator[tuple[int, Event]]:
    return
    yield


def _long_ago(stamp: float | None) -> bool:
    return stamp is not None and time.time() - stamp > _STALE_S
