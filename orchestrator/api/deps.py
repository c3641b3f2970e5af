"""The dependencies routes declare: the run service, the caller, a run by id."""

from collections.abc import Callable
from typing import Annotated, Any, cast

from fastapi import Depends, Header, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from orchestrator.access import Access, Role
from orchestrator.api.guards import RateLimiter, retry_after
from orchestrator.service import RunService
from orchestrator.store import StoredRun
from orchestrator.system.routing import AUTO

__all__ = [
    "CALL_ID",
    "MERMAID",
    "ROLE_KEY",
    "RUN_ID",
    "Caller",
    "FollowedRun",
    "IdempotencyKey",
    "Run",
    "Service",
    "caller_guard",
    "check_agent",
    "needs",
    "role_of",
    "service_of",
]

MERMAID = "text/vnd.mermaid"
# A route's role other than its method's, said in the OpenAPI document (`needs`).
ROLE_KEY = "x-baton-role"
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


def role_of(method: str, route: Any) -> Role:
    """The role a route needs: its `x-baton-role`, else `read` to read and `submit` to act."""
    extra = getattr(route, "openapi_extra", None) or {}
    declared = extra.get(ROLE_KEY)
    if declared is not None:
        return cast(Role, declared)
    return "read" if method in ("GET", "HEAD") else "submit"


def needs(role: Role) -> dict[str, Any]:
    """A route's `openapi_extra` for a role other than its method's (see `role_of`)."""
    return {ROLE_KEY: role}


def caller_guard(limiter: RateLimiter, keyed: bool) -> Callable[..., Any]:
    """The dependency every /v1 route gets where its router is included: role and rate.

    `KeyCheck` has named the caller (`request.auth`, an `Access`); here its role is checked
    against the route's (403 naming both) and it is held to its rate. `keyed`: the service
    takes keys, and its OpenAPI document says so (a bearer scheme).
    """

    async def guard(request: Request) -> None:
        access = request.scope.get("auth")
        if not isinstance(access, Access):
            raise HTTPException(
                401, "a valid API key is required", headers={"WWW-Authenticate": "Bearer"}
            )
        refusal = access.lacks(role_of(request.method, request.scope.get("route")))
        if refusal is not None:
            raise HTTPException(403, refusal)
        wait = limiter.acquire(access.who)
        if wait:
            raise HTTPException(
                429,
                "rate limit exceeded; slow down",
                headers={"Retry-After": retry_after(wait)},
            )

    if not keyed:
        return guard
    bearer = HTTPBearer(auto_error=False, description="An API key of this service.")

    async def keyed_guard(
        request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
    ) -> None:
        await guard(request)

    return keyed_guard


async def _caller(request: Request) -> Access:
    access = request.scope.get("auth")
    assert isinstance(access, Access)  # `caller_guard` let it in
    return access


# Who is calling (`KeyCheck` named it, `caller_guard` let it in): its name, tenant and roles.
Caller = Annotated[Access, Depends(_caller)]


async def _existing_run(run_id: RUN_ID, service: Service, caller: Caller) -> StoredRun:
    return await service.get(run_id, caller)


Run = Annotated[StoredRun, Depends(_existing_run)]


async def _followed_run(run_id: RUN_ID, service: Service, caller: Caller) -> StoredRun:
    return await service.following(run_id, caller)


# A run to follow (its events): no read of the store while it is in flight in this service.
FollowedRun = Annotated[StoredRun, Depends(_followed_run)]


IdempotencyKey = Annotated[
    str,
    Header(
        max_length=255,
        description="Retries with the same key and body return the same run (empty: no key).",
    ),
]


def check_agent(service: RunService, agent: str | None, *also: str) -> None:
    """Refuse (422, as a body field) an entry agent the system does not have.

    `also`: other words the field takes there (a thread's `last`). The OpenAPI document lists
    the valid names (see `orchestrator.api.app`).
    """
    agents = [a.name for a in service.system.config.agents]
    if agent is not None and agent not in (*agents, AUTO, *also):
        listed = ", ".join(repr(n) for n in (*agents, AUTO, *also))
        raise RequestValidationError(
            [
                {
                    "loc": ("body", "agent"),
                    "msg": f"Input should be one of {listed}",
                    "type": "literal_error",
                }
            ]
        )
