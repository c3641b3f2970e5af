"""`/v1/runs`: submit, list, read, cancel, resume, follow (SSE), trace and draw runs."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse

from agents.core.events import Event
from orchestrator.api.deps import (
    MERMAID,
    Caller,
    FollowedRun,
    IdempotencyKey,
    Run,
    Service,
    check_agent,
)
from orchestrator.api.errors import COMMON_ERRORS, NOT_FOUND, as_json
from orchestrator.api.guards import still_accepted
from orchestrator.api.sse import SseResponse
from orchestrator.errors import NothingToCompare
from orchestrator.schemas import (
    ComparisonView,
    DiagramView,
    ErrorBody,
    ForkRequest,
    RunPageView,
    RunSubmission,
    RunView,
    TraceView,
    run_page_view,
    run_view,
    span_forest,
)

__all__ = ["documented", "router"]

router = APIRouter(tags=["runs"])


@router.post(
    "/runs",
    status_code=202,
    responses={409: {"model": ErrorBody, "description": "Idempotency-Key reused."}},
)
async def submit(
    body: RunSubmission,
    service: Service,
    caller: Caller,
    response: Response,
    idempotency_key: IdempotencyKey = "",
) -> RunView:
    """Submit a task. The run starts in the background; follow its `events` link."""
    check_agent(service, body.agent)
    run, created = await service.submit(
        body.submission(), idempotency_key=idempotency_key or None, caller=caller
    )
    response.headers["Location"] = f"/v1/runs/{run.id}"
    if not created:
        response.headers["Idempotent-Replayed"] = "true"
    return run_view(run)


@router.get("/runs")
async def list_runs(
    service: Service,
    caller: Caller,
    status: Annotated[str | None, Query(max_length=32)] = None,
    agent: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> RunPageView:
    """Runs, newest first, filtered by status and entry agent.

    The caller's tenant's only (an admin's: every tenant's).
    """
    page = await service.list_runs(
        status=status, agent=agent, viewer=caller, limit=limit, offset=offset
    )
    return run_page_view(page, limit, offset)


@router.get("/runs/{run_id}", responses=NOT_FOUND)
async def get_run(run: Run) -> RunView:
    """A run: its status, output or error, usage, timings and delegation tree."""
    return run_view(run)


@router.post("/runs/{run_id}/cancel", status_code=202, responses=NOT_FOUND)
async def cancel_run(run: Run, service: Service, caller: Caller) -> RunView:
    """Stop every agent working on the run; it ends `cancelled`, with its spans.

    A finished run is returned as it is.
    """
    return run_view(await service.cancel(run.id, caller))


def _conflict(why: str) -> dict[int | str, dict[str, Any]]:
    return {**NOT_FOUND, 409: {"model": ErrorBody, "description": why}}


@router.post(
    "/runs/{run_id}/resume",
    status_code=202,
    responses=_conflict("The run is not interrupted or failed."),
)
async def resume_run(run: Run, service: Service) -> RunView:
    """Resume an `interrupted` or `failed` run from its step log, under the same id.

    Finished model calls and tool calls are taken from the record, not made again; its event
    stream goes on with the next ids.
    """
    return run_view(await service.durable.resume(run.id))


@router.post(
    "/runs/{run_id}/replay",
    status_code=202,
    responses=_conflict("The run has not ended."),
)
async def replay_run(run: Run, service: Service, caller: Caller) -> RunView:
    """Execute a finished run again from its step log, as a new run (`replay_of` names it).

    No model call and no tool call is made; compare the two runs' diagrams (`comparable=true`)
    to see that the record reproduces the run.
    """
    return run_view(await service.durable.replay(run.id, caller=caller))


@router.post(
    "/runs/{run_id}/fork",
    status_code=202,
    responses=_conflict("The run has not ended, or the version asked for does not run here."),
)
async def fork_run(
    run: Run, service: Service, caller: Caller, body: ForkRequest | None = None
) -> RunView:
    """A new run that follows this one's step log while its requests are the same, then live.

    After a config change (an instruction, a model), it is the run as it would have gone.
    Compare the two runs' diagrams (`comparable=true`): they differ from the first step the
    change touches.
    """
    body = body or ForkRequest()
    forked = await service.durable.replay(
        run.id, fork=True, from_span=body.from_span, version=body.version, caller=caller
    )
    return run_view(forked)


@router.get("/runs/{run_id}/trace", responses=NOT_FOUND)
async def trace(run: Run, service: Service) -> TraceView:
    """The run's spans, nested by parentage.

    While it goes on, the spans so far (open ones without an end).
    """
    spans = await service.views.spans(run)
    return TraceView(
        run_id=run.id,
        trace_id=spans[0]["trace_id"] if spans else None,
        span_count=len(spans),
        spans=span_forest(spans),
    )


_LAST_EVENT_ID = Header(
    pattern=r"^\d{0,12}$", description="Resume after this event id (empty: start)."
)
_AFTER = Query(ge=0, le=10**12, description="Resume after this event id.")


@router.get("/runs/{run_id}/events", include_in_schema=False)  # documented below
async def events(
    request: Request,
    run: FollowedRun,
    service: Service,
    last_event_id: Annotated[str, _LAST_EVENT_ID] = "",
    after: Annotated[int, _AFTER] = 0,
) -> SseResponse:
    start = max(after, int(last_event_id) if last_event_id else 0)
    return SseResponse(_while_accepted(service.events.follow(run, start), request))


async def _while_accepted(
    items: AsyncGenerator[tuple[int, Event] | None], request: Request
) -> AsyncGenerator[tuple[int, Event] | None]:
    """A run's events, ended at a heartbeat once the caller's key is no longer accepted.

    A revoked key, an expired token: the client that reconnects is refused.
    """
    try:
        async for item in items:
            if item is None and not await still_accepted(request.scope):
                return
            yield item
    finally:
        await items.aclose()


# The OpenAPI entry of `events`: FastAPI documents an SSE generator's items (`itemSchema`)
# from its annotation. It is never served (`app.py` passes it to the document only): serving
# through FastAPI's SSE costs tasks and queues per event (see `api/sse.py`).
documented = APIRouter(tags=["runs"])


@documented.get(
    "/runs/{run_id}/events",
    name="events",  # its operation id and summary
    response_class=EventSourceResponse,
    responses=as_json({**COMMON_ERRORS, **NOT_FOUND}),
)
async def events_document(
    run: FollowedRun,
    last_event_id: Annotated[str, _LAST_EVENT_ID] = "",
    after: Annotated[int, _AFTER] = 0,
) -> AsyncIterable[Event]:
    """Server-Sent Events while the run goes on, each named by its `type`.

    The schema lists every kind; the last is `run_finished` (status, answer or error, usage).
    Each has an increasing id; reconnect with `Last-Event-ID` to miss nothing. A run submitted
    with `stream` also sends `model_delta` text as the models produce it: those have no id and
    are not stored. Comments keep an idle connection alive.
    """
    raise AssertionError("documentation only: `events` serves this path")
    yield


@router.get(
    "/runs/{run_id}/compare",
    responses=_conflict("No run to compare with: the run is no replay or fork; name one."),
)
async def compare(
    run: Run,
    service: Service,
    caller: Caller,
    other: Annotated[
        str,
        Query(
            alias="with",
            pattern=r"^[A-Za-z0-9_.-]{1,64}$",
            description="The run to compare with (its id, or 6+ characters of it); by default "
            "the run this one replays or forks.",
        ),
    ] = "",
) -> ComparisonView:
    """Where this run's steps differ from another's, one sentence a difference.

    "writer, step 1: called word_count, now answers directly": the other run's step first,
    then this one's. Agents are matched by name and by order among their invocations.
    """
    if not other and run.replay_of is None:
        raise NothingToCompare(
            f"run {run.id!r} is no replay or fork: say which run to compare it with (?with=)",
            run_id=run.id,
        )
    before = await service.get(other or str(run.replay_of), caller)
    said = await service.views.differences(run, before)
    return ComparisonView(run_id=run.id, other=before.id, same=not said, differences=said)


@router.get(
    "/runs/{run_id}/diagram",
    response_model=DiagramView,
    responses={
        **NOT_FOUND,
        200: {
            "description": "Mermaid text (default), or with `format=json` the text and "
            "the span of each arrow.",
            "content": {MERMAID: {"schema": {"type": "string"}}},
        },
    },
)
async def diagram(
    run: Run,
    service: Service,
    detail: Annotated[
        Literal["agents", "tools", "full"],
        Query(description="agents; tools: function tools too; full: models too."),
    ] = "agents",
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
    format: Annotated[Literal["mermaid", "json"], Query()] = "mermaid",
    comparable: Annotated[
        bool,
        Query(
            description="true: no durations and no run id, so that the text of two executions "
            "of one run (a run and its replay) compares byte for byte."
        ),
    ] = False,
) -> Response:
    """The run as a Mermaid sequence diagram, computed from its spans (live while it goes on).

    Large runs fold alike calls into loops and come in pages.
    """
    drawn = await service.views.diagram(run, detail, page, comparable)
    if format == "mermaid":
        return Response(drawn.text, media_type=MERMAID)
    view = DiagramView(
        run_id=run.id,
        status=run.status,
        detail=detail,
        mermaid=drawn.text,
        arrows=drawn.arrows,
        page=drawn.page,
        pages=drawn.pages,
        folded=drawn.folded,
    )
    return JSONResponse(view.model_dump())
