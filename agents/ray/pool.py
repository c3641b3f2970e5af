"""Starting an agent system's actors on Ray: a named async actor per host replica, and the ledger.

Hosts come from `agents.core.placement.plan_hosts`: the agents that ask nothing of Ray share one
host, the others get their own. Actors are named (`{system}.{host}.{replica}`, where the host of
an agent with actors of its own is the agent's name) in a namespace and created with
`get_if_exists`, so a second driver on the same cluster finds them instead of duplicating them.
Detached hosts (a service's) are supervised: one that dies is created again
(`agents.ray.supervisor`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import ActorUnavailableError, RayActorError

from agents.core.gate_spec import GateSpec
from agents.core.limits import TraceOptions
from agents.core.placement import Host, plan_hosts
from agents.core.spec import AgentSpec, Autoscale, RayOptions, SupervisionOptions
from agents.ledger.feed import MAX_FEED
from agents.ledger.shards import default_shards
from agents.ray.dispatch import RayDispatcher, SystemRef
from agents.ray.gate_actor import GATES_ACTOR, GateActor, RayGates
from agents.ray.host import AgentHost
from agents.ray.ledger_actor import LedgerActor
from agents.ray.ledger_client import LedgerClient
from agents.ray.scaler import ReplicaScaler, ScaledHost, Scaling
from agents.ray.supervisor import HostRecipe, HostState, HostSupervisor

__all__ = ["AgentPool", "PoolOptions", "start_pool"]

logger = logging.getLogger(__name__)

READY_TIMEOUT_S = 120.0
# Ray gives the head node this resource (and no other node).
HEAD_NODE_RESOURCE = "node:__internal_head__"


@dataclass(frozen=True)
class PoolOptions:
    """How a system's actors are started (or found) on Ray: built once, where settings are read.

    Attributes:
        namespace: the Ray namespace of the actors.
        env: variables set in every agent actor (the config's `env:`, as forwarded); their
            values are secrets, never recorded.
        detached: the actors outlive the driver that started them (a service restarting, or
            several service replicas, find them); else they end with it. Detached hosts are
            supervised: one that dies is created again (`agents.ray.supervisor`).
        forbid_remote_models: the agents may call only Baton's built-in models and model
            servers on loopback (test suites set it).
        store_url: the run store, where the ledger writes runs' steps and events as they come
            (durable runs, which can resume); None: they live in the ledger's memory only.
        code_path: folders on every agent host's import path (the team file's: its own tools,
            hooks, schemas and workflows import there, as in the process that read it).
        ledger_feed_events: events of every run the ledger keeps for the services following
            it (`RunLedger.feed`): what bounds its memory.
        ledger_shards: the actors a team's ledger is cut into (None: one per
            `CORES_PER_SHARD` cores of the cluster). A team whose ledger is already up keeps
            the shards it has (every replica and agent must route a run alike).
    """

    namespace: str = "baton"
    env: Mapping[str, str] = field(default_factory=dict)
    detached: bool = False
    forbid_remote_models: bool = False
    store_url: str | None = None
    code_path: tuple[str, ...] = ()
    ledger_feed_events: int = MAX_FEED
    ledger_shards: int | None = None


@dataclass
class AgentPool:
    """A system's agent hosts on Ray, with its ledger actor and where each replica landed.

    `actors` lists, for each agent, the replicas of the host it runs in (agents sharing a host
    share its handles); `hosts` lists each host's replicas once, as first started (a replica
    the supervisor created again has a new handle: `current` finds it by name).
    """

    system: SystemRef
    ledger_handles: tuple[Any, ...]  # one per shard, in order
    hosts: dict[str, list[Any]]
    actors: dict[str, list[Any]]
    placement: list[dict[str, Any]]
    plan: list[Host]
    supervisor: Any | None = None
    gates: RayGates | None = None  # the cluster's provider gates, when the system has any
    scaler: Any | None = None  # grows and shrinks the autoscaled hosts, when there are any

    @property
    def ledger(self) -> LedgerClient:
        """A typed client of the system's ledger (its shards)."""
        return LedgerClient(self.ledger_handles)

    def dispatcher(self, ledger: LedgerClient | None = None) -> RayDispatcher:
        """The dispatcher that hands delegations to the agents' replicas."""
        return RayDispatcher(self.system, ledger or self.ledger)

    async def replicas(self) -> dict[str, list[int]]:
        """Each host's replicas that take delegations now (the scaler's, for autoscaled ones)."""
        running = {host: list(range(len(handles))) for host, handles in self.hosts.items()}
        if self.scaler is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):
                    _, scaled = await self.scaler.membership.remote(-1)
                    running |= scaled
        return running

    def scaled_replicas(self) -> list[Any]:
        """The handles of the replicas the scaler started (past those first started)."""
        found = []
        for host in self.plan:
            if host.ray.autoscale is None:
                continue
            for i in range(len(self.hosts[host.name]), host.ray.autoscale.max):
                with contextlib.suppress(ValueError):
                    name = self.system.host_actor_name(host.name, i)
                    found.append(ray.get_actor(name, namespace=self.system.namespace))
        return found

    async def scaling(self) -> list[Scaling]:
        """The scaler's decisions of the last hour (none without autoscaled hosts)."""
        if self.scaler is None:
            return []
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2.0):
                history: list[Scaling] = await self.scaler.history.remote()
                return history
        return []

    def current(self, host: str, replica: int) -> Any:
        """The live handle of a host replica, looked up by name, and kept in `hosts`.

        The supervisor may have created it again since its handle was kept; the scaler may
        have started it (past the replicas first started).
        """
        if replica >= len(self.hosts[host]):
            name = self.system.host_actor_name(host, replica)
            return ray.get_actor(name, namespace=self.system.namespace)
        if self.supervisor is not None:
            try:
                name = self.system.host_actor_name(host, replica)
                self.hosts[host][replica] = ray.get_actor(name, namespace=self.system.namespace)
            except ValueError:
                pass  # dead and not created again yet: the old handle says so
        return self.hosts[host][replica]

    async def ask(self, timeout_s: float) -> list[dict[str, Any]]:
        """Each agent's replicas, asked now: where each runs, how busy, whether restarted.

        One row per agent and replica: node id and address, pid, the agents sharing its actor,
        delegations in flight and served, restarts by the supervisor. A replica that does not
        answer says why (`restarting` or `crash_loop` while the supervisor has it so).
        """
        watched = await self._watched(timeout_s)

        async def ask(host: Host, replica: int) -> list[dict[str, Any]]:
            name = self.system.host_actor_name(host.name, replica)
            watch = watched.get(name)
            supervised = {"restarts": watch["restarts"]} if watch else {}
            try:
                async with asyncio.timeout(timeout_s):
                    stats = await self._stats(host.name, replica)
            except Exception as exc:
                state = f"unavailable: {type(exc).__name__}"
                if watch is not None and watch["state"] != "alive":
                    state = f"{watch['state']}: {watch['cause']}"
                down = {"actor": name, "state": state, **supervised}
                return [{**down, "agent": agent} for agent in host.agents]
            agents = stats.pop("agents")
            return [
                {
                    **stats,
                    **agents[agent],
                    **supervised,
                    "agent": agent,
                    "shares_with": [a for a in host.agents if a != agent],
                    "state": "alive",
                }
                for agent in host.agents
            ]

        running = await self.replicas()
        asked = await asyncio.gather(
            *(ask(host, i) for host in self.plan for i in running.get(host.name, []))
        )
        return [row for rows in asked for row in rows]

    async def _stats(self, host: str, replica: int) -> dict[str, Any]:
        """A replica's stats, through the handle kept.

        A replica created again since (the handle kept is dead) is looked up by name once,
        not on every ask.
        """
        if replica >= len(self.hosts[host]):  # started by the scaler: found by name
            scaled: dict[str, Any] = await self.current(host, replica).stats.remote()
            return scaled
        try:
            stats: dict[str, Any] = await self.hosts[host][replica].stats.remote()
        except (RayActorError, ActorUnavailableError):
            kept = self.hosts[host][replica]
            if self.current(host, replica) is kept:
                raise
            stats = await self.hosts[host][replica].stats.remote()
        return stats

    async def left_down(self, agent: str, timeout_s: float = 2.0) -> str | None:
        """Why `agent` cannot be called: every replica of its host left down in a crash loop.

        None when one may answer (or the supervisor cannot say). Asks the supervisor.
        """
        host = next((h for h in self.plan if agent in h.agents), None)
        if host is None:
            return None
        states = await self._watched(timeout_s)
        replicas = (await self.replicas()).get(host.name, [])
        found = [states.get(self.system.host_actor_name(host.name, i)) for i in replicas]
        if not found or any(s is None or s["state"] != "crash_loop" for s in found):
            return None
        return str(found[0]["cause"])  # type: ignore[index]

    async def _watched(self, timeout_s: float) -> dict[str, HostState]:
        if self.supervisor is None:
            return {}
        try:
            async with asyncio.timeout(timeout_s):
                states: dict[str, HostState] = await self.supervisor.states.remote()
                return states
        except Exception:
            return {}  # the replicas answer for themselves


