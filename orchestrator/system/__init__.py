"""A team's config: loading and checking YAML, the delegation topology, routing, code revision."""

from orchestrator.system.config import (
    AgentSystem,
    SystemConfig,
    default_config_path,
    load_config,
    parse_config,
)
from orchestrator.system.routing import AUTO, RoutingDecision, route
from orchestrator.system.topology import Topology, build_topology

__all__ = [
    "AUTO",
    "AgentSystem",
    "RoutingDecision",
    "SystemConfig",
    "Topology",
    "build_topology",
    "default_config_path",
    "load_config",
    "parse_config",
    "route",
]
