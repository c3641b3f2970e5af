"""The desk of waits for a person: what a system's runs wait for, and the words that end them.

Calls to approve and questions to answer are one mechanism (`agents.core.waits`), kept in the
system's ledger (shared by every instance); the run's stored status follows them
(`waiting_for_approval`, `input_required`). Every door (HTTP, A2A, MCP, the terminal) lists and
resolves waits here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, TypeVar

from agents.core.events import ApprovalRequested, WaitOpened
from agents.core.json_schema import value_problems
from agents.core.storable import nul_refusal
from agents.core.waits import Resolution, WaitKind
from orchestrator.errors import (
    InvalidArguments,
    NotReady,
    ServiceError,
    WaitClosed,
    WaitNotFound,
)
from orchestrator.service.versions import Versions
from orchestrator.store import RunStore, StoredRun

__all__ = ["Desk"]

W = TypeVar("W", bound=WaitOpened)

# What a resolution's answer names its wait by, per kind (the HTTP API's field).
_ID_FIELD: dict[WaitKind, str] = {"approval": "call_id", "question": "question_id"}


@dataclass
class Desk:
    """The waits of a system's runs, and their runs' stored status."""

    versions: Versions  # (their ledger, which every version's runs share)
    store: RunStore
    ready: asyncio.Event
    heartbeat_s: float

    async def waiting(self, run: StoredRun, kind: type[W]) -> list[W]:
        """The run's open waits of a kind (`ApprovalRequested`, `InputRequested`), oldest first."""
        if run.finished or not self.ready.is_set():
            return []
        return [w for w in await self.versions.ledger.waiting(run.id) if isinstance(w, kind)]

    async def resolve(
        self, run: StoredRun, resolution: Resolution, wait_id: str | None = None
    ) -> dict[str, Any]:
        """End a wait of the run (whichever instance runs it) with a person's word or expiry.

        `wait_id` names it; a question may go unnamed when the run asks only one. The first
        word counts. Returns the resolution in force, with the wait's id.

        Raises:
            WaitClosed: the run is over, the wait was resolved already, or the run asks no
                question (or several, and none was named).
            WaitNotFound: no such wait of this kind in the run.
            InvalidArguments: an approval's edited arguments do not fit the tool's schema
                (the call still waits).
            NotReady: the agents are starting.
        """
        kind = resolution.kind
        if run.finished:
            raise WaitClosed(kind, f"run {run.id!r} is {run.status}", run_id=run.id)
        if not self.ready.is_set():
            raise NotReady("the agents are starting")
        if refusal := nul_refusal(resolution.answer, "the answer"):  # whichever door it came
            raise ServiceError(refusal)
        if wait_id is None:
            wait_id = await self._only(run, kind)
        if resolution.approved and resolution.arguments is not None:
            await self._fits(run, wait_id, resolution.arguments)
        outcome, kept = await self.versions.ledger.resolve(run.id, wait_id, resolution)
        if outcome == "unknown":
            raise WaitNotFound(kind, run.id, wait_id)
        if outcome == "already_decided":
            what = "decided" if kind == "approval" else "answered"
            raise WaitClosed(
                kind,
                f"{'call' if kind == 'approval' else 'question'} {wait_id!r} was {what} already",
                **{_ID_FIELD[kind]: wait_id, "resolution": kept},
            )
        assert kept is not None
        # Said at once (the tracker would say it a moment later): a client reading the run
        # right after its word sees it working.
        _, now, _ = await self.versions.ledger.watch_waits(run.id, -1, 0)
        await self.store.set_waiting(run.id, now)
        return {_ID_FIELD[kind]: wait_id, **kept}

    async def _fits(self, run: StoredRun, call_id: str, arguments: dict[str, Any]) -> None:
        """Refuse an edit of a waiting call's arguments that its tool's schema does not take."""
        for wait in await self.versions.ledger.waiting(run.id):
            if isinstance(wait, ApprovalRequested) and wait.call_id == call_id and wait.parameters:
                if problems := value_problems(wait.parameters, arguments):
                    raise InvalidArguments(call_id, wait.tool, problems)

    async def _only(self, run: StoredRun, kind: WaitKind) -> str:
        """The one wait of `kind` the run has open (a question answered without its id)."""
        waiting = [w for w in await self.versions.ledger.waiting(run.id) if w.kind == kind]
        if not waiting:
            raise WaitClosed(
                kind, f"run {run.id!r} is not waiting for input ({run.status})", run_id=run.id
            )
        if len(waiting) > 1:
            raise WaitClosed(
                kind,
                f"run {run.id!r} asks {len(waiting)} questions: name one (question_id)",
                run_id=run.id,
                questions=[w.call_id for w in waiting],
            )
        return waiting[0].call_id

    async def track(self, run_id: str) -> None:
        """Keep the run's stored status saying what it waits for from a person.

        `input_required` while a question waits, `waiting_for_approval` while a call does,
        `running` otherwise; until the run's event log closes.
        """
        seen, waiting = 0, None
        while True:
            seen, now, state = await self.versions.ledger.watch_waits(
                run_id, seen, self.heartbeat_s
            )
            if state == "closed":
                return
            if now != waiting:
                waiting = now
                await self.store.set_waiting(run_id, waiting)
