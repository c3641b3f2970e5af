"""The desk of a run's waits for a person: the questions and approvals, and how each ended.

The first word on a wait counts. One `WaitDesk` per run, kept in its book (`agents.ledger.book`),
which announces what the desk says to announce: a wait opened the first time, and a resolution.
"""

from __future__ import annotations

import json
from typing import Any

from agents.core.events import ApprovalDecided, WaitOpened, WaitResolved
from agents.core.waits import Outcome, Resolution, Waiting

__all__ = ["WaitDesk"]


class WaitDesk:
    """A run's waits, by id (the `call_id` of the event that opened each, made unique)."""

    def __init__(self) -> None:
        self._waits: dict[str, WaitOpened] = {}
        self._resolutions: dict[str, dict[str, Any]] = {}
        self._version = 0

    @property
    def version(self) -> int:
        """A number that changes whenever the run's waits do."""
        return self._version

    def open(self, event: WaitOpened) -> tuple[str, WaitOpened | None]:
        """Register a wait; its id, and the event to announce (None: this wait is held already).

        The id is the event's `call_id`, made unique in the run (built-in models reuse call ids
        across agents). The same wait opened again (a resumed invocation asking at the same
        place, `record_key`) is the one held: it is asked once.
        """
        unique, n = event.call_id, 1
        while (held := self._waits.get(unique)) is not None:
            if held.record_key and (held.invocation, held.record_key) == (
                event.invocation,
                event.record_key,
            ):
                return unique, None
            n += 1
            unique = f"{event.call_id}-{n}"
        opened = event.model_copy(update={"call_id": unique})
        self._waits[unique] = opened
        self._version += 1
        return unique, opened

    def resolve(
        self, wait_id: str, resolution: Resolution, run_open: bool
    ) -> tuple[Outcome, dict[str, Any] | None, WaitResolved | None]:
        """Resolve a wait of the kind `resolution` is for: the first word counts.

        What happened, the resolution in force (the earlier one, if too late), and the event to
        announce. A run no longer open (`run_open` False) still knows its resolutions: a second
        word is "decided already", a first one is "unknown" (nothing waits any more).
        """
        opened = self._waits.get(wait_id)
        if opened is None or opened.kind != resolution.kind:
            return "unknown", None, None
        if wait_id in self._resolutions:
            return "already_decided", self._resolutions[wait_id], None
        if not run_open:
            return "unknown", None, None
        kept = self._resolutions[wait_id] = resolution.record()
        self._version += 1
        return "decided", kept, opened.resolved(wait_id, resolution)

    def recover(self, event: WaitOpened | WaitResolved) -> None:
        """Take up a wait, or its resolution, from the run's stored events."""
        if isinstance(event, WaitOpened):
            self._waits[event.call_id] = event
        else:
            self._resolutions[event.call_id] = _resolution(event).record()
        self._version += 1

    def get(self, wait_id: str) -> WaitOpened | None:
        """The wait (open or resolved) with this id."""
        return self._waits.get(wait_id)

    def resolution(self, wait_id: str) -> dict[str, Any] | None:
        """How a wait was resolved (`Resolution.record`); None while it waits."""
        return self._resolutions.get(wait_id)

    def waiting(self) -> list[WaitOpened]:
        """The open waits, oldest first."""
        return [w for wait_id, w in self._waits.items() if wait_id not in self._resolutions]

    def waits_for(self) -> Waiting:
        """What the run waits for from a person: an answer (first), a decision, or nothing."""
        kinds = {w.kind for w in self.waiting()}
        if "question" in kinds:
            return "input"
        return "approval" if kinds else None


def _resolution(event: WaitResolved) -> Resolution:
    """How a wait was resolved, from the event that said so."""
    if isinstance(event, ApprovalDecided):
        edited = json.loads(event.arguments) if event.arguments is not None else None
        return Resolution.decision(
            event.approved, event.message, who=event.who, arguments=edited, by=event.by
        )
    return Resolution.reply(getattr(event, "answer", ""), who=event.who, by=event.by)
