"""Which agents share an actor process, and which get actors of their own.

An agent that asks nothing of Ray shares the team's host: one actor process (about 300 MB with
litellm loaded; or several replicas of it, `shared_host.replicas`) runs all such agents, and
delegations between them stay in that process. An agent with any `ray:` option (replicas, CPUs,
GPUs, custom resources, restarts, concurrency, or `isolate: true`) gets actors of its own,
placed and scaled as it asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agents.core.spec import AgentSpec, Autoscale, RayOptions

__all__ = ["SHARED_HOST", "Host", "own_actors_reason", "plan_hosts"]

# Agent names start with a letter, so this host name cannot be an agent's.
SHARED_HOST = "_shared"


@dataclass(frozen=True)
class Host:
    """One kind of actor: the agents it runs and how it is placed (its replicas share it)."""

    name: str
    agents: tuple[str, ...]
    ray: RayOptions

    @property
    def shared(self) -> bool:
        """Whether this is the team's shared host."""
        return self.name == SHARED_HOST


def own_actors_reason(spec: AgentSpec) -> str | None:
    """Why the agent gets actors of its own (None: it shares the team's host)."""
    options = spec.ray
    if options.isolate:
        return "isolate: True"
    asked = [
        f"{name}: {getattr(options, name)}"
        for name in RayOptions.model_fields
        if name != "isolate" and getattr(options, name) != getattr(_DEFAULTS, name)
    ]
    return ", ".join(asked) or None


_DEFAULTS = RayOptions()


def plan_hosts(
    agents: Sequence[AgentSpec], shared_replicas: int = 1, shared_autoscale: Autoscale | None = None
) -> list[Host]:
    """The system's hosts: the shared one (if any agent shares), then one per other agent."""
    apart = {a.name for a in agents if own_actors_reason(a) is not None}
    shared = tuple(a.name for a in agents if a.name not in apart)
    options = RayOptions(replicas=shared_replicas, autoscale=shared_autoscale)
    hosts = [Host(SHARED_HOST, shared, options)] if shared else []
    return hosts + [Host(a.name, (a.name,), a.ray) for a in agents if a.name in apart]
