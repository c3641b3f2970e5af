"""The run ledger on Ray: an async actor hosting `RunLedger` (its client: `ledger_client`).

Kept apart from `agents.ray.host` so that the ledger's worker process does not import litellm.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import ray

from agents.core.events import Event, RunStarted, WaitOpened
from agents.core.gc_policy import settle_after_start
from agents.core.limits import SpendCap
from agents.core.ports import RunState
from agents.core.steps import Step, kept_by_fork
from agents.core.waits import Outcome, Resolution, Waiting
from agents.ledger.book import RunLedger
from agents.ledger.feed import MAX_FEED
from agents.ledger.spend import Spent, utc_day
from agents.ledger.steps import StepBook
from agents.memory import MemoryItem, MemoryRefused
from agents.ray.handover import open_batch
from agents.ray.wire import (
    Batch,
    Closed,
    Commit,
    RunEnd,
    RunSettle,
    SpendCheck,
    WaitCall,
    seal,
    unseal,
)
from tracing import SpanRecord

if TYPE_CHECKING:
    from agents.memory.sql import MemoryItems

__all__ = ["LedgerActor"]

logger = logging.getLogger(__name__)

# Longest wait at a run's end for its last items (events and spans on their way from agent
# processes: each process sent them before its result; or, for a cancelled run, as it stopped).
SETTLE_WAIT_S = 5.0
# Longest wait for a process's earlier batch of events: an async actor may run one caller's
# calls out of order, and a streamed reply's pieces must reach followers in the order written.
# Past it (a batch lost with a restarted ledger) the batch goes on alone.
ORDER_WAIT_S = 0.5
# Runs a restarted ledger remembers having looked for in the store (`_take_up`).
MAX_LOOKED_UP = 10_000
# Batch numbers kept per process, and processes kept, to know a batch sent again (`_first_time`).
MAX_SEEN_BATCHES = 1024
MAX_SENDERS = 4096


@ray.remote(num_cpus=0)
class LedgerActor:
    """Hosts the `RunLedger` of one shard of a system: budgets, events and spans of its runs.

    An async actor, so that callers can wait here for news (events, spans) without polling.

    Args:
        store_url: the run store; when given, runs' steps and events are written there as
            they come (`agents.ledger.writer`), so that a run can resume after any crash.
        feed_events: events of every run kept for the services following it (`feed`).
        shards: how many shards the team's ledger has (this is one of them; the first one
            says how many to those who find it: `shards`).
    """

    def __init__(
        self, store_url: str | None = None, feed_events: int = MAX_FEED, shards: int = 1
    ) -> None:
        self._shards = shards
        self._writer = None
        self._memory: MemoryItems | None = None
        if store_url:
            from agents.ledger.writer import StoreWriter
            from agents.memory.sql import MemoryItems  # SQLAlchemy only where it is used

            self._writer = StoreWriter(store_url)
            self._memory = MemoryItems(self._writer.engine)
        self._ledger = RunLedger(
            on_event=self._writer.event if self._writer else None,
            on_spend=self._writer.spend if self._writer else None,
            on_spans=self._writer.spans_of if self._writer else None,
            max_feed=feed_events,
        )
        self._seeding: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._steps = StepBook()  # the open runs' step logs, and their effects started
        self._signals: dict[str, asyncio.Event] = {}
        self._fed = asyncio.Event()  # set (and replaced) whenever any run changes
        # Each agent process's next batch number, and a signal set (and replaced) per batch.
        self._next_batch: dict[str, int] = {}
        self._batched = asyncio.Event()
        # Each process's batch numbers seen lately: a call Ray makes again is not applied twice.
        self._seen: OrderedDict[str, OrderedDict[int, None]] = OrderedDict()
        # Restarted by Ray after it died: the runs in flight are taken up from the store as
        # they are next heard of (`_take_up`), and each process's batches go on from the
        # first one that comes.
        self._reborn = ray.get_runtime_context().was_current_actor_reconstructed
        self._looked_up: OrderedDict[str, asyncio.Task[None]] = OrderedDict()
        settle_after_start()  # what start-up made lives as long as the process

    def shards(self) -> int:
        """How many shards the team's ledger has (as the one who created this one said)."""
        return self._shards

    def _changed(self, run_id: str) -> None:
        signal = self._signals.pop(run_id, None)
        if signal is not None:
            signal.set()
        self._fed.set()
        self._fed = asyncio.Event()

    async def feed(
        self, cursor: int, wait_s: float
    ) -> tuple[list[tuple[str, int, Event]], int, bool]:
        """Every run's events after `cursor`, waiting up to `wait_s` for some (see `RunLedger`).

        A service reads all its runs' events with this one call, whatever it follows.
        """
        until = time.monotonic() + wait_s
        if cursor < 0:
            cursor = self._ledger.feed(cursor)[1]
        while True:
            items, position, missed = self._ledger.feed(cursor)
            if items or missed:
                return items, position, missed
            signal = self._fed
            try:
                async with asyncio.timeout(max(until - time.monotonic(), 0)):
                    await signal.wait()
            except TimeoutError:
                return [], position, False

    async def _take_up(self, run_id: str, starting: bool = False) -> None:
        """Take up a run in flight that this ledger, restarted, has not heard of: from the store.

        Its stored events, steps, waits and spans (`RunLedger.recover`), once; a run that is
        `starting` (its first event comes) or has nothing stored is new. Every call about one
        run awaits this first.
        """
        if not self._reborn or self._writer is None or starting:
            return
        if self._ledger.state(run_id) != "unknown":
            return
        task = self._looked_up.get(run_id)
        if task is None:
            task = self._looked_up[run_id] = asyncio.create_task(self._recover(run_id))
            while len(self._looked_up) > MAX_LOOKED_UP:
                self._looked_up.popitem(last=False)
        await asyncio.shield(task)

    async def _recover(self, run_id: str) -> None:
        assert self._writer is not None
        steps, top = await self._writer.load(run_id)
        if not steps and not top:
            return  # a new run, or one that never got here
        stored = await self._writer.events(run_id, 0)
        spans = await self._writer.spans(run_id)
        epoch = max((s.epoch for kept in steps.values() for s in kept.values()), default=0)
        self._steps.load(run_id, steps)
        self._ledger.recover(run_id, epoch, stored, spans)
        starts = [e for _, e in stored if isinstance(e, RunStarted)]
        if starts:  # its tenant's and key's day, from the store (its replies among them)
            await self._seed([c.scope for c in starts[-1].caps if c.daily])
        self._changed(run_id)
        logger.info(
            "run %s taken up after a restart: %d events, %d steps, %d spans",
            run_id, len(stored), self._steps.counted(run_id), len(spans),
        )  # fmt: skip

    async def _wait_for_change(self, run_id: str, until: float) -> bool:
        """Wait until the run changes or `until` (monotonic) passes; False on time-out."""
        signal = self._signals.setdefault(run_id, asyncio.Event())
        try:
            async with asyncio.timeout(max(until - time.monotonic(), 0)):
                await signal.wait()
        except TimeoutError:
            return False
        return True

    async def open(
        self,
        run_id: str,
        budget: int | None,
        first: Event | None = None,
        epoch: int = 0,
        record_of: str | None = None,
        live_from: tuple[str, str] | None = None,
        caps: tuple[SpendCap, ...] = (),
    ) -> None:
        """Start counting a run; `first` is its first event (before any agent's).

        `caps`: its spending caps (the daily ones' counts are read from the store first, the
        first time this ledger meets their tenant or key in a day).

        A run resumed (`epoch` above 0) gets its recorded steps back from the store, and its
        event ids go on from the last one stored. A replay (`record_of`) gets the steps of the
        run it replays; a fork from a step (`live_from`: an invocation and a model step) gets
        them without that invocation's steps from that step on.
        """
        if epoch or record_of:
            steps, top = await self._writer.load(run_id) if self._writer else ({}, 0)
            if record_of and self._writer is not None:  # its own steps (a fork's) come first
                recorded = (await self._writer.load(record_of))[0]
                for invocation, own in steps.items():
                    recorded.setdefault(invocation, {}).update(own)
                steps = recorded
            if live_from is not None:
                invocation, fork_at = live_from
                kept = steps.get(invocation, {})
                steps[invocation] = {k: s for k, s in kept.items() if kept_by_fork(k, fork_at)}
            self._steps.load(run_id, steps)
            self._ledger.resume(run_id, budget, epoch, top)
        else:
            self._ledger.open(run_id, budget)
        if caps:
            await self._seed([c.scope for c in caps if c.daily])
            tenant, who = "default", None
            if isinstance(first, RunStarted):
                tenant, who = first.tenant, first.submitted_by
            self._ledger.spend.open(run_id, tenant, who, caps)
        if first is not None:
            self._ledger.emit(run_id, first)
            self._changed(run_id)

    async def settle(self, sealed: bytes) -> list[SpanRecord]:
        """Wait until a run's last items are in, and give its spans (a sealed `RunSettle`)."""
        return await self._settle(unseal(sealed, RunSettle))

    async def _settle(self, settle: RunSettle) -> list[SpanRecord]:
        run_id = settle.run_id
        await self._take_up(run_id)
        until = time.monotonic() + SETTLE_WAIT_S
        while not self._ledger.settled(run_id, settle.sent, settle.traced):
            if not await self._wait_for_change(run_id, until):
                logger.warning("run %s: settled without all of its events and spans", run_id)
                break
        if settle.first is not None:
            self._ledger.open_with(run_id, settle.first)
        if settle.spans:
            self._ledger.keep_spans(run_id, settle.spans)
        self._changed(run_id)
        return self._ledger.spans(run_id) if settle.traced else []

    async def finish(self, sealed: bytes) -> bytes:
        """Close a run (a sealed `RunEnd`, which says how); the answer is a sealed `Closed`.

        Settled first, when the call asks for it. With a run store, the run's end (its row's
        values, `RunEnd.record`, and its spans) and its last events are written in one
        transaction, and those events go out (to the feed and to readers) once it is done:
        whoever sees `run_finished` finds the run recorded. The events the store still lacks
        (none, unless writing failed) come back.
        """
        end = unseal(sealed, RunEnd)
        run_id = end.run_id
        await self._take_up(run_id)
        if self._superseded(run_id, end.settle):
            return seal(Closed([], [], recorded=False, superseded=True))
        spans = await self._settle(end.settle) if end.settle is not None else []
        writer = self._writer
        if writer is not None and end.record is not None:
            writer.end(run_id, end.record, self._unwritten(run_id, spans))
        try:
            events = self._ledger.finish(
                run_id, end.final, end.first, end.returning, until_stored=writer is not None
            )
            self._steps.drop(run_id)
            stored = writer is not None and await writer.sync()
        finally:
            self._ledger.announce(run_id)
            self._changed(run_id)
        if stored:
            events = []
        recorded = stored and end.record is not None
        back = spans if end.spans_back or not recorded else []
        return seal(Closed(back, events, recorded))

    def _superseded(self, run_id: str, settle: RunSettle | None) -> bool:
        """Whether `settle` is of an older life of the run than the one it lives now.

        Its service paused past its lease, say, and another instance resumed the run: the run
        (its book here, its record) is the newer life's, and the older one may not end it.
        """
        if settle is None or settle.epoch is None:
            return False
        now = self._ledger.epoch(run_id)
        if settle.epoch >= now:
            return False
        logger.warning(
            "run %s: an end of its life %d refused (it lives %d)", run_id, settle.epoch, now
        )
        return True

    def _unwritten(self, run_id: str, spans: list[SpanRecord]) -> list[SpanRecord]:
        """The run's spans its end writes: those not sent to the store as they came.

        Or, when a batch the store could not take was given up during the run, all of them,
        and its events and steps again (the store keeps what it has: nothing is written twice).
        """
        assert self._writer is not None
        events = self._ledger.numbered(run_id)
        began = events[0][1].ts if events else 0.0
        if not self._writer.failed_at or self._writer.failed_at < began:
            return self._ledger.unpersisted(run_id, spans)
        for seq, event in events:
            self._writer.event(run_id, seq, event)
        for step in self._steps.of(run_id):
            self._writer.step(run_id, step)
        self._ledger.unpersisted(run_id, spans)
        return spans

    async def release(self, sealed: bytes) -> None:
        """Stop counting a run that does not end here (a sealed `RunSettle`).

        Its service stops, and an instance resumes it from its step log: its last items come
        in (bounded) and are stored; no end is recorded or announced.
        """
        settle = unseal(sealed, RunSettle)
        await self._take_up(settle.run_id)
        if self._superseded(settle.run_id, settle):
            return
        await self._settle(settle)
        self.close(settle.run_id)
        if self._writer is not None:
            await self._writer.sync()

    async def recorded(self, run_id: str, invocation: str) -> dict[str, Step]:
        """An invocation's steps recorded so far (in this life of the run or before), by key."""
        await self._take_up(run_id)
        return self._steps.recorded(run_id, invocation)

    def _keep(self, run_id: str, step: Step) -> bool:
        """Queue a step for the store, unless it belongs to an older life of its run."""
        if self._writer is None or step.epoch < self._ledger.epoch(run_id):
            return False
        self._writer.step(run_id, step)
        self._steps.keep(run_id, step)
        return True

    async def commit(self, sealed: bytes) -> bool:
        """Store a step and what its process sent before it (a sealed `Commit`).

        The barrier before an effect that must not be repeated: the step is stored when this
        returns True. A step of an older life of the run (resumed since) is refused: False.
        """
        call = unseal(sealed, Commit)
        await self._apply(call.earlier)
        await self._take_up(call.run_id)
        if self._writer is None:
            return call.step.epoch >= self._ledger.epoch(call.run_id)
        return self._keep(call.run_id, call.step) and await self._writer.sync()

    def close(self, run_id: str) -> None:
        """Stop counting the run; its events stay readable for a while."""
        self._ledger.close(run_id)
        self._steps.drop(run_id)
        self._changed(run_id)

    async def snapshot(self, run_id: str) -> tuple[list[SpanRecord], list[Event]]:
        """The run's spans sent so far and its events, without taking them."""
        await self._take_up(run_id)
        return self._ledger.snapshot(run_id)

    def tokens_left(self, run_id: str) -> int | None:
        """Tokens the run may still spend (None: no budget)."""
        return self._ledger.tokens_left(run_id)

    async def spend_check(self, sealed: bytes) -> tuple[str | None, list[tuple[str, str]]]:
        """Whether the run may make another model call, and its warnings not yet given.

        A sealed `SpendCheck`: the asking process's earlier batch is applied first (its
        replies' spending counted). As `SpendMeter.check` says: None, or the cap it reached.
        """
        call = unseal(sealed, SpendCheck)
        await self._apply(call.earlier)
        return self._ledger.spend_check(call.run_id)

    async def spend_over(self, caps: tuple[SpendCap, ...]) -> str | None:
        """Why a new run under these caps would be refused now (a daily cap spent), or None."""
        await self._seed([c.scope for c in caps if c.daily])
        return self._ledger.spend.over(caps)

    async def _seed(self, scopes: list[str]) -> None:
        """Read today's spending of these scopes from the store, where this ledger has not."""
        day = utc_day()
        waits = []
        for scope in self._ledger.spend.unseeded(scopes, day):
            task = self._seeding.get((day, scope))
            if task is None:  # one read per scope, however many runs open meanwhile
                task = self._seeding[(day, scope)] = asyncio.create_task(self._read(day, scope))
            waits.append(task)
        if waits:
            await asyncio.gather(*waits)

    async def _read(self, day: str, scope: str) -> None:
        try:
            spent = Spent()
            if self._writer is not None:
                await self._writer.sync()  # the replies counted so far are in the sums read
                spent = await self._writer.spent(day, scope)
            self._ledger.spend.seed(day, scope, spent)
        finally:
            self._seeding.pop((day, scope), None)

    async def remember(
        self, tenant: str, namespace: str, key: str, value: Any, written_by: str | None
    ) -> MemoryItem:
        """Write a long-term memory item to the store (see `agents.memory`)."""
        item, _ = await self._memory_items().put(tenant, namespace, key, value, written_by)
        return item

    async def recall(self, tenant: str, namespace: str, query: str, limit: int) -> list[MemoryItem]:
        """The long-term memory items of a namespace (and under it) that best match `query`."""
        return await self._memory_items().search(tenant, namespace, query, limit)

    async def forget(self, tenant: str, namespace: str, key: str) -> bool:
        """Remove a long-term memory item; whether there was one."""
        return await self._memory_items().delete(tenant, namespace, key)

    def _memory_items(self) -> MemoryItems:
        if self._memory is None:
            raise MemoryRefused("long-term memory is kept in the run store, and there is none")
        return self._memory

    def charge(self, run_id: str, tokens: int, key: str = "") -> None:
        """Count tokens the run spent, once per `key` (Ray may make the call again)."""
        self._ledger.charge(run_id, tokens, key)

    def record_effect(self, run_id: str, attempts: tuple[str, ...], tool: str) -> None:
        """Note that `tool` (run at most once) is about to run under these delegation attempts."""
        self._steps.record_effect(run_id, attempts, tool)

    def effects(self, run_id: str, attempt: str) -> list[str]:
        """The at-most-once tools started under a delegation attempt."""
        return self._steps.effects(run_id, attempt)

    async def open_wait(self, sealed: bytes) -> str:
        """Register a wait for a person, after its process's earlier events (a sealed `WaitCall`).

        Returns the wait's id in the run.
        """
        call = unseal(sealed, WaitCall)
        await self._apply(call.earlier)
        await self._take_up(call.run_id)
        wait_id = self._ledger.open_wait(call.run_id, call.event, call.again)
        self._changed(call.run_id)
        return wait_id

    async def resolve(
        self, run_id: str, wait_id: str, resolution: Resolution
    ) -> tuple[Outcome, dict[str, Any] | None]:
        """Resolve a wait; the first word counts.

        With a step log, the resolution is stored before this returns: a run resumed after a
        crash does not ask again, and a call it approved runs at most once.
        """
        await self._take_up(run_id)
        outcome = self._ledger.resolve(run_id, wait_id, resolution)
        self._changed(run_id)
        opened = self._ledger.desk(run_id).get(wait_id)
        if outcome[0] == "decided" and opened is not None and opened.record_key:
            step = Step(
                invocation=opened.invocation or "",
                key=opened.record_key,
                kind="answer" if opened.kind == "question" else "approval",
                data={**(outcome[1] or {}), "at": time.time()},
                epoch=self._ledger.epoch(run_id),
            )
            if self._keep(run_id, step) and self._writer is not None:
                await self._writer.sync()
        return outcome

    async def waiting(self, run_id: str) -> list[WaitOpened]:
        """The run's open waits, oldest first."""
        await self._take_up(run_id)
        return self._ledger.waiting(run_id)

    async def await_resolution(
        self, run_id: str, wait_id: str, wait_s: float
    ) -> dict[str, Any] | None:
        """How a wait was resolved, waiting up to `wait_s` (None: it still waits)."""
        await self._take_up(run_id)
        until = time.monotonic() + wait_s
        while True:
            resolution = self._ledger.desk(run_id).resolution(wait_id)
            if resolution is not None or not await self._wait_for_change(run_id, until):
                return resolution

    async def watch_waits(
        self, run_id: str, seen: int, wait_s: float
    ) -> tuple[int, Waiting, RunState]:
        """Wait up to `wait_s` for the run's waits to change from version `seen`.

        Returns the version, what the run waits for from a person, and the run's state.
        """
        await self._take_up(run_id)
        until = time.monotonic() + wait_s
        while True:
            desk, state = self._ledger.desk(run_id), self._ledger.state(run_id)
            if (
                desk.version != seen
                or state != "open"
                or not await self._wait_for_change(run_id, until)
            ):
                return desk.version, desk.waits_for() if state == "open" else None, state

    async def emit_many(self, sealed: bytes) -> None:
        """Record a batch of events, numbered span shipments and steps (a sealed `Batch`).

        Answered once the batch is stored (with a run store): until then its sender's call is
        open, and Ray makes it again to the ledger it restarts if this one dies. So a batch is
        never lost between its answer and the store.
        """
        await self._apply(unseal(sealed, Batch))
        if self._writer is not None:
            await self._writer.sync()

    async def _apply(self, batch: Batch) -> None:
        """Record a batch from one agent process.

        A numbered batch that overtook an earlier one waits for it (up to `ORDER_WAIT_S`).
        Steps of an older life of their run (resumed since) are dropped.
        """
        sender = batch.sender
        if sender and batch.number and not self._first_time(sender, batch.number):
            return  # Ray made the call again (its reply was lost): applied already
        # Handovers from other processes, taken over by the sender (`agents.ray.handover`).
        if self._reborn:  # (before the handovers' first sight: it opens their runs' books)
            await self._take_up_batch(batch)
        opened = open_batch(
            batch.events, batch.spans, batch.steps, sender, self._ledger.first_sight
        )
        for run_id, event, _ in opened.events:  # (the caps do not wait for the order)
            self._ledger.count_on_arrival(run_id, event)
        if sender and batch.number:
            await self._in_turn(sender, batch.number)
        for run_id, step in opened.steps:
            self._keep(run_id, step)
        changed = set()
        for run_id, event, origin in opened.events:
            self._ledger.emit(run_id, event, origin)
            changed.add(run_id)
        for run_id, spans, origin in opened.spans:
            self._ledger.keep_spans(run_id, spans, origin)
            changed.add(run_id)
        for run_id in changed:
            self._changed(run_id)

    def _first_time(self, sender: str, number: int) -> bool:
        """Whether a process's batch is new here (the numbers each one sent lately are kept)."""
        seen = self._seen.get(sender)
        if seen is None:
            seen = self._seen[sender] = OrderedDict()
            while len(self._seen) > MAX_SENDERS:
                self._seen.popitem(last=False)
        else:
            self._seen.move_to_end(sender)
        if number in seen:
            return False
        seen[number] = None
        while len(seen) > MAX_SEEN_BATCHES:
            seen.popitem(last=False)
        return True

    async def _take_up_batch(self, batch: Batch) -> None:
        """Take up the runs of a batch (`_take_up`): those whose first event it is are new."""
        peek = open_batch(batch.events, batch.spans, batch.steps, batch.sender, lambda r, k: True)
        starting = {r for r, e, _ in peek.events if isinstance(e, RunStarted)}
        runs = {r for r, _, _ in peek.events} | {r for r, _, _ in peek.spans}
        runs |= {r for r, _ in peek.steps}
        for run_id in runs:
            await self._take_up(run_id, starting=run_id in starting)

    async def _in_turn(self, sender: str, batch: int) -> None:
        """Wait until the sender's batches before `batch` are in (or `ORDER_WAIT_S` passed)."""
        if self._reborn and sender not in self._next_batch:  # its earlier ones went with the dead
            self._next_batch[sender] = batch
        until = time.monotonic() + ORDER_WAIT_S
        while self._next_batch.get(sender, 1) < batch:
            left = until - time.monotonic()
            if left <= 0:
                logger.warning("batch %d of %s came without the one before it", batch, sender)
                break
            signal = self._batched
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await signal.wait()
        self._next_batch[sender] = max(self._next_batch.get(sender, 1), batch + 1)
        self._batched.set()
        self._batched = asyncio.Event()

    async def events(
        self, run_id: str, after: int = 0, wait_s: float = 0.0
    ) -> tuple[list[tuple[int, Event]], RunState]:
        """The run's events with ids above `after`, and whether the run is open, closed or unknown.

        With `wait_s`, wait that long for a first new event (not once closed).
        """
        until = time.monotonic() + wait_s
        while True:
            found = self._ledger.numbered(run_id, after)
            state = self._ledger.state(run_id)
            if found or state == "closed" or not await self._wait_for_change(run_id, until):
                if found and found[0][0] > after + 1 and self._writer is not None:
                    # A resumed run: its events from before are in the store.
                    stored = await self._writer.events(run_id, after)
                    found = [(n, e) for n, e in stored if n < found[0][0]] + found
                return found, state
