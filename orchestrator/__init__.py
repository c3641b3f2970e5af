"""Doors and rules: config loading and checks, routing, the run engine, and the CLI."""

from orchestrator.config import AgentSystem, SystemConfig, load_config, parse_config
from orchestrator.engine import AUTO, Engine, RunResult, connect_ray
from orchestrator.routing import RoutingDecision, route
from orchestrator.topology import Topology, build_topology

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
