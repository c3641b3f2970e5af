"""Writes to the run store that survive an outage of the store.

A run that ends while the store is unreachable (PostgreSQL restarting, SQLite locked past its
timeout) must not lose its record: the write is kept, in order, and made again once the store
answers. Writes are whole transactions, so a write made twice is refused by the store's keys
(`IntegrityError`) and then dropped as done. A write the store refuses for what it holds is not
an outage: it is said at once and not kept (its `instead`, if any, is made: a run whose record
is refused is recorded failed, with why), and the writes after it are not held behind it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable

from sqlalchemy.exc import IntegrityError

from agents.core.store_faults import store_unavailable

__all__ = ["MAX_PENDING_WRITES", "PendingWrites"]

logger = logging.getLogger(__name__)

# Beyond this many kept writes the oldest are given up (and said so): memory stays bounded.
MAX_PENDING_WRITES = 10_000

Write = Callable[[], Awaitable[None]]


class PendingWrites:
    """Makes store writes now, or later if the store cannot take them now."""

    def __init__(self) -> None:
        self._pending: deque[tuple[str, Write]] = deque()

    @property
    def pending(self) -> int:
        """Writes kept for later."""
        return len(self._pending)

    async def write(self, what: str, write: Write, instead: Write | None = None) -> None:
        """Make `write` now (after any kept ones), or keep it; `what` names it in logs.

        `instead`: what to write if the store refuses this write for what it holds.
        """
        if not self._pending:
            try:
                await write()
                return
            except IntegrityError:
                return  # made already
            except Exception as exc:
                if not store_unavailable(exc):
                    await self._refused(what, exc, instead)
                    return
                logger.warning("the run store is unavailable (%s): %s kept for later", exc, what)
        self._keep(what, write)

    async def _refused(self, what: str, exc: Exception, instead: Write | None) -> None:
        cause = str(getattr(exc, "orig", None) or exc).splitlines()[0][:300]
        logger.error("the run store refused %s: %s", what, cause)
        if instead is not None:
            try:
                await instead()
            except Exception:
                logger.exception("the run store refused what stands for %s too", what)

    async def retry(self) -> int:
        """Make the kept writes in order, until one fails; return how many are left."""
        while self._pending:
            what, write = self._pending[0]
            try:
                await write()
            except IntegrityError:
                pass  # made already
            except Exception as exc:
                if store_unavailable(exc):
                    return len(self._pending)
                await self._refused(what, exc, None)
            self._pending.popleft()
            logger.info("recorded %s, kept while the run store was unavailable", what)
        return 0

    def _keep(self, what: str, write: Write) -> None:
        if len(self._pending) >= MAX_PENDING_WRITES:
            lost, _ = self._pending.popleft()
            logger.error("gave up recording %s: the run store was unavailable too long", lost)
        self._pending.append((what, write))
