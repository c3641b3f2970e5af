"""The feed: every run's events of a ledger shard, in the order they went out, bounded.

A service follows all the runs it serves with one cursor per shard (`EventFeed.read`), instead of
one wait per run; what it missed (it fell behind the bound, or the shard is new) it says, and the
service reads those runs' events from their books or the store.
"""

from __future__ import annotations

import itertools
from collections import deque

from agents.core.events import Event

__all__ = ["MAX_FEED", "EventFeed"]

# Events of all runs kept for the services' one stream each.
MAX_FEED = 50_000


class EventFeed:
    """The newest `max_events` events of every run, each as (run, id, event), oldest first."""

    def __init__(self, max_events: int = MAX_FEED) -> None:
        self._items: deque[tuple[str, int, Event]] = deque(maxlen=max_events)
        self._fed = 0  # events ever put: the position of the newest

    @property
    def position(self) -> int:
        """The position of the newest event (how many were ever put)."""
        return self._fed

    def put(self, run_id: str, seq: int, event: Event) -> None:
        """Add a run's event (`seq` 0: not stored, such as streamed text)."""
        self._fed += 1
        self._items.append((run_id, seq, event))

    def read(self, cursor: int) -> tuple[list[tuple[str, int, Event]], int, bool]:
        """The events after position `cursor`, the new position, and whether some were missed.

        Missed: the caller fell behind by more than the feed keeps, or `cursor` is a position of
        a feed before this one (the shard restarted). A negative `cursor` means "from now on".
        """
        if cursor < 0:
            return [], self._fed, False
        if cursor > self._fed:
            return [], self._fed, True
        behind = self._fed - cursor
        kept = min(behind, len(self._items))
        # From the right end: skipping to a place from the left walks the whole (full) deque.
        items = list(itertools.islice(reversed(self._items), kept))
        items.reverse()
        return items, self._fed, behind > kept
