"""The FastAPI application: the HTTP face of a `RunService`."""

import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path as FilePath
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Header, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import create_model
from starlette.exceptions import HTTPException
from starlette.routing import Match, Route

from orchestrator.api.guards import BodyLimit, KeyRing, McpGuard, RateLimiter, retry_after
from orchestrator.api.ui import SecurityHeaders, mount_ui
from orchestrator.config import AgentSystem
from orchestrator.errors import Overloaded, ServiceError
from orchestrator.mcp_server import build_mcp_server, mcp_http_app
from orchestrator.render import default_mermaid_dist
from orchestrator.routing import AUTO
from orchestrator.schemas import (
    AgentsView,
    AgentView,
    ApprovalDecision,
    ApprovalResult,
    DiagramView,
    ErrorBody,
    Health,
    PendingApproval,
    Readiness,
    ReplicaView,
    RunPageView,
    RunRequest,
    RunView,
    TopologyView,
    TraceView,
    run_view,
    span_forest,
)
from orchestrator.service import RunService
from orchestrator.store import StoredRun
from orchestrator.topology import topology_flowchart

__all__ = ["ApiOptions", "create_app"]

logger = logging.getLogger(__name__)

MERMAID = "text/vnd.mermaid"
RUN_ID = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="A run id.")]
CALL_ID = Annotated[
    str,
    Path(
        pattern=r"^[A-Za-z0-9_.:-]{1,128}$",
        description="The pending call's id (from its approval_requested event).",
    ),
]


@dataclass(frozen=True)
class ApiOptions:
    """How the API guards itself."""

    api_keys: tuple[str, ...] = ()
    rate_limit_per_s: float = 50.0
    rate_limit_burst: int = 200
    max_body_bytes: int = 1_048_576
    mermaid_dist: FilePath | None = None  # the npm mermaid package for the UI (setup's)
    mcp_origins: tuple[str, ...] = ()  # Origins allowed at /mcp besides loopback ones


def _error(status: int, code: str, message: str, details: Any = None, **headers: str) -> Response:
    body = {"error": {"code": code, "message": message, "details": details}}
    return JSONResponse(body, status_code=status, headers=headers or None)


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def service_error(_: Request, exc: ServiceError) -> Response:
        headers = (
            {"Retry-After": retry_after(exc.retry_after_s)} if isinstance(exc, Overloaded) else {}
        )
        return _error(exc.status, exc.code, exc.message, exc.details or None, **headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> Response:
        problems = [
            {
                "field": ".".join(str(p) for p in e["loc"]),
                "message": e["msg"],
                "type": e["type"],
            }
            for e in exc.errors()
        ]  # the offending input is not echoed: it may be large, or a secret
        if any(p["type"] == "json_invalid" for p in problems):
            return _error(400, "invalid_json", "the request body is not valid JSON", problems)
        first = problems[0] if problems else {"field": "", "message": "invalid request"}
        message = f"{first['field']}: {first['message']}" if first["field"] else first["message"]
        return _error(422, "validation_error", message, problems)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # Starlette names the methods of the first route on the path only.
            headers["Allow"] = ", ".join(_allowed_methods(request))
        return _error(exc.status_code, code, str(exc.detail), **headers)


def _allowed_methods(request: Request) -> list[str]:
    methods: set[str] = set()
    for route in request.app.routes:
        match, _ = route.matches(request.scope)
        if match != Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return sorted(methods)


_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in {
        400: "The body is not valid JSON.",
        413: "The body is larger than the service accepts.",
        422: "The request is invalid (the details name each field).",
        429: "Too many requests from this caller, or too many runs; see Retry-After.",
    }.items()
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such run."}
}


def _as_json(responses: dict[int | str, dict[str, Any]]) -> dict[int | str, dict[str, Any]]:
    """The same error answers, documented as JSON on a route whose own answer is not (FastAPI
    would give them the route's media type)."""
    schema = {"$ref": "#/components/schemas/ErrorBody"}
    return {
        status: {
            "description": answer["description"],
            "content": {"application/json": {"schema": schema}},
        }
        for status, answer in responses.items()
    }


