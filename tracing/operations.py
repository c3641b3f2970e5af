"""Spans of a service's own operations outside any run: one trace each, made as records.

A long-term memory item read or written over HTTP (`/v1/memory`) belongs to no run's trace,
and a service exports runs' spans only (`tracing.export`): such an operation is a span of a
trace of its own, made here as a record for the export.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from tracing import attributes as attr
from tracing.records import SpanRecord

__all__ = ["memory_attributes", "memory_operation"]


def memory_attributes(
    tenant: str, namespace: str, key: str | None = None, query: str | None = None
) -> dict[str, Any]:
    """What a memory operation's span says of it, by an agent's tool or over HTTP."""
    attributes: dict[str, Any] = {attr.BATON_TENANT: tenant, attr.BATON_MEMORY_NAMESPACE: namespace}
    if key is not None:
        attributes[attr.BATON_MEMORY_KEY] = key
    if query is not None:
        attributes[attr.BATON_MEMORY_QUERY] = query[:500]
    return attributes


def memory_operation(
    op: str,
    tenant: str,
    namespace: str,
    *,
    started_ns: int,
    key: str | None = None,
    query: str | None = None,
    found: int | bool | None = None,
    error: str | None = None,
) -> SpanRecord:
    """A span (`baton.memory {op}`) of a memory operation that began at `started_ns`."""
    attributes = memory_attributes(tenant, namespace, key, query)
    if found is not None:
        attributes[attr.BATON_MEMORY_FOUND] = found
    if error is not None:
        attributes[attr.ERROR_TYPE] = error
    return {
        "trace_id": f"{random.getrandbits(128) or 1:032x}",
        "span_id": f"{random.getrandbits(64) or 1:016x}",
        "parent_span_id": None,
        "name": attr.MEMORY_SPAN_PREFIX + op,
        "kind": "SERVER",
        "start_ns": started_ns,
        "end_ns": time.time_ns(),
        "status": "ERROR" if error is not None else "UNSET",
        "status_message": error,
        "attributes": attributes,
        "events": [],
        "resource": {
            "service.name": "baton",
            attr.BATON_PROCESS_ROLE: "service",
            "process.pid": os.getpid(),
        },
    }
