"""`/v1/threads`: conversations whose runs see the turns before them."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Response

from orchestrator.api.deps import Caller, IdempotencyKey, Service, check_agent
from orchestrator.engine import LAST
from orchestrator.schemas import (
    ErrorBody,
    RunView,
    ThreadCreate,
    ThreadPageView,
    ThreadRunSubmission,
    ThreadStatePatch,
    ThreadView,
    run_view,
    thread_view,
)

__all__ = ["router"]

router = APIRouter(tags=["threads"])

THREAD_ID = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.:-]{1,255}$", description="A thread id.")]
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such thread (or it was deleted)."}
}


@router.post("/threads", status_code=201)
async def create_thread(
    service: Service,
    caller: Caller,
    response: Response,
    body: Annotated[ThreadCreate | None, Body()] = None,
) -> ThreadView:
    """Start a conversation (of the caller's tenant); submit its turns to its `runs` link.

    Without a body: a thread without metadata.
    """
    check_agent(service, body.agent if body else None, LAST)
    thread = await service.threads.create(
        body.metadata if body else {}, caller, body.agent if body else None
    )
    response.headers["Location"] = f"/v1/threads/{thread.id}"
    return thread_view(thread)


@router.get("/threads")
async def list_threads(
    service: Service,
    caller: Caller,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> ThreadPageView:
    """The caller's tenant's threads (an admin's: all), newest first."""
    threads, total = await service.threads.page(limit=limit, offset=offset, viewer=caller)
    return ThreadPageView(
        threads=[thread_view(t) for t in threads],
        total=total,
        limit=limit,
        offset=offset,
    )


@router.get("/threads/{thread_id}", responses=_NOT_FOUND)
async def get_thread(thread_id: THREAD_ID, service: Service, caller: Caller) -> ThreadView:
    """A thread and its turns, oldest first: each run's task, answer, status and usage."""
    thread, turns = await service.threads.get(thread_id, caller)
    return thread_view(thread, turns)


@router.patch(
    "/threads/{thread_id}/state",
    responses={
        **_NOT_FOUND,
        409: {"model": ErrorBody, "description": "Its state changed since the version read."},
    },
)
async def change_thread_state(
    thread_id: THREAD_ID, body: ThreadStatePatch, service: Service, caller: Caller
) -> ThreadView:
    """Set keys of the thread's shared state, which its next turn begins with.

    Names the `state_version` read: a change made since is a `409` `state_conflict`; a value
    the team's state schema refuses, a `422` `invalid_state` naming the key.
    """
    spec = service.system.config.state
    thread, turns = await service.threads.change_state(
        thread_id, body.values, body.version, spec, caller
    )
    return thread_view(thread, turns)


@router.delete("/threads/{thread_id}", status_code=204, responses=_NOT_FOUND)
async def delete_thread(thread_id: THREAD_ID, service: Service, caller: Caller) -> Response:
    """Forget a conversation: its runs, events, steps and spans leave the store.

    Its runs under way are cancelled first.
    """
    await service.threads.delete(thread_id, caller)
    return Response(status_code=204)


@router.post(
    "/threads/{thread_id}/runs",
    status_code=202,
    responses={
        **_NOT_FOUND,
        409: {
            "model": ErrorBody,
            "description": "A run of the thread is under way (strategy `reject`), the thread "
            "has as many turns as a thread takes (`thread_full`), or the Idempotency-Key was "
            "reused.",
        },
    },
)
async def submit_turn(
    thread_id: THREAD_ID,
    body: ThreadRunSubmission,
    service: Service,
    caller: Caller,
    response: Response,
    idempotency_key: IdempotencyKey = "",
) -> RunView:
    """Submit the thread's next turn: its entry agent sees the earlier turns.

    The `Multitask-Strategy` header of the answer says what was done about a run under way.
    """
    check_agent(service, body.agent, LAST)
    run, created = await service.threads.submit(
        thread_id,
        body.submission(),
        body.multitask_strategy,
        idempotency_key=idempotency_key or None,
        caller=caller,
    )
    response.headers["Location"] = f"/v1/runs/{run.id}"
    response.headers["Multitask-Strategy"] = body.multitask_strategy
    if not created:
        response.headers["Idempotent-Replayed"] = "true"
    return run_view(run)
