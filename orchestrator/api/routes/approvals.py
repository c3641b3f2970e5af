"""`/v1/runs/{id}/approvals`: calls waiting for a person, and their decisions."""

from __future__ import annotations

from fastapi import APIRouter

from orchestrator.api.deps import CALL_ID, Run, Service
from orchestrator.api.errors import NOT_FOUND
from orchestrator.schemas import ApprovalDecision, ApprovalResult, ErrorBody, PendingApproval

__all__ = ["router"]

router = APIRouter(tags=["approvals"])


@router.get("/runs/{run_id}/approvals", responses=NOT_FOUND)
async def pending_approvals(run: Run, service: Service) -> list[PendingApproval]:
    """The run's calls waiting for a person's decision, oldest first."""
    pending = await service.approvals.pending(run)
    return [PendingApproval.model_validate(p.model_dump()) for p in pending]


@router.post(
    "/runs/{run_id}/approvals/{call_id}",
    responses={
        **NOT_FOUND,
        409: {"model": ErrorBody, "description": "Decided already, or the run is over."},
    },
)
async def decide(
    run: Run, call_id: CALL_ID, body: ApprovalDecision, service: Service
) -> ApprovalResult:
    """Approve or deny a call waiting in the run; the first decision counts.

    A denial reaches the model as the call's result, with the message.
    """
    decided = await service.approvals.decide(run, call_id, body.approve, body.message)
    return ApprovalResult.model_validate(decided)