def _actor_options(
    ray_options: RayOptions, name: str, namespace: str, detached: bool
) -> dict[str, Any]:
    options: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "get_if_exists": True,
        "lifetime": "detached" if detached else None,
        "num_cpus": ray_options.num_cpus,
        "max_concurrency": ray_options.max_concurrency,
        "max_restarts": ray_options.max_restarts,
    }
    if ray_options.num_gpus:
        options["num_gpus"] = ray_options.num_gpus
    if ray_options.resources:
        options["resources"] = dict(ray_options.resources)
    # Not `runtime_env={"env_vars": ...}` for the forwarded variables: Ray's runtime-env agent
    # writes those to its log in clear, and they are provider keys. They travel as an argument.
    return options


def start_pool(
    agents: list[AgentSpec],
    delegates: Mapping[str, list[str]],
    options: PoolOptions,
    *,
    prefix: str,
    trace: TraceOptions | None = None,
    shared_replicas: int = 1,
    shared_autoscale: Autoscale | None = None,
    supervision: SupervisionOptions | None = None,
    gates: tuple[GateSpec, ...] = (),
    ledger: tuple[Any, ...] | None = None,
) -> AgentPool:
    """Create (or find) every actor of the system and wait until each one is warm.

    Args:
        agents: the agents' specs.
        delegates: whom each agent may delegate to.
        options: the actors' namespace, environment and lifetime, and the run store.
        prefix: names the system's actors (`{prefix}.{host}.{replica}`, `{prefix}.ledger`).
        trace: what the agents' spans record.
        shared_replicas: replicas of the shared host (see `SharedHostOptions`).
        shared_autoscale: the shared host's replicas follow the load between these bounds.
        supervision: how detached hosts that die are created again (`SupervisionOptions`).
        gates: the system's provider gates (declared in the cluster's gates actor).
        ledger: the ledger's shards to use, another version's of the same service (None: the
            system's own, found or created).
    """
    namespace, detached = options.namespace, options.detached
    plan = plan_hosts(agents, shared_replicas, shared_autoscale)
    host_of = {agent: host for host in plan for agent in host.agents}
    system = SystemRef(
        namespace=namespace,
        prefix=prefix,
        replicas={a.name: host_of[a.name].ray.replicas for a in agents},
        max_restarts={a.name: host_of[a.name].ray.max_restarts for a in agents},
        hosts={a.name: host_of[a.name].name for a in agents},
        supervised=detached,
        autoscaled=any(host.ray.autoscale is not None for host in plan),
    )
    if ledger is None:
        ledger = _open_ledger(system, options)
    gate_port = _open_gates(gates, namespace, detached)
    roster = [a.card() for a in agents]
    by_name = {a.name: a for a in agents}
    recipes = {
        host.name: [
            HostRecipe(
                name=system.host_actor_name(host.name, i),
                actor_class=AgentHost,
                options=_actor_options(
                    host.ray, system.host_actor_name(host.name, i), namespace, detached
                ),
                args=(
                    [by_name[a] for a in host.agents],
                    roster,
                    {a: list(delegates[a]) for a in host.agents},
                    system,
                    ledger,
                    i,
                    trace or TraceOptions(),
                    dict(options.env),
                    options.forbid_remote_models,
                    gate_port,
                    options.code_path,
                ),
            )
            # An autoscaled host's recipes go up to its `max`; the first `replicas` start now.
            for i in range(_most(host))
        ]
        for host in plan
    }
    starting = {host.name: recipes[host.name][: host.ray.replicas] for host in plan}
    hosts = {host: [recipe.create() for recipe in replicas] for host, replicas in starting.items()}
    # The ledger and every host start and warm up at once (hosts hold the ledger's handle,
    # so none waits for another).
    started = [h for hs in hosts.values() for h in hs]
    answers = _answers(
        [
            *(functools.partial(h.ready.remote) for h in started),
            *(functools.partial(shard.events.remote, "-") for shard in ledger),
        ]
    )
    placement = answers[: len(started)]
    supervisor = None
    if system.supervised:
        supervisor = HostSupervisor.options(  # type: ignore[attr-defined]
            name=system.supervisor_name,
            namespace=namespace,
            get_if_exists=True,
            lifetime="detached",
            resources={HEAD_NODE_RESOURCE: 0.001},  # as the ledger: the node that stays
            max_restarts=-1,
        ).remote()
        every = [recipe for replicas in starting.values() for recipe in replicas]
        ray.get(supervisor.watch.remote(every, supervision or SupervisionOptions()))
    scaler = _start_scaler(plan, recipes, system, hosts, detached) if system.autoscaled else None
    return AgentPool(
        system=system,
        ledger_handles=ledger,
        hosts=hosts,
        actors={a.name: hosts[host_of[a.name].name] for a in agents},
        placement=placement,
        plan=plan,
        supervisor=supervisor,
        gates=gate_port,
        scaler=scaler,
    )


