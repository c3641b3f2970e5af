"""What waits for a person in a run: calls to approve, questions to answer (`ask_user`).

Both are kept in the system's ledger (shared by every instance); the run's stored status follows
them (`waiting_for_approval`, `input_required`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Literal

from agents.core.events import ApprovalRequested, InputRequested
from agents.core.storable import nul_refusal
from orchestrator.errors import (
    ApprovalConflict,
    ApprovalNotFound,
    NotReady,
    NotWaitingForInput,
    QuestionNotFound,
    ServiceError,
)
from orchestrator.service.versions import Versions
from orchestrator.store import RunStore, StoredRun

__all__ = ["ApprovalDesk"]


@dataclass
class ApprovalDesk:
    """The approvals and questions of a system's runs, and their runs' stored status."""

    versions: Versions  # (their ledger, which every version's runs share)
    store: RunStore
    ready: asyncio.Event
    heartbeat_s: float

    async def pending(self, run: StoredRun) -> list[ApprovalRequested]:
        """The run's calls waiting for a decision, oldest first."""
        if run.finished or not self.ready.is_set():
            return []
        return await self.versions.ledger.pending(run.id)

    async def questions(self, run: StoredRun) -> list[InputRequested]:
        """The run's questions waiting for an answer, oldest first."""
        if run.finished or not self.ready.is_set():
            return []
        return await self.versions.ledger.questions(run.id)

    async def decide(
        self,
        run: StoredRun,
        call_id: str,
        approved: bool,
        message: str,
        who: str = "",
        arguments: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Approve or deny a call waiting in a run (whichever instance runs it).

        `who` decides (recorded with the decision); `arguments`: approve the call with these
        instead of the model's (the edit is recorded).

        Raises:
            ApprovalConflict: the run is over, or the call was decided already.
            ApprovalNotFound: no such call waits in the run.
            NotReady: the agents are starting.
        """
        if run.finished:
            raise ApprovalConflict(f"run {run.id!r} is {run.status}", run_id=run.id)
        if not self.ready.is_set():
            raise NotReady("the agents are starting")
        outcome, decision = await self.versions.ledger.decide(
            run.id, call_id, approved, message, "person", who, arguments
        )
        if outcome == "unknown":
            raise ApprovalNotFound(run.id, call_id)
        if outcome == "already_decided":
            raise ApprovalConflict(
                f"call {call_id!r} was decided already", call_id=call_id, decision=decision
            )
        assert decision is not None
        return {"call_id": call_id, **decision}

    async def answer(
        self,
        run: StoredRun,
        answer: str,
        question_id: str | None = None,
        by: Literal["person", "expiry"] = "person",
        who: str = "",
    ) -> dict[str, Any]:
        """Answer the run's question (`question_id`, or the one it waits on); the first counts.

        `by` expiry: no one will answer (the run stops waiting, the agent is told so).

        Raises:
            NotWaitingForInput: the run asks nothing now (over, or answered already), or it
                asks several questions and none was named.
            QuestionNotFound: the run never asked a question with this id.
            NotReady: the agents are starting.
        """
        if run.finished:
            raise NotWaitingForInput(f"run {run.id!r} is {run.status}", run_id=run.id)
        if not self.ready.is_set():
            raise NotReady("the agents are starting")
        if refusal := nul_refusal(answer, "the answer"):  # whichever door it came through
            raise ServiceError(refusal)
        if question_id is None:
            waiting = await self.versions.ledger.questions(run.id)
            if not waiting:
                raise NotWaitingForInput(
                    f"run {run.id!r} is not waiting for input ({run.status})", run_id=run.id
                )
            if len(waiting) > 1:
                raise NotWaitingForInput(
                    f"run {run.id!r} asks {len(waiting)} questions: name one (question_id)",
                    run_id=run.id,
                    questions=[q.call_id for q in waiting],
                )
            question_id = waiting[0].call_id
        outcome, decision = await self.versions.ledger.answer(run.id, question_id, answer, by, who)
        if outcome == "unknown":
            raise QuestionNotFound(run.id, question_id)
        if outcome == "already_decided":
            raise NotWaitingForInput(
                f"question {question_id!r} was answered already",
                question_id=question_id,
                answer=decision,
            )
        assert decision is not None
        # Said at once (the tracker would say it a moment later): a client reading the run
        # right after its answer sees it working.
        _, now, _ = await self.versions.ledger.watch_pending(run.id, -1, 0)
        await self.store.set_waiting(run.id, now)
        return {"question_id": question_id, **decision}

    async def track(self, run_id: str) -> None:
        """Keep the run's stored status saying what it waits for from a person.

        `input_required` while a question waits, `waiting_for_approval` while a call does,
        `running` otherwise; until the run's event log closes.
        """
        seen, waiting = 0, None
        while True:
            seen, now, state = await self.versions.ledger.watch_pending(
                run_id, seen, self.heartbeat_s
            )
            if state == "closed":
                return
            if now != waiting:
                waiting = now
                await self.store.set_waiting(run_id, waiting)
