"""Calls waiting for a person: list them, decide them, and keep the run's stored status."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from agents.core.events import ApprovalRequested
from orchestrator.engine import Engine
from orchestrator.errors import ApprovalConflict, ApprovalNotFound, NotReady
from orchestrator.store import RunStore, StoredRun

__all__ = ["ApprovalDesk"]


@dataclass
class ApprovalDesk:
    """The approvals of a system's runs (kept in its ledger, shared by every instance)."""

    engine: Engine
    store: RunStore
    ready: asyncio.Event
    heartbeat_s: float

    async def pending(self, run: StoredRun) -> list[ApprovalRequested]:
        """The run's calls waiting for a decision, oldest first."""
        if run.finished or not self.ready.is_set():
            return []
        return await self.engine.ledger.pending(run.id)

    async def decide(
        self, run: StoredRun, call_id: str, approved: bool, message: str
    ) -> dict[str, Any]:
        """Approve or deny a call waiting in a run (whichever instance runs it).

        Raises:
            ApprovalConflict: the run is over, or the call was decided already.
            ApprovalNotFound: no such call waits in the run.
            NotReady: the agents are starting.
        """
        if run.finished:
            raise ApprovalConflict(f"run {run.id!r} is {run.status}", run_id=run.id)
        if not self.ready.is_set():
            raise NotReady("the agents are starting")
        outcome, decision = await self.engine.ledger.decide(
            run.id, call_id, approved, message, "person"
        )
        if outcome == "unknown":
            raise ApprovalNotFound(run.id, call_id)
        if outcome == "already_decided":
            raise ApprovalConflict(
                f"call {call_id!r} was decided already", call_id=call_id, decision=decision
            )
        assert decision is not None
        return {"call_id": call_id, **decision}

    async def track(self, run_id: str) -> None:
        """Keep the stored status `waiting_for_approval` while a call of the run waits.

        Until the run's event log closes.
        """
        seen, waiting = 0, False
        while True:
            seen, pending, state = await self.engine.ledger.watch_pending(
                run_id, seen, self.heartbeat_s
            )
            if state == "closed":
                return
            if (pending > 0) != waiting:
                waiting = pending > 0
                await self.store.set_waiting(run_id, waiting)
