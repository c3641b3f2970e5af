"""`/v1/service`: what this service is, and where its runs' traces go."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from agents.runtime.spend import utc_day
from orchestrator import __version__
from orchestrator.api.deps import Caller, Service
from orchestrator.errors import UnknownTenant
from orchestrator.schemas import ErrorBody, ServiceView, SpendLine, UsageView

__all__ = ["router"]

router = APIRouter(tags=["service"])


@router.get("/service")
async def service_view(service: Service) -> ServiceView:
    """The agent system served, Baton's version, this instance, its trace export and log."""
    return ServiceView(
        system=service.system.config.name,
        system_version=service.system.version,
        version=__version__,
        instance=service.owner,
        trace_export=service.engine.trace_export,
        step_log=service.engine.logs_steps,
    )


@router.get(
    "/usage",
    responses={404: {"model": ErrorBody, "description": "Another tenant's (not an admin's)."}},
)
async def usage(
    service: Service,
    caller: Caller,
    day: Annotated[
        str | None,
        Query(pattern=r"^\d{4}-\d{2}-\d{2}$", description="YYYY-MM-DD, UTC (default: today)."),
    ] = None,
    tenant: Annotated[
        str | None, Query(max_length=64, description="One tenant (an admin's default: all).")
    ] = None,
) -> UsageView:
    """A UTC day's spending per tenant, key, agent and model, and its total.

    What every model reply cost (litellm's prices) and its tokens, as the ledger counts them
    against the spending caps. A key sees its own tenant's; an admin's, every tenant's.
    """
    if tenant is not None and not caller.sees(tenant):
        raise UnknownTenant(tenant)
    asked = tenant if tenant is not None else caller.tenant_filter
    day = day or utc_day()
    lines = [SpendLine(**row) for row in await service.store.spending(day, asked)]
    total = SpendLine(
        tenant=asked or "*",
        key="*",
        agent="*",
        model="*",
        calls=sum(x.calls for x in lines),
        input_tokens=sum(x.input_tokens for x in lines),
        output_tokens=sum(x.output_tokens for x in lines),
        cost_usd=sum(x.cost_usd for x in lines),
        unpriced_calls=sum(x.unpriced_calls for x in lines),
    )
    return UsageView(day=day, tenant=asked, lines=lines, total=total)
