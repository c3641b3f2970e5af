"""One stream of every run's events per service, from the ledger, fanned out to its followers.

A service follows many runs at once (SSE clients, `baton run --server`, MCP callers). Instead of
a long-poll of the ledger per followed run, one task per shard of the ledger here long-polls the
shard's feed of all its runs' events and hands each event to the followers of its run.

It also keeps the events of the runs this service started (`watch`) since it took its place in
the feed: their followers get those at once, with no call to the ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator

from agents.core.events import Event, RunFinished
from agents.ray.ledger_client import LedgerClient

__all__ = ["FeedReader", "News"]

logger = logging.getLogger(__name__)

# One follower's news: an event with its id in the run, or None: "you may have missed some, ask
# the ledger" (the stream fell behind, or the ledger restarted).
News = tuple[int, Event] | None

# How long one long-poll of the feed waits for news before it asks again.
_POLL_S = 5.0
# Finished runs whose events are kept for followers who come late (then: the ledger, the store).
_KEEP_ENDED = 256
# Watched runs kept at most (one whose end never came here is dropped, oldest first).
_KEEP_WATCHED = 10_000


class FeedReader:
    """The service's one reader of the ledger's feeds (one per shard)."""

    def __init__(self) -> None:
        self._followers: dict[str, set[asyncio.Queue[News]]] = {}
        self._tasks: list[asyncio.Task[None]] = []  # one per shard
        self._placed = asyncio.Event()  # set: every event from now on comes through here
        self._in_place: set[int] = set()  # the shards whose feed has this stream's place
        # Every event so far of each watched run, and the watched runs that ended, oldest first.
        self._history: dict[str, list[tuple[int, Event]]] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()
        # Sees every stored event of every run as it comes (the service's metrics).
        self.on_event: Callable[[str, Event], None] | None = None

    @property
    def followers(self) -> int:
        """How many followers have a run's news coming now."""
        return sum(len(queues) for queues in self._followers.values())

    def start(self, ledger: LedgerClient) -> None:
        """Start reading every shard's feed (once the ledger is up)."""
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [
                loop.create_task(self._pump(ledger, shard, ledger.shards))
                for shard in range(ledger.shards)
            ]

    async def stop(self) -> None:
        """Stop reading the feeds."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        self._tasks = []

    def watch(self, run_id: str) -> None:
        """Keep every event of a run about to start (unless the stream is not in place yet).

        A run that starts again (resumed) is kept from now on: what came before is the ledger's.
        """
        if self._placed.is_set():
            self._ended.pop(run_id, None)
            self._history.pop(run_id, None)
            self._history[run_id] = []
            if len(self._history) > _KEEP_WATCHED:
                self._history.pop(next(iter(self._history)))

    async def in_place(self, timeout_s: float) -> bool:
        """Wait (at most `timeout_s`) until the stream has its place in the feed."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._placed.wait()
        return self._placed.is_set()

    def complete(self, run_id: str) -> bool:
        """Whether a subscriber of the run gets all its events so far with its first news."""
        return run_id in self._history

    @contextlib.contextmanager
    def subscribe(self, run_id: str) -> Iterator[asyncio.Queue[News]]:
        """The run's news from now on, for as long as the block lasts.

        A watched run's events so far come first (see `complete`).
        """
        queue: asyncio.Queue[News] = asyncio.Queue()
        for item in self._history.get(run_id, ()):
            queue.put_nowait(item)
        self._followers.setdefault(run_id, set()).add(queue)
        try:
            yield queue
        finally:
            followers = self._followers.get(run_id)
            if followers is not None:
                followers.discard(queue)
                if not followers:
                    del self._followers[run_id]

    def _everyone(self, news: News) -> None:
        # Something was missed (or may have been): what was kept may have holes.
        self._placed.clear()  # (until the shard that missed it is in place again: `_place`)
        self._history.clear()
        self._ended.clear()
        for followers in self._followers.values():
            for queue in followers:
                queue.put_nowait(news)

    def _place(self, shard: int, shards: int) -> None:
        """The shard's feed has this stream's place: with every shard's, no event passes by."""
        self._in_place.add(shard)
        if len(self._in_place) == shards:
            self._placed.set()

    async def _pump(self, ledger: LedgerClient, shard: int, shards: int) -> None:
        cursor = -1  # from now on
        pause = 0.05
        while True:
            try:
                if cursor < 0:
                    # Where the feed is now, at once. A follower that asked the ledger before
                    # this point would miss what came in between (until a later event showed
                    # the gap: seconds, for a run in a long tool call), so every follower asks
                    # again once the stream has its place.
                    _, cursor, _ = await ledger.feed(shard, cursor, 0.0)
                    self._everyone(None)
                    self._place(shard, shards)
                items, cursor, gap = await ledger.feed(shard, cursor, _POLL_S)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the shard restarting: followers ask it themselves
                logger.warning("the ledger's event feed failed (%s); reading it again", exc)
                self._in_place.discard(shard)
                self._everyone(None)
                cursor = -1
                await asyncio.sleep(pause)
                pause = min(pause * 2, 2.0)
                continue
            pause = 0.05
            if gap:  # what was kept has holes; from here on the stream has every event again
                self._everyone(None)
                self._place(shard, shards)
            for run_id, seq, event in items:
                if seq and self.on_event is not None:
                    self.on_event(run_id, event)
                for queue in self._followers.get(run_id, ()):
                    queue.put_nowait((seq, event))
                if seq and run_id in self._history:
                    self._keep(run_id, seq, event)

    def _keep(self, run_id: str, seq: int, event: Event) -> None:
        self._history[run_id].append((seq, event))
        if isinstance(event, RunFinished):
            self._ended[run_id] = None
            while len(self._ended) > _KEEP_ENDED:
                self._history.pop(self._ended.popitem(last=False)[0], None)
