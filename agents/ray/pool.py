"""Starting an agent system's actors on Ray: one named async actor per replica, plus the ledger.

Actors are named (`{system}.{agent}.{replica}`) in a namespace and created with
`get_if_exists`, so a second driver on the same cluster finds them instead of duplicating them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import ray

from agents.core.limits import TraceOptions
from agents.core.spec import AgentSpec
from agents.ray.actor import AgentActor, RayDispatcher, SystemRef
from agents.ray.ledger_actor import LedgerActor
from agents.ray.ledger_client import LedgerClient

__all__ = ["AgentPool", "start_pool"]

READY_TIMEOUT_S = 120.0
# Ray gives the head node this resource (and no other node).
HEAD_NODE_RESOURCE = "node:__internal_head__"


@dataclass
class AgentPool:
    """A system's agent actors on Ray, with its ledger actor and where each replica landed."""

    system: SystemRef
    ledger_handle: Any
    actors: dict[str, list[Any]]
    placement: list[dict[str, Any]]

    @property
    def ledger(self) -> LedgerClient:
        """A typed client of the system's ledger actor."""
        return LedgerClient(self.ledger_handle)

    def dispatcher(self, ledger: LedgerClient | None = None) -> RayDispatcher:
        """The dispatcher that hands delegations to the agents' replicas."""
        return RayDispatcher(self.system, ledger or self.ledger)


def _actor_options(spec: AgentSpec, name: str, namespace: str, detached: bool) -> dict[str, Any]:
    options: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "get_if_exists": True,
        "lifetime": "detached" if detached else None,
        "num_cpus": spec.ray.num_cpus,
        "max_concurrency": spec.ray.max_concurrency,
        "max_restarts": spec.ray.max_restarts,
    }
    if spec.ray.num_gpus:
        options["num_gpus"] = spec.ray.num_gpus
    if spec.ray.resources:
        options["resources"] = dict(spec.ray.resources)
    # Not `runtime_env={"env_vars": ...}` for the forwarded variables: Ray's runtime-env agent
    # writes those to its log in clear, and they are provider keys. They travel as an argument.
    return options


def start_pool(
    agents: list[AgentSpec],
    delegates: Mapping[str, list[str]],
    *,
    namespace: str,
    prefix: str,
    env: Mapping[str, str] | None = None,
    trace: TraceOptions | None = None,
    detached: bool = False,
    forbid_remote: bool = False,
) -> AgentPool:
    """Create (or find) every actor of the system and wait until each one is warm.

    Args:
        agents: the agents' specs.
        delegates: whom each agent may delegate to.
        namespace: the Ray namespace of the actors.
        prefix: names the system's actors (`{prefix}.{agent}.{replica}`, `{prefix}.ledger`).
        env: environment variables set in every agent actor; their values are secrets.
        trace: what the agents' spans record.
        detached: whether the actors outlive this driver (see `Engine`).
        forbid_remote: the agents may call only built-in models and servers on loopback.
    """
    system = SystemRef(
        namespace=namespace,
        prefix=prefix,
        replicas={a.name: a.ray.replicas for a in agents},
        max_restarts={a.name: a.ray.max_restarts for a in agents},
    )
    ledger = LedgerActor.options(  # type: ignore[attr-defined]
        name=system.ledger_name,
        namespace=namespace,
        get_if_exists=True,
        lifetime="detached" if detached else None,
        # On the head node, which the cluster cannot lose anyway: worker nodes may come and go.
        resources={HEAD_NODE_RESOURCE: 0.001},
        max_restarts=-1,  # a new, empty ledger beats none: runs in flight lose their events
    ).remote()
    ray.get(ledger.events.remote("-"), timeout=READY_TIMEOUT_S)  # exists before agents look it up
    roster = [a.card() for a in agents]
    actors: dict[str, list[Any]] = {}
    for spec in agents:
        actors[spec.name] = [
            AgentActor.options(  # type: ignore[attr-defined]
                **_actor_options(spec, system.actor_name(spec.name, i), namespace, detached)
            ).remote(
                spec,
                roster,
                list(delegates[spec.name]),
                system,
                i,
                trace or TraceOptions(),
                dict(env or {}),
                forbid_remote,
            )
            for i in range(spec.ray.replicas)
        ]
    placement = ray.get(
        [h.ready.remote() for hs in actors.values() for h in hs], timeout=READY_TIMEOUT_S
    )
    return AgentPool(system=system, ledger_handle=ledger, actors=actors, placement=placement)
