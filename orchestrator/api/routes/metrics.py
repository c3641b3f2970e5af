"""`/metrics`: the service's metrics in Prometheus' text format (a scraper with an admin key)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from orchestrator.api.deps import Service, needs
from orchestrator.errors import NotReady

__all__ = ["router"]

router = APIRouter()


@router.get("/metrics", include_in_schema=False, openapi_extra=needs("admin"))
async def metrics(service: Service) -> Response:
    """The GenAI conventions' model-call instruments and Baton's own.

    See `orchestrator.service.metrics`.
    """
    if service.metrics is None:
        raise NotReady("this service keeps no metrics")
    from orchestrator.service.metrics import PROMETHEUS_CONTENT_TYPE

    return Response(service.metrics.prometheus(), media_type=PROMETHEUS_CONTENT_TYPE)
