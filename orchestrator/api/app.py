"""The FastAPI application: the HTTP face of a `RunService`, assembled from `routes/`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path as FilePath
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.openapi.utils import get_openapi
from starlette.routing import Route

from orchestrator import __version__
from orchestrator.access import AccessFileWatch, KeyRing
from orchestrator.api.deps import caller_guard, service_of
from orchestrator.api.errors import COMMON_ERRORS, install_error_handlers
from orchestrator.api.guards import BodyLimit, KeyCheck, NulRefusal, ProtocolGuard, RateLimiter
from orchestrator.api.lazy import A2A_CARD_PATH, A2A_RPC_PATH, MCP_PATH, LazyA2A, LazyMcp
from orchestrator.api.routes import (
    agents,
    approvals,
    experiments,
    health,
    memory,
    runs,
    threads,
)
from orchestrator.api.routes import metrics as metrics_view
from orchestrator.api.routes import service as service_view
from orchestrator.api.tokens import OidcVerifier
from orchestrator.api.ui import SecurityHeaders, mount_ui
from orchestrator.engine import LAST
from orchestrator.oidc import OidcOptions
from orchestrator.render import default_mermaid_dist
from orchestrator.schemas import ErrorBody
from orchestrator.service import RunService
from orchestrator.system.config import AgentSystem
from orchestrator.system.routing import AUTO

__all__ = ["ApiOptions", "create_app"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ApiOptions:
    """How the API guards itself."""

    api_keys: tuple[str, ...] = ()
    access: AccessFileWatch | None = None  # keys with tenants and roles (`orchestrator.access`)
    oidc: OidcOptions | None = None  # bearer JWTs of an OIDC issuer (`orchestrator.oidc`)
    rate_limit_per_s: float = 50.0
    rate_limit_burst: int = 200
    max_body_bytes: int = 1_048_576
    mermaid_dist: FilePath | None = None  # the npm mermaid package for the UI (setup's)
    mcp_origins: tuple[str, ...] = ()  # Origins allowed at /mcp and /a2a besides loopback ones
    public_url: str = "http://127.0.0.1:8000"  # where A2A clients reach it (the agent card's URL)
    a2a_blocking_wait_s: float | None = None  # see `BatonRequestHandler`
    a2a_push_allow_private: bool = False  # see `orchestrator.a2a.push`
    # The team's config file: read again by `POST /v1/service/versions` without a body, and
    # on SIGHUP (a new version of the team; see `RunService.roll`).
    config_path: FilePath | None = None


def create_app(
    system: AgentSystem,
    service_factory: Callable[[], AbstractAsyncContextManager[RunService]],
    options: ApiOptions | None = None,
) -> FastAPI:
    """The Baton HTTP API over the service that `service_factory` opens at start-up."""
    options = options or ApiOptions()
    keys = KeyRing(
        options.api_keys, options.access, OidcVerifier(options.oidc) if options.oidc else None
    )
    limiter = RateLimiter(options.rate_limit_per_s, options.rate_limit_burst)

    async def current_service() -> RunService:
        return service_of(app)

    # Built on their first request (the SDKs' imports are half of the service's start).
    mcp = LazyMcp(current_service)
    a2a = LazyA2A(
        system,
        current_service,
        options.public_url,
        keys.enabled,
        options.a2a_blocking_wait_s,
        options.a2a_push_allow_private,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with service_factory() as service:
            app.state.service = service
            try:
                with _reload_on_hangup(service, options.config_path):
                    yield
            finally:
                await mcp.close()

    app = FastAPI(
        title="Baton",
        summary="Multi-agent orchestration on Ray, with flow tracing.",
        version=__version__,
        lifespan=lifespan,
        # FastAPI would trace every request through Baton's provider, whose collector keeps
        # run traces only; the run's trace is what Baton records and exports.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.config_path = options.config_path
    app.state.access = options.access  # (its problems are in the readiness checks)
    app.add_middleware(BodyLimit, max_bytes=options.max_body_bytes)
    app.add_middleware(NulRefusal)
    # Outside the body limit: a caller without a key has no body read (nor drained) at all.
    app.add_middleware(KeyCheck, keys=keys, guarded=("/v1", MCP_PATH, A2A_RPC_PATH, "/metrics"))
    app.add_middleware(SecurityHeaders)
    install_error_handlers(app)
    app.include_router(health.router)
    errors = dict(COMMON_ERRORS)
    if keys.enabled:
        errors[401] = {"model": ErrorBody, "description": "No valid API key."}
        errors[403] = {"model": ErrorBody, "description": "The key lacks the route's role."}
    guard = [Depends(caller_guard(limiter, keys.enabled))]
    for module in (runs, threads, memory, approvals, agents, service_view, experiments):
        app.include_router(module.router, prefix="/v1", dependencies=guard, responses=errors)
    # Prometheus' scrape: every tenant's figures, so an admin's (any key without tenants).
    app.include_router(metrics_view.router, dependencies=guard)
    # Operations the document describes and other routes serve (the SSE stream).
    described = APIRouter()
    described.include_router(runs.documented, prefix="/v1", dependencies=guard, responses=errors)
    # `/mcp`: Baton as an MCP server; `/a2a`: Baton as an A2A agent; behind the same keys.
    for path, lazy, methods in ((MCP_PATH, mcp, None), (A2A_RPC_PATH, a2a, ["POST"])):
        guarded = ProtocolGuard(lazy.endpoint(path), keys, limiter, options.mcp_origins)
        app.router.routes.append(Route(path, endpoint=guarded, methods=methods))
    # A2A clients that post to the agent's base URL (the a2a-sdk's default path) reach the
    # same endpoint; GET / stays the UI.
    app.router.routes.append(Route("/", endpoint=guarded, methods=["POST"]))
    # The card is public: it says how to authenticate.
    card = a2a.endpoint(A2A_CARD_PATH)
    app.router.routes.append(Route(A2A_CARD_PATH, endpoint=card, methods=["GET"]))
    mount_ui(app, options.mermaid_dist or default_mermaid_dist())
    app.openapi = lambda: _openapi(app, system, described)  # type: ignore[method-assign]
    return app


@contextlib.contextmanager
def _reload_on_hangup(service: RunService, path: FilePath | None) -> Iterator[None]:
    """While serving, SIGHUP starts the config file's version of the team (`roll`).

    Only in the main thread, where signals are delivered (not in an app served by a test).
    """
    if path is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    rolling: set[asyncio.Task[None]] = set()

    async def roll() -> None:
        try:
            rolled = await service_view.new_version(service, path, None)
            logger.info(
                "SIGHUP: version %s serves new runs (was %s)", rolled.version, rolled.previous
            )
        except Exception as exc:
            logger.error("SIGHUP: %s stays: %s", service.system.version, exc)

    def hangup() -> None:
        task = loop.create_task(roll())
        rolling.add(task)
        task.add_done_callback(rolling.discard)

    loop.add_signal_handler(signal.SIGHUP, hangup)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGHUP)


def _openapi(app: FastAPI, system: AgentSystem, described: APIRouter) -> dict[str, Any]:
    """FastAPI's document, with the system's agents as the values `agent` takes.

    Those of the version new runs go to (the document is made again after a new version).
    """
    service = getattr(app.state, "service", None)
    if service is not None:
        system = service.system
    if app.openapi_schema is None or app.state.openapi_of != system.version:
        routes = [*app.routes, *described.routes]
        schema = get_openapi(
            title=app.title, version=app.version, summary=app.summary, routes=routes
        )
        names = [a.name for a in system.config.agents]
        # (A thread's turn may also go on with the agent that answered the last: `last`.)
        for body, more in (
            ("RunSubmission", ()),
            ("ThreadRunSubmission", (LAST,)),
            ("ThreadCreate", (LAST,)),
        ):
            agent = schema["components"]["schemas"][body]["properties"]["agent"]
            agent["anyOf"][0] = {"type": "string", "enum": [*names, AUTO, *more]}
        app.openapi_schema = schema
        app.state.openapi_of = system.version
    return app.openapi_schema
