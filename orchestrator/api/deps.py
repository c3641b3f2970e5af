"""The dependencies routes declare: the run service, the caller, a run by id."""

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, Header, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from orchestrator.api.guards import KeyRing, RateLimiter, retry_after
from orchestrator.service import RunService
from orchestrator.store import StoredRun
from orchestrator.system.routing import AUTO

__all__ = [
    "CALL_ID",
    "MERMAID",
    "RUN_ID",
    "Caller",
    "FollowedRun",
    "IdempotencyKey",
    "Run",
    "Service",
    "caller_guard",
    "check_agent",
    "service_of",
]

MERMAID = "text/vnd.mermaid"
RUN_ID = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="A run id.")]
CALL_ID = Annotated[
    str,
    Path(
        pattern=r"^[A-Za-z0-9_.:-]{1,128}$",
        description="The pending call's id (from its approval_requested event).",
    ),
]


# Dependencies are coroutines even where they need not await: FastAPI runs a plain function
# in its thread pool, a thread hop per request each.


def service_of(app: Any) -> RunService:
    """The run service the app's lifespan opened (kept on `app.state`)."""
    service: RunService = app.state.service
    return service


async def _service(request: Request) -> RunService:
    return service_of(request.app)


Service = Annotated[RunService, Depends(_service)]


def caller_guard(keys: KeyRing, limiter: RateLimiter) -> Callable[..., Any]:
    """The dependency every /v1 route gets where its router is included: caller and rate.

    Who is calling is checked when keys are set, and kept as `request.state.principal`; each
    caller is held to its rate. Without keys, the caller is its address and no key is
    documented.
    """

    def admit(request: Request, caller: str) -> None:
        wait = limiter.acquire(caller)
        if wait:
            raise HTTPException(
                429,
                "rate limit exceeded; slow down",
                headers={"Retry-After": retry_after(wait)},
            )
        request.state.principal = caller

    if not keys.enabled:

        async def anonymous(request: Request) -> None:
            host = request.client.host if request.client else "unknown"
            admit(request, f"ip:{host}")

        return anonymous

    bearer = HTTPBearer(auto_error=False, description="An API key of this service.")

    async def authorized(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> None:
        principal = keys.principal(credentials.credentials) if credentials else None
        if principal is None:
            raise HTTPException(
                401, "a valid API key is required", headers={"WWW-Authenticate": "Bearer"}
            )
        admit(request, principal)

    return authorized


async def _caller(request: Request) -> str:
    return str(request.state.principal)


# The principal `caller_guard` admitted (an API key's name, or `ip:<address>`).
Caller = Annotated[str, Depends(_caller)]


async def _existing_run(run_id: RUN_ID, service: Service) -> StoredRun:
    return await service.get(run_id)


Run = Annotated[StoredRun, Depends(_existing_run)]


async def _followed_run(run_id: RUN_ID, service: Service) -> StoredRun:
    return await service.following(run_id)


# A run to follow (its events): no read of the store while it is in flight in this service.
FollowedRun = Annotated[StoredRun, Depends(_followed_run)]


IdempotencyKey = Annotated[
    str,
    Header(
        max_length=255,
        description="Retries with the same key and body return the same run (empty: no key).",
    ),
]


def check_agent(service: RunService, agent: str | None) -> None:
    """Refuse (422, as a body field) an entry agent the system does not have.

    The OpenAPI document lists the valid names (see `orchestrator.api.app`).
    """
    agents = [a.name for a in service.system.config.agents]
    if agent is not None and agent not in (*agents, AUTO):
        listed = ", ".join(repr(n) for n in (*agents, AUTO))
        raise RequestValidationError(
            [
                {
                    "loc": ("body", "agent"),
                    "msg": f"Input should be one of {listed}",
                    "type": "literal_error",
                }
            ]
        )
