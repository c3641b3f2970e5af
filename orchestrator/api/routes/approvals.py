"""What waits for a person in a run: calls to approve, questions to answer.

`/v1/runs/{id}/approvals` (calls to approve or deny) and `/v1/runs/{id}/input` (an agent's
questions, `ask_user`).
"""

from __future__ import annotations

from fastapi import APIRouter

from agents.core.events import ApprovalRequested, InputRequested
from agents.core.waits import Resolution
from orchestrator.api.deps import CALL_ID, Caller, Run, Service, needs
from orchestrator.api.errors import NOT_FOUND
from orchestrator.schemas import (
    Approval,
    ApprovalDecision,
    ApprovalResult,
    ErrorBody,
    InputAnswer,
    InputResult,
    PendingApproval,
    PendingQuestion,
)

__all__ = ["router"]

router = APIRouter(tags=["approvals"])


@router.get("/runs/{run_id}/approvals", responses=NOT_FOUND)
async def pending_approvals(run: Run, service: Service) -> list[PendingApproval]:
    """The run's calls waiting for a person's decision, oldest first."""
    pending = await service.desk.waiting(run, ApprovalRequested)
    return [PendingApproval.of(p) for p in pending]


@router.post(
    "/runs/{run_id}/approvals/{call_id}",
    openapi_extra=needs("approve"),
    responses={
        **NOT_FOUND,
        409: {"model": ErrorBody, "description": "Decided already, or the run is over."},
        422: {
            "model": ErrorBody,
            "description": "`invalid_arguments`: the edited arguments do not fit the tool's "
            "`parameters` (each problem named at its place); the call still waits.",
        },
    },
)
async def decide(
    run: Run, call_id: CALL_ID, body: ApprovalDecision, service: Service, caller: Caller
) -> ApprovalResult:
    """Approve or deny a call waiting in the run; the first decision counts.

    A denial reaches the model as the call's result, with the message. An approval may edit the
    call's arguments (`arguments`, which must fit the tool's `parameters`): the call is made
    with those, and the edit is recorded (the `approval_decided` event, the tool span), with who
    made it.
    """
    edited = body.arguments if isinstance(body, Approval) else None
    decision = Resolution.decision(body.approve, body.message, who=caller.who, arguments=edited)
    decided = await service.desk.resolve(run, decision, call_id)
    return ApprovalResult.model_validate(decided)


@router.get("/runs/{run_id}/input", responses=NOT_FOUND)
async def pending_questions(run: Run, service: Service) -> list[PendingQuestion]:
    """The questions the run's agents ask the person, oldest first.

    The run is `input_required` while one waits.
    """
    return [PendingQuestion.of(q) for q in await service.desk.waiting(run, InputRequested)]


@router.post(
    "/runs/{run_id}/input",
    openapi_extra=needs("approve"),
    responses={
        404: {"model": ErrorBody, "description": "No such run, or no such question in it."},
        409: {
            "model": ErrorBody,
            "description": "The run is not waiting for input (over, or answered already), or "
            "it asks several questions and none was named.",
        },
    },
)
async def answer(run: Run, body: InputAnswer, service: Service, caller: Caller) -> InputResult:
    """Answer the run's question; the first answer counts, and the run goes on with it.

    The answer is the agent's `ask_user` result. Without `question_id` it answers the one
    question the run waits on.
    """
    reply = Resolution.reply(body.answer, who=caller.who)
    answered = await service.desk.resolve(run, reply, body.question_id)
    return InputResult.model_validate(answered)
