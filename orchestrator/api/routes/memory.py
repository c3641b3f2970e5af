"""`/v1/memory`: long-term memory items of the caller's tenant (`agents.memory`).

What agents keep with their `remember` tool, read and written by people and programs: by
namespace and key, and searched by text within a namespace and those under it. Each read and
write is a span of a trace of its own, sent to the OTLP backend when one is configured.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from agents.memory import KEY_PATTERN, NAMESPACE_PATTERN, MemoryRefused
from orchestrator.access import Access
from orchestrator.api.deps import Caller, Service
from orchestrator.errors import InvalidMemory, MemoryItemNotFound, UnknownTenant
from orchestrator.schemas import ErrorBody, MemoryItem, MemorySearchView, MemoryWrite
from orchestrator.service import RunService
from tracing import memory_operation

__all__ = ["router"]

router = APIRouter(tags=["memory"])

NAMESPACE = Annotated[
    str,
    Path(
        pattern=NAMESPACE_PATTERN,
        description="Levels joined by dots (`users.alice`): up to 8, each 1 to 64 of "
        "A-Z a-z 0-9 _ @ : -",
    ),
]
KEY = Annotated[str, Path(pattern=KEY_PATTERN, description="1 to 200 of A-Z a-z 0-9 _ . @ : -")]
TENANT = Annotated[
    str | None,
    Query(max_length=64, description="Another tenant's items (an admin's key only)."),
]
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "Nothing under this key (or another tenant's)."}
}


class _Traced:
    """What an operation found, for its span."""

    found: int | bool | None = None


@asynccontextmanager
async def _traced(
    service: RunService, op: str, tenant: str, namespace: str, **what: str | None
) -> AsyncIterator[_Traced]:
    """Time an operation; its span goes to the OTLP backend (if any) once it is done."""
    started, traced, error = time.time_ns(), _Traced(), None
    try:
        yield traced
    except Exception as exc:
        error = getattr(exc, "code", None) or type(exc).__name__
        raise
    finally:
        span = memory_operation(
            op, tenant, namespace, started_ns=started, found=traced.found, error=error, **what
        )
        await service.engine.export_spans([span])


def _tenant(caller: Access, tenant: str | None) -> str:
    """Whose items: the caller's tenant's, or one an admin names."""
    if tenant is None:
        return caller.tenant
    if not caller.sees(tenant):
        raise UnknownTenant(tenant)
    return tenant


@router.get("/memory/{namespace}", responses={404: _NOT_FOUND[404]})
async def search_memory(
    namespace: NAMESPACE,
    service: Service,
    caller: Caller,
    q: Annotated[str, Query(max_length=2000, description="Words to look for.")] = "",
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
    tenant: TENANT = None,
) -> MemorySearchView:
    """The items of a namespace and those under it: with the most of `q`'s words first.

    Without `q`, the newest first.
    """
    whose = _tenant(caller, tenant)
    async with _traced(service, "search", whose, namespace, query=q) as traced:
        found = await service.store.memory.search(whose, namespace, q, limit)
        traced.found = len(found)
    return MemorySearchView(namespace=namespace, query=q, items=found)


@router.get("/memory/{namespace}/{key}", responses=_NOT_FOUND)
async def get_memory(
    namespace: NAMESPACE, key: KEY, service: Service, caller: Caller, tenant: TENANT = None
) -> MemoryItem:
    """One item."""
    whose = _tenant(caller, tenant)
    async with _traced(service, "get", whose, namespace, key=key) as traced:
        item = await service.store.memory.get(whose, namespace, key)
        traced.found = item is not None
    if item is None:
        raise MemoryItemNotFound(namespace, key)
    return item


@router.put(
    "/memory/{namespace}/{key}",
    responses={
        201: {"model": MemoryItem, "description": "A new item."},
        422: {"model": ErrorBody, "description": "A value memory does not take."},
    },
)
async def put_memory(
    namespace: NAMESPACE,
    key: KEY,
    body: MemoryWrite,
    service: Service,
    caller: Caller,
    response: Response,
    tenant: TENANT = None,
) -> MemoryItem:
    """Write an item: `201` if it is new, `200` if it replaced the key's value."""
    whose = _tenant(caller, tenant)
    async with _traced(service, "put", whose, namespace, key=key):
        try:
            item, new = await service.store.memory.put(
                whose, namespace, key, body.value, caller.who
            )
        except MemoryRefused as exc:
            raise InvalidMemory(str(exc), namespace=namespace, key=key) from None
    response.status_code = 201 if new else 200
    return item


@router.delete("/memory/{namespace}/{key}", status_code=204, responses=_NOT_FOUND)
async def delete_memory(
    namespace: NAMESPACE, key: KEY, service: Service, caller: Caller, tenant: TENANT = None
) -> Response:
    """Forget an item."""
    whose = _tenant(caller, tenant)
    async with _traced(service, "delete", whose, namespace, key=key) as traced:
        traced.found = await service.store.memory.delete(whose, namespace, key)
    if not traced.found:
        raise MemoryItemNotFound(namespace, key)
    return Response(status_code=204)