def _open_ledger(system: SystemRef, options: PoolOptions) -> tuple[Any, ...]:
    """The system's ledger shards, found or created (their count: the first shard's)."""

    def shard(index: int, count: int) -> Any:
        return LedgerActor.options(  # type: ignore[attr-defined]
            name=system.ledger_shard_name(index),
            namespace=system.namespace,
            get_if_exists=True,
            lifetime="detached" if options.detached else None,
            # On the head node, which the cluster cannot lose anyway: worker nodes come and go.
            resources={HEAD_NODE_RESOURCE: 0.001},
            # Restarted when it dies: it takes its runs in flight up again from the store as
            # they are next heard of; calls on their way are made again to the new one (each
            # is safe to repeat: an item or a word that came before is not counted twice).
            max_restarts=-1,
            max_task_retries=-1,
        ).remote(options.store_url, options.ledger_feed_events, count)

    cpus = ray.cluster_resources().get("CPU", 1.0)  # type: ignore[no-untyped-call]
    wanted = options.ledger_shards or default_shards(cpus)
    first = shard(0, wanted)
    # Another replica (or an earlier life of this service) may have made it with its count.
    count: int = _answers([first.shards.remote])[0]
    if count != wanted and options.ledger_shards:
        logger.warning(
            "the team's ledger has %d shards (not the %d asked): it keeps them while it is up",
            count, wanted,
        )  # fmt: skip
    return (first, *(shard(i, count) for i in range(1, count)))


