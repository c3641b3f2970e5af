"""The typed client of the run ledger's shards, for agents and the orchestrator alike."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from agents.core.events import Event, WaitOpened
from agents.core.limits import SpendCap
from agents.core.ports import EventSink, Ledger, Memory, RunReads, Waits
from agents.core.steps import Step, StepLog
from agents.ledger.shards import placement, shard_of
from agents.ray.outbox import EVENT_FLUSH_S, Outboxes
from agents.ray.wire import Closed, Commit, RunEnd, RunSettle, SpendCheck, WaitCall, seal, unseal
from tracing import SpanRecord

__all__ = ["EVENT_FLUSH_S", "LedgerClient"]


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _on_its_shard(
    port: Callable[Concatenate[Any, str, _P], Awaitable[_R]],
) -> Callable[Concatenate[LedgerClient, str, _P], Coroutine[Any, Any, _R]]:
    """The ledger call of a port method, made on the shard of its first argument.

    The argument is a run id, or a tenant. The call is typed and documented by the port, so the
    client does not write it out again.
    """
    name = port.__name__

    async def call(self: LedgerClient, key: str, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return cast("_R", await getattr(self._at(key), name).remote(key, *args, **kwargs))

    call.__name__ = call.__qualname__ = name
    call.__doc__ = port.__doc__
    return call


class LedgerClient:
    """A team's ledger (one `LedgerActor` per shard) as typed calls.

    The `RunRecord` the agents use (budget and caps, waits for a person, the step log, the
    event sink) and their `Memory`, and the run-level calls the orchestrator makes. Each call
    about a run goes to the run's shard (`agents.ledger.shards`). Events, spans and steps go
    out in batches through `outbox` (the agents' `EventSink`); a call that must come after them
    takes the run's shard's queued batch along.
    """

    def __init__(self, handles: tuple[Any, ...]) -> None:
        if not handles:
            raise ValueError("a ledger has at least one shard")
        self._handles = handles
        self.outbox = Outboxes(handles)

    @property
    def sink(self) -> EventSink:
        """Where agents' events and spans go: the outboxes, batched to the shards."""
        return self.outbox

    @property
    def handles(self) -> tuple[Any, ...]:
        """The shards' actor handles, in order (another version's agents are given them)."""
        return self._handles

    @property
    def shards(self) -> int:
        """How many shards the ledger has."""
        return len(self._handles)

    def _at(self, key: str) -> Any:
        """The shard of a run id (or of a spending scope, or a tenant)."""
        return self._handles[shard_of(key, len(self._handles))]

    # Calls made as they are on the shard of their first argument: each is the port method it
    # serves, which says what it does (`agents.core.ports`).
    tokens_left = _on_its_shard(Ledger.tokens_left)
    record_effect = _on_its_shard(Ledger.record_effect)  # (awaited: it must come first)
    await_resolution = _on_its_shard(Waits.await_resolution)
    resolve = _on_its_shard(Waits.resolve)
    recorded = _on_its_shard(StepLog.recorded)
    remember = _on_its_shard(Memory.remember)  # (a tenant's items: on the tenant's shard)
    recall = _on_its_shard(Memory.recall)
    forget = _on_its_shard(Memory.forget)
    waiting = _on_its_shard(RunReads.waiting)
    watch_waits = _on_its_shard(RunReads.watch_waits)
    effects = _on_its_shard(RunReads.effects)
    events = _on_its_shard(RunReads.events)
    snapshot = _on_its_shard(RunReads.snapshot)

    def record(self, run_id: str, step: Step) -> None:
        """Queue a step for the run's step log; it goes out with the next batch."""
        self.outbox.record(run_id, step)

    def close(self) -> None:
        """Send what is queued, and nothing after it (this process is leaving Ray)."""
        self.outbox.close()

    async def spend_check(self, run_id: str) -> tuple[str | None, list[tuple[str, str]]]:
        """Whether the run may make another model call under its caps, and its new warnings.

        What this process queued goes with the question (its replies' spending among it), so
        that the answer counts every call this process made before it.
        """
        call = SpendCheck(run_id, self.outbox.take_batch(run_id))
        found: tuple[str | None, list[tuple[str, str]]] = await self._at(run_id).spend_check.remote(
            seal(call)
        )
        return found

    async def spend_over(self, caps: tuple[SpendCap, ...]) -> str | None:
        """Why a new run under these caps would be refused now (a daily cap spent), or None."""
        # The shard that counts the scope's spending (its runs are there: `new_run_id`).
        said: str | None = await self._at(placement(caps) or "").spend_over.remote(caps)
        return said

    def charge(self, run_id: str, tokens: int, key: str) -> None:
        """Count tokens the run spent, once per `key` (sent without waiting)."""
        self._at(run_id).charge.remote(run_id, tokens, key)  # fire and forget; ordered per caller

    async def open_wait(self, run_id: str, event: WaitOpened, again: bool = False) -> str:
        """Register a wait for a person (announced unless `again`); its id in the run."""
        # The buffered events go in the same call, so that they come before this one.
        call = WaitCall(run_id, event, self.outbox.take_batch(run_id), again)
        wait_id: str = await self._at(run_id).open_wait.remote(seal(call))
        return wait_id

    async def commit(self, run_id: str, step: Step) -> bool:
        """Store a step and all that is queued before it; False if the run has moved on."""
        call = Commit(run_id, step, self.outbox.take_batch(run_id))
        stored: bool = await self._at(run_id).commit.remote(seal(call))
        return stored

    # The orchestrator's side -----------------------------------------------------------

    async def open(
        self,
        run_id: str,
        budget: int | None,
        first: Event,
        epoch: int = 0,
        record_of: str | None = None,
        live_from: tuple[str, str] | None = None,
        caps: tuple[SpendCap, ...] = (),
    ) -> None:
        """Start counting a run, with its first event (awaited: it comes before any agent's).

        `epoch` above 0: the run resumes; its recorded steps are loaded from the store.
        `record_of`: the run replays that run's steps (`live_from`: a fork from that step).
        `caps`: its spending caps.
        """
        await self._at(run_id).open.remote(run_id, budget, first, epoch, record_of, live_from, caps)

    async def settle(self, settle: RunSettle) -> list[SpanRecord]:
        """Wait (bounded) until the run's last items are in; its spans (see `RunSettle`)."""
        spans: list[SpanRecord] = await self._at(settle.run_id).settle.remote(seal(settle))
        return spans

    async def finish(
        self,
        run_id: str,
        final: Event,
        *,
        first: Event | None = None,
        settle: RunSettle | None = None,
        record: dict[str, Any] | None = None,
        spans_back: bool = True,
        returning: bool = True,
    ) -> Closed:
        """Add the run's last event and close it (see `RunEnd` for what each argument asks).

        `first`: the run's first event, when it was handed to the entry agent to send with its
        own (`RayDispatcher.dispatch`); recorded here if it never came.
        """
        end = RunEnd(run_id, final, settle, record, first, spans_back, returning)
        return unseal(await self._at(run_id).finish.remote(seal(end)), Closed)

    async def release(self, settle: RunSettle) -> None:
        """Stop counting a run that does not end here: its last items in and stored."""
        await self._at(settle.run_id).release.remote(seal(settle))

    async def feed(
        self, shard: int, cursor: int, wait_s: float
    ) -> tuple[list[tuple[str, int, Event]], int, bool]:
        """Every run's events after position `cursor` of a shard's feed (see the actor)."""
        found: tuple[list[tuple[str, int, Event]], int, bool] = await self._handles[
            shard
        ].feed.remote(cursor, wait_s)
        return found

    async def ping(self, timeout_s: float) -> None:
        """Raise unless every shard answers within `timeout_s`."""
        async with asyncio.timeout(timeout_s):
            await asyncio.gather(*(h.events.remote("-") for h in self._handles))
