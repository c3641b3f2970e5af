"""The run service: admits runs, executes them on the engine, keeps their record, serves views.

Its parts: admission bounds (`admission`), the runs executing (`executor`), durable runs
(`durability`), approvals (`approvals`), followers' events (`run_events`, `feed_reader`), writes
kept through a store outage (`pending_writes`), leases and orphans (`upkeep`), traces and
diagrams (`views`, `live_trace`). `RunService` is imported on first use (it brings in Ray).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.service.run_service import RunService, ServiceLimits

__all__ = ["RunService", "ServiceLimits"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from orchestrator.service import run_service

        return getattr(run_service, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
