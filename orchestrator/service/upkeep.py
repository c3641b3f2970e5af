"""What a service instance does in the background for runs that outlive their service.

Runs whose service died (this instance before a restart, or another one sharing the store) are
recorded from what the ledger on Ray still holds of them and ended; leases are renewed; writes
kept while the store was unavailable are made; cancellations asked through other instances are
passed on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from agents.core.events import RunFinished
from agents.core.messages import RunStatus
from orchestrator.service.live_trace import interrupted_spans
from orchestrator.service.pending_writes import PendingWrites
from orchestrator.service.versions import Versions
from orchestrator.store import RunStore

__all__ = ["Orphans", "keep_leases"]

logger = logging.getLogger(__name__)


class Orphans:
    """Interrupted runs whose event logs are still open in the ledger."""

    def __init__(self, versions: Versions, store: RunStore) -> None:
        self._versions = versions
        self._store = store
        self._runs: list[tuple[str, str]] = []

    def add(self, run_ids: list[str], reason: str) -> None:
        """Runs marked interrupted in the store, for `reason`."""
        self._runs += [(run_id, reason) for run_id in run_ids]

    async def close(self) -> None:
        """Record what is left of each run, and end it (call once the agents are up).

        Its spans so far go to the store, its followers see `run_finished`, and the ledger
        forgets it. (What survives is what the ledger on Ray holds: a service that dies with its
        own local Ray instance takes its runs' events and spans with it.)
        """
        while self._runs:
            run_id, reason = self._runs.pop()
            try:
                final = RunFinished(status=RunStatus.INTERRUPTED, error=reason)
                # What its agents sent before the service died, and what was open then.
                finished, events = await self._versions.ledger.snapshot(run_id)
                if events:
                    spans = interrupted_spans(finished, [*events, final], reason)
                    await self._store.add_spans(run_id, spans)
                closed = await self._versions.ledger.finish(run_id, final)
                await self._store.add_events(run_id, closed.events)
            except Exception:
                logger.exception("could not close the event log of run %s", run_id)


async def keep_leases(
    *,
    store: RunStore,
    owner: str,
    lease_s: float,
    held: Callable[[], list[str]],
    pending_writes: PendingWrites,
    orphans: Orphans,
    ready: asyncio.Event,
    cancel: Callable[[str, str | None], object],
    let_go: Callable[[str], object],
    take_over: Callable[[], Awaitable[None]] | None = None,
    interrupt_lost: bool = True,
) -> None:
    """Renew this instance's leases, and act on what other instances left or asked (forever).

    Runs of instances that stopped renewing are resumed here (`take_over`), interrupted
    (`interrupt_lost`), or left for another instance; runs of this one that another took over
    meanwhile are stopped here (`let_go`); cancellations requested through other instances are
    honoured (`cancel`); kept writes are made once the store is back.
    """
    while True:
        try:
            await pending_writes.retry()
            for run_id in await store.leases.renew(owner, held()):
                logger.warning("run %s: taken over by another instance; stopping this copy", run_id)
                let_go(run_id)
            if take_over is not None:
                await take_over()
            reason = "the service instance running it stopped responding"
            lost = await store.leases.interrupt_expired(lease_s, reason) if interrupt_lost else []
            if lost:
                logger.warning("marked %d runs of lost instances interrupted", len(lost))
                orphans.add(lost, reason)
            if ready.is_set():
                await orphans.close()
            for run_id, who in await store.leases.cancel_requests(owner):
                cancel(run_id, who)
        except Exception:
            logger.exception("lease upkeep failed; retrying")
        await asyncio.sleep(lease_s / 3)
