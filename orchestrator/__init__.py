"""Doors and rules: the HTTP, A2A and MCP doors and the CLI, config loading, the engine, the store.

`Engine` and `connect_ray` are imported on first use: they bring in Ray and litellm, which
commands that only read the store (`baton runs`, `baton show`) do not need.
"""

from __future__ import annotations

from importlib import metadata
from typing import TYPE_CHECKING, Any

from orchestrator.engine import RunResult
from orchestrator.system import (
    AUTO,
    AgentSystem,
    RoutingDecision,
    SystemConfig,
    Topology,
    build_topology,
    load_config,
    parse_config,
    route,
)

if TYPE_CHECKING:
    from orchestrator.cluster import connect_ray
    from orchestrator.engine import Engine

try:
    __version__ = metadata.version("baton")
except metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "AUTO",
    "AgentSystem",
    "Engine",
    "RoutingDecision",
    "RunResult",
    "SystemConfig",
    "Topology",
    "build_topology",
    "connect_ray",
    "load_config",
    "parse_config",
    "route",
]


def __getattr__(name: str) -> Any:
    if name == "Engine":
        from orchestrator.engine import Engine

        return Engine
    if name == "connect_ray":
        from orchestrator.cluster import connect_ray

        return connect_ray
    raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")
