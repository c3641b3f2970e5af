"""`/v1/service`: what this service is, and where its runs' traces go."""

from __future__ import annotations

import asyncio
from datetime import date
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import AfterValidator

from agents.core.errors import ConfigError
from agents.ledger.spend import utc_day
from orchestrator import __version__
from orchestrator.api.deps import Caller, Service, needs
from orchestrator.errors import UnknownTenant, VersionRefused
from orchestrator.schemas import (
    CapLine,
    ErrorBody,
    ServiceView,
    SpendLine,
    UsageView,
    VersionsView,
    VersionView,
)
from orchestrator.service import RunService
from orchestrator.service.versions import RunningVersion
from orchestrator.system.config import AgentSystem, load_config, parse_config

__all__ = ["new_version", "router"]

router = APIRouter(tags=["service"])

# The media types a config sent in the body may have (YAML; JSON is YAML too).
_CONFIG_TYPES = (
    "application/yaml",
    "application/x-yaml",
    "text/yaml",
    "text/plain",
    "application/json",
)


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
        versions=_versions(service),
    )


@router.post(
    "/service/versions",
    openapi_extra={
        **needs("admin"),
        "requestBody": {
            "required": False,
            "description": "The new config (YAML). Without a body, the file the service was "
            "started with is read again.",
            "content": {t: {"schema": {"type": "string"}} for t in _CONFIG_TYPES[:1]},
        },
    },
    responses={
        422: {
            "model": ErrorBody,
            "description": "`version_refused`: the config is invalid (`details` lists each "
            "problem at its line), names another team, or its agents did not start; the "
            "current version still serves.",
        }
    },
)
async def roll_version(request: Request, service: Service) -> VersionsView:
    """Start a new version of the team beside the one serving (a reload); new runs go to it.

    Runs in flight, waiting for a person or resumed ones included, finish on the version
    they started on, whose agents stop once they hold none. The same config again changes
    nothing (`previous` is null). `SIGHUP` to `baton serve` does the same with its file.
    """
    text = await request.body()
    if text and request.headers.get("content-type", "").split(";")[0] not in _CONFIG_TYPES:
        raise VersionRefused(f"send the config as YAML ({_CONFIG_TYPES[0]})")
    return await new_version(service, request.app.state.config_path, text or None)


async def new_version(service: RunService, path: Path | None, text: bytes | None) -> VersionsView:
    """Load a config (`text`, else the file at `path`) and start it as a new version."""
    system = await asyncio.to_thread(_load, path, text)
    now, before = await service.roll(system)
    return VersionsView(
        version=now.version,
        previous=before.version if before is not None else None,
        running=_versions(service),
    )


def _load(path: Path | None, text: bytes | None) -> AgentSystem:
    try:
        if text is not None:
            return parse_config(text, "<request body>")
        if path is None:
            raise VersionRefused("the service was started with no config file: send one")
        return load_config(path)
    except OSError as exc:
        raise VersionRefused(f"cannot read {path}: {exc.strerror}") from None
    except ConfigError as exc:
        errors = [i for i in exc.issues if i.severity == "error"]
        raise VersionRefused(
            f"the config has {len(errors)} error(s): {errors[0] if errors else exc}",
            issues=[str(i) for i in exc.issues],
        ) from None


def _versions(service: RunService) -> list[VersionView]:
    current = service.versions.current
    return [_version(v, v is current) for v in service.versions.running()]


def _version(running: RunningVersion, current: bool) -> VersionView:
    config = running.system.config
    return VersionView(
        version=running.version,
        release=config.release,
        current=current,
        runs=len(running.runs),
        started_at=running.started_at,
        agents=[a.name for a in config.agents],
    )


def _calendar_day(day: str | None) -> str | None:
    """A day that is on the calendar (2026-13-45 has the shape of one)."""
    if day is not None:
        try:
            date.fromisoformat(day)
        except ValueError as exc:
            raise ValueError(f"{day} is no day of the calendar ({exc})") from None
    return day


@router.get(
    "/usage",
    responses={404: {"model": ErrorBody, "description": "Another tenant's (not an admin's)."}},
)
async def usage(
    service: Service,
    caller: Caller,
    day: Annotated[
        str | None,
        Query(
            pattern=r"^\d{4}-\d{2}-\d{2}$",
            json_schema_extra={"format": "date"},
            description="A day of the calendar, YYYY-MM-DD, UTC (default: today).",
        ),
        AfterValidator(_calendar_day),
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
    asked_day = day or utc_day()
    lines = [SpendLine(**row) for row in await service.spending(asked_day, asked)]
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
    caps = []
    if asked is not None:  # (the caller's key counts only against its own tenant's)
        for cap in service.caps(asked, caller.who if asked == caller.tenant else None):
            whose = [x for x in lines if cap.scope in (f"tenant:{x.tenant}", f"key:{x.key}")]
            tokens = sum(x.input_tokens + x.output_tokens for x in whose)
            usd = sum(x.cost_usd for x in whose)
            caps.append(
                CapLine(
                    scope=cap.scope,
                    tokens=cap.tokens,
                    usd=cap.usd,
                    left_tokens=None if cap.tokens is None else max(cap.tokens - tokens, 0),
                    left_usd=None if cap.usd is None else max(cap.usd - usd, 0.0),
                )
            )
    return UsageView(day=asked_day, tenant=asked, lines=lines, total=total, caps=caps)
