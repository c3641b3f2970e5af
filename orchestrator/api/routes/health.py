"""`/healthz` and `/readyz`: is the process up, can it run tasks."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from orchestrator.api.deps import Service
from orchestrator.schemas import Health, Readiness

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> Health:
    """The process is up."""
    return Health(status="ok")


@router.get(
    "/readyz",
    responses={
        503: {
            "model": Readiness,
            "description": "Ray, an agent host or the store is not reachable.",
        }
    },
)
async def readyz(request: Request, service: Service) -> Response:
    """Ray, every agent host and the run store are up."""
    checks = await service.views.check()
    access = getattr(request.app.state, "access", None)
    if access is not None:
        access.refresh()
        checks["access_file"] = access.problem or "ok"
    # Ray, the agents' hosts and the store decide; degraded tools, and an access file whose
    # latest edit is wrong (the one before stays in force), are reported, not fatal.
    ready = all(checks.get(k) == "ok" for k in ("ray", "agents", "store"))
    body = Readiness(
        status="ready" if ready else "not_ready",
        checks=checks,
        system_version=service.system.version,
        versions=service.versions.names(),
    )
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)
