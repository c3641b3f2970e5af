"""A run's progress events as they happen, for every follower (SSE, `baton run`, MCP).

While a run is in flight its events come from the system's ledger (shared by every service
instance); once it is finished and gone from there, from the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from agents.core.events import Event, RunFinished
from orchestrator.engine import Engine
from orchestrator.store import RunStore, StoredRun

__all__ = ["EventFeed"]

# A finished run whose event log the ledger still holds open this long after the end was
# left open by an instance that died: the store has its events.
_STALE_S = 5.0


@dataclass
class EventFeed:
    """Follows runs' events; `ready` is set once the agents (and so the ledger) are up."""

    engine: Engine
    store: RunStore
    ready: asyncio.Event
    heartbeat_s: float

    async def follow(
        self, run: StoredRun, after: int = 0
    ) -> AsyncIterator[tuple[int, Event] | None]:
        """The run's events with ids above `after`, as they happen, ending with `run_finished`.

        `None` marks a quiet heartbeat period.
        """
        run_id, last = run.id, after
        while True:
            if not self.ready.is_set():  # no ledger to read yet (or ever): only the store
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.ready.wait(), self.heartbeat_s)
                if not self.ready.is_set():
                    stored = await self.store.get(run_id)
                    if stored is None or stored.finished:
                        if stored is not None:
                            async for item in self._stored(stored, last):
                                yield item
                        return
                    yield None
                    continue
            found, state = await self.engine.ledger.events(run_id, last, self.heartbeat_s)
            for seq, event in found:
                yield seq, event
                last = seq
                if isinstance(event, RunFinished):
                    return
            if state == "closed" and not found:
                return
            if not found:
                stored = await self.store.get(run_id)
                if stored is None:
                    return
                # Gone from the ledger, or left open there by an instance that died: the
                # store has the rest.
                if stored.finished and (state == "unknown" or _long_ago(stored.finished_at)):
                    async for item in self._stored(stored, last):
                        yield item
                    return
                yield None

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


def _long_ago(stamp: float | None) -> bool:
    return stamp is not None and time.time() - stamp > _STALE_S