def _answers(calls: list[Callable[[], Any]]) -> list[Any]:
    """Each call's answer (made at once, awaited within `READY_TIMEOUT_S` in all).

    Each is safe to repeat: one whose request or reply Ray lost (`ActorUnavailableError`: the
    actor may or may not have run it) is made again.
    """
    deadline = time.monotonic() + READY_TIMEOUT_S
    refs = [call() for call in calls]
    answers = []
    for i, call in enumerate(calls):
        while True:
            try:
                answers.append(ray.get(refs[i], timeout=max(deadline - time.monotonic(), 0)))
                break
            except ActorUnavailableError:
                if time.monotonic() >= deadline:
                    raise
                refs[i] = call()
    return answers


def _most(host: Host) -> int:
    """The most replicas the host may have."""
    return max(host.ray.replicas, host.ray.autoscale.max if host.ray.autoscale else 0)


def _start_scaler(
    plan: list[Host],
    recipes: dict[str, list[HostRecipe]],
    system: SystemRef,
    hosts: dict[str, list[Any]],
    detached: bool,
) -> Any:
    """Find (or create) the system's scaler and have it scale the autoscaled hosts."""
    scaler = ReplicaScaler.options(  # type: ignore[attr-defined]
        name=system.scaler_name,
        namespace=system.namespace,
        get_if_exists=True,
        lifetime="detached" if detached else None,
        resources={HEAD_NODE_RESOURCE: 0.001},  # as the ledger: the node that stays
        max_restarts=-1,
    ).remote()
    scaled = [
        ScaledHost(
            host=host.name,
            policy=host.ray.autoscale,
            recipes=tuple(recipes[host.name]),
            supervisor=system.supervisor_name if system.supervised else None,
        )
        for host in plan
        if host.ray.autoscale is not None
    ]
    running = {host: list(range(len(handles))) for host, handles in hosts.items()}
    ray.get(scaler.manage.remote(scaled, running), timeout=READY_TIMEOUT_S)
    return scaler


def _open_gates(specs: tuple[GateSpec, ...], namespace: str, detached: bool) -> RayGates | None:
    """Find (or create) the cluster's gates actor and declare `specs` there (None: no gates)."""
    if not specs:
        return None
    handle = GateActor.options(  # type: ignore[attr-defined]
        name=GATES_ACTOR,
        namespace=namespace,
        get_if_exists=True,
        lifetime="detached" if detached else None,
        resources={HEAD_NODE_RESOURCE: 0.001},  # as the ledger: the node that stays
        # Restarted with the gates it was told of (their windows start again); a call on its
        # way is made again there (a lease the dead one gave is no one's now).
        max_restarts=-1,
        max_task_retries=-1,
    ).remote()
    ray.get(handle.declare.remote(list(specs)), timeout=READY_TIMEOUT_S)
    return RayGates(handle, specs)