def _guard(keys: KeyRing, limiter: RateLimiter) -> Callable[..., Any]:
    """The dependency every /v1 route has: who is calling (checked when keys are set), and
    whether they are within their rate."""

    def admit(caller: str) -> str:
        wait = limiter.acquire(caller)
        if wait:
            raise HTTPException(
                429,
                "rate limit exceeded; slow down",
                headers={"Retry-After": retry_after(wait)},
            )
        return caller

    if not keys.enabled:

        def anonymous(request: Request) -> str:
            host = request.client.host if request.client else "unknown"
            return admit(f"ip:{host}")

        return anonymous

    bearer = HTTPBearer(auto_error=False, description="An API key of this service.")

    def authorized(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> str:
        principal = keys.principal(credentials.credentials) if credentials else None
        if principal is None:
            raise HTTPException(
                401, "a valid API key is required", headers={"WWW-Authenticate": "Bearer"}
            )
        return admit(principal)

    return authorized


def create_app(
    system: AgentSystem,
    service_factory: Callable[[], AbstractAsyncContextManager[RunService]],
    options: ApiOptions | None = None,
) -> FastAPI:
    """The Baton HTTP API over the service that `service_factory` opens at start-up."""
    options = options or ApiOptions()
    keys = KeyRing(options.api_keys)
    limiter = RateLimiter(options.rate_limit_per_s, options.rate_limit_burst)
    caller = _guard(keys, limiter)

    async def current_service() -> RunService:
        return app.state.service  # type: ignore[no-any-return]

    mcp = build_mcp_server(current_service)
    mcp_app = mcp_http_app(mcp)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with service_factory() as service, mcp.session_manager.run():
            app.state.service = service
            yield

    app = FastAPI(
        title="Baton",
        summary="Multi-agent orchestration on Ray, with flow tracing.",
        version="0.1.0",
        lifespan=lifespan,
        # FastAPI would trace every request through Baton's provider, whose collector keeps
        # run traces only; the run's trace is what Baton records and exports.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.add_middleware(BodyLimit, max_bytes=options.max_body_bytes)
    app.add_middleware(SecurityHeaders)
    _install_error_handlers(app)
    app.include_router(_health_router())
    app.include_router(_v1_router(system, caller, authenticated=keys.enabled))
    for route in mcp_app.routes:  # `/mcp`: Baton as an MCP server, behind the same keys
        assert isinstance(route, Route)
        app.router.routes.append(
            Route(
                route.path,
                endpoint=McpGuard(route.endpoint, keys, limiter, options.mcp_origins),
            )
        )
    mount_ui(app, options.mermaid_dist or default_mermaid_dist())
    return app


def _service(request: Request) -> RunService:
    return request.app.state.service  # type: ignore[no-any-return]


Service = Annotated[RunService, Depends(_service)]


def _health_router() -> APIRouter:
    router = APIRouter(tags=["health"])

    @router.get("/healthz")
    async def healthz() -> Health:
        """The process is up."""
        return Health(status="ok")

    @router.get(
        "/readyz",
        responses={503: {"model": Readiness, "description": "Ray or the store is not reachable."}},
    )
    async def readyz(service: Service) -> Response:
        """Ray (the agents) and the run store are reachable."""
        checks = await service.check()
        # Ray and the store decide; degraded tools are reported, not fatal.
        ready = all(checks.get(k) == "ok" for k in ("ray", "store"))
        body = Readiness(status="ready" if ready else "not_ready", checks=checks)
        return JSONResponse(body.model_dump(), status_code=200 if ready else 503)

    return router


def _submission_model(system: AgentSystem) -> type[RunRequest]:
    """`RunRequest` whose `agent` lists the configured agents, so that the OpenAPI document
    says exactly which values are valid."""
    names = tuple(a.name for a in system.config.agents)
    agent_type: Any = Literal[(*names, AUTO)] | None
    model: type[RunRequest] = create_model(
        "RunSubmission",
        __base__=RunRequest,
        agent=(agent_type, RunRequest.model_fields["agent"]),
    )
    return model


def _v1_router(
    system: AgentSystem, caller_dependency: Callable[..., Any], *, authenticated: bool
) -> APIRouter:
    v1 = APIRouter(prefix="/v1", responses=_ERRORS)
    if authenticated:
        v1.responses[401] = {"model": ErrorBody, "description": "No valid API key."}
    Caller = Annotated[str, Depends(caller_dependency)]
    Submission = _submission_model(system)

    async def existing_run(run_id: RUN_ID, service: Service, caller: Caller) -> StoredRun:
        return await service.get(run_id)

    Run = Annotated[StoredRun, Depends(existing_run)]

    @v1.post(
        "/runs",
        status_code=202,
        tags=["runs"],
        responses={409: {"model": ErrorBody, "description": "Idempotency-Key reused."}},
    )
    async def submit(
        body: Submission,  # type: ignore[valid-type]
        service: Service,
        caller: Caller,
        response: Response,
        idempotency_key: Annotated[
            str,
            Header(
                max_length=255,
                description="Retries with the same key and body return the same run "
                "(empty: no key).",
            ),
        ] = "",
    ) -> RunView:
        """Submit a task. The run starts in the background; follow its `events` link."""
        request = RunRequest.model_validate(body.model_dump())  # type: ignore[attr-defined]
        run, created = await service.submit(
            request, idempotency_key=idempotency_key or None, principal=caller
        )
        response.headers["Location"] = f"/v1/runs/{run.id}"
        if not created:
            response.headers["Idempotent-Replayed"] = "true"
        return run_view(run)

    @v1.get("/runs", tags=["runs"])
    async def list_runs(
        service: Service,
        caller: Caller,
        status: Annotated[str | None, Query(max_length=32)] = None,
        agent: Annotated[str | None, Query(max_length=64)] = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    ) -> RunPageView:
        """Runs, newest first, filtered by status and entry agent."""
        page = await service.store.list(status=status, agent=agent, limit=limit, offset=offset)
        return RunPageView(
            runs=[run_view(r) for r in page.runs], total=page.total, limit=limit, offset=offset
        )

    @v1.get("/runs/{run_id}", tags=["runs"], responses=_NOT_FOUND)
    async def get_run(run: Run) -> RunView:
        """A run: its status, output or error, usage, timings and delegation tree."""
        return run_view(run)

    @v1.post("/runs/{run_id}/cancel", status_code=202, tags=["runs"], responses=_NOT_FOUND)
    async def cancel_run(run: Run, service: Service) -> RunView:
        """Stop every agent working on the run; it ends `cancelled`, with its spans. A finished
        run is returned as it is."""
        return run_view(await service.cancel(run.id))

    @v1.get("/runs/{run_id}/approvals", tags=["approvals"], responses=_NOT_FOUND)
    async def pending_approvals(run: Run, service: Service) -> list[PendingApproval]:
        """The run's calls waiting for a person's decision, oldest first."""
        return [PendingApproval.model_validate(p) for p in await service.pending_approvals(run.id)]

    @v1.post(
        "/runs/{run_id}/approvals/{call_id}",
        tags=["approvals"],
        responses={
            **_NOT_FOUND,
            409: {"model": ErrorBody, "description": "Decided already, or the run is over."},
        },
    )
    async def decide(
        run: Run, call_id: CALL_ID, body: ApprovalDecision, service: Service
    ) -> ApprovalResult:
        """Approve or deny a call waiting in the run; the first decision counts. A denial
        reaches the model as the call's result, with the message."""
        decided = await service.decide(run.id, call_id, body.approve, body.message)
        return ApprovalResult.model_validate(decided)

    @v1.get("/runs/{run_id}/trace", tags=["runs"], responses=_NOT_FOUND)
    async def trace(run: Run, service: Service) -> TraceView:
        """The run's spans, nested by parentage; while it goes on, the spans so far (open ones
        without an end)."""
        spans = await service.spans(run)
        return TraceView(
            run_id=run.id,
            trace_id=spans[0]["trace_id"] if spans else None,
            span_count=len(spans),
            spans=span_forest(spans),
        )

    @v1.get(
        "/runs/{run_id}/events",
        response_class=EventSourceResponse,
        tags=["runs"],
        responses=_as_json({**v1.responses, **_NOT_FOUND}),
    )
    async def events(
        run: Run,
        service: Service,
        last_event_id: Annotated[
            str,
            Header(pattern=r"^\d{0,12}$", description="Resume after this event id (empty: start)."),
        ] = "",
        after: Annotated[
            int, Query(ge=0, le=10**12, description="Resume after this event id.")
        ] = 0,
    ) -> AsyncIterable[ServerSentEvent]:
        """Server-Sent Events while the run goes on: `run_started`, `agent_started`,
        `model_finished`, `tool_started`, `tool_finished`, `delegation_refused`,
        `agent_finished`, and last `run_finished` (status, answer or error, usage). Each has
        an increasing id; reconnect with `Last-Event-ID` to miss nothing. Comments keep an
        idle connection alive."""
        start = max(after, int(last_event_id) if last_event_id else 0)
        async for item in service.events(run, start):
            if item is None:
                yield ServerSentEvent(comment="heartbeat")
            else:
                seq, event = item
                yield ServerSentEvent(data=event, event=str(event.get("type")), id=str(seq))

    _add_diagram_route(v1, Run)
    _add_agent_routes(v1, system, Caller)

    return v1


def _add_diagram_route(v1: APIRouter, Run: Any) -> None:
    @v1.get(
        "/runs/{run_id}/diagram",
        tags=["runs"],
        response_model=DiagramView,
        responses={
            **_NOT_FOUND,
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
    ) -> Response:
        """The run as a Mermaid sequence diagram, computed from its spans (live while it goes
        on). Large runs fold alike calls into loops and come in pages."""
        drawn = await service.diagram(run, detail, page)
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


def _add_agent_routes(v1: APIRouter, system: AgentSystem, Caller: Any) -> None:
    topology = topology_flowchart(
        system.topology, system.config.limits.max_depth, f"{system.config.name} agents"
    )

    @v1.get(
        "/agents/diagram",
        tags=["agents"],
        response_class=Response,
        responses={200: {"content": {MERMAID: {"schema": {"type": "string"}}}}},
    )
    async def agents_diagram(caller: Caller) -> Response:
        """Who may delegate to whom, as a Mermaid flowchart: depth of each agent from the entry
        agent, cycles drawn thick, unreachable agents dashed."""
        return Response(topology, media_type=MERMAID)

    @v1.get("/agents", tags=["agents"])
    async def agents(service: Service, caller: Caller) -> AgentsView:
        """The configured agents, where each replica runs and how busy it is (asked now), and
        who may delegate to whom."""
        return await _agents_view(service)


async def _agents_view(service: RunService) -> AgentsView:
    system = service.system
    topology = system.topology
    placement: dict[str, list[ReplicaView]] = {}
    if service.engine.started:
        for replica in await service.engine.placement():
            placement.setdefault(replica["agent"], []).append(
                ReplicaView.model_validate(replica, from_attributes=False)
            )
    return AgentsView(
        system=system.config.name,
        agents=[
            AgentView(
                name=a.name,
                description=a.description,
                capabilities=list(a.capabilities),
                model=a.model.name,
                tools=[t.function for t in a.tools],
                delegates=topology.delegates(a.name),
                replicas=placement.get(a.name, []),
            )
            for a in system.config.agents
        ],
        topology=TopologyView(
            entry=topology.entry,
            edges=[(a, b) for a, b in topology.graph.edges],
            cycles=topology.cycles(),
            max_static_depth=topology.max_static_depth(),
            max_depth=system.config.limits.max_depth,
        ),
    )
