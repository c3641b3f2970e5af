"""`/v1/service`: what this service is, and where its runs' traces go."""

from __future__ import annotations

from fastapi import APIRouter

from orchestrator import __version__
from orchestrator.api.deps import Service
from orchestrator.schemas import ServiceView

__all__ = ["router"]

router = APIRouter(tags=["service"])


@router.get("/service")
async def service_view(service: Service) -> ServiceView:
    """The agent system served, Baton's version, this instance, its trace export and log."""
    return ServiceView(
        system=service.system.config.name,
        version=__version__,
        instance=service.owner,
        trace_export=service.engine.trace_export,
        step_log=service.engine.logs_steps,
    )
