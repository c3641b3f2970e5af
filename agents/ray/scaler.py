"""Replicas that follow the load: a system's autoscaled hosts grow and shrink (`Autoscale`).

One named actor per system (`{prefix}.scaler`, on the head node, as the ledger and the
supervisor) decides for every service replica that shares the system's actors. Every half
second it asks each replica of an autoscaled host how many delegations it holds. Above the
host's `target` per replica for `up_after_s`, it starts as many replicas as bring the load to the
target (up to `max`): a replica that does not fit the cluster waits for room, and its resource
demand is what Ray's autoscaler (KubeRay's, a cloud's) adds a node for. A replica that held
nothing for `down_after_s` is drained (above `min`): taken out of the replicas dispatchers
choose from, then stopped once it holds nothing, so no delegation is lost or run twice.

Dispatchers learn the replicas to choose from by a call parked here (`membership`), answered
when they change: no polling. Each decision is kept for an hour (`history`) and logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, TypedDict

import ray
from ray.exceptions import ActorUnavailableError, RayActorError

from agents.core.errors import describe_error
from agents.core.spec import Autoscale
from agents.ray.kept import keep, kept
from agents.ray.supervisor import HostRecipe

__all__ = ["SCALER_TICK_S", "ReplicaScaler", "ScaledHost", "Scaling"]

logger = logging.getLogger(__name__)

SCALER_TICK_S = 0.5
# How long a replica taken out of the choice is given for dispatchers to hear of it, before
# its emptiness is trusted (a delegation sent just before may not have reached it yet).
DRAIN_GRACE_S = 2.0
# How long a new replica may wait for room (a node being added) and start.
START_TIMEOUT_S = 900.0
HISTORY_S = 3600.0
# A parked `membership` call returns after this long even if nothing changed.
PARK_S = 60.0


@dataclass(frozen=True)
class ScaledHost:
    """An autoscaled host: its policy, and the recipes of each replica it may have (`max`)."""

    host: str
    policy: Autoscale
    recipes: tuple[HostRecipe, ...]
    supervisor: str | None = None  # the system's supervisor's name, when its hosts are


class Scaling(TypedDict):
    """One decision: a host's replicas from how many to how many, and why."""

    at: float  # Unix seconds
    host: str
    before: int
    after: int
    why: str


@dataclass
class _Managed:
    spec: ScaledHost
    active: list[int]
    starting: set[int] = field(default_factory=set)
    draining: set[int] = field(default_factory=set)
    over_since: float | None = None
    idle_since: dict[int, float] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None


@ray.remote(num_cpus=0)
class ReplicaScaler:
    """Grows and shrinks a system's autoscaled hosts (see the module).

    Every call runs on the actor's one event loop: the hosts' loops and the parked calls share
    state freely.
    """

    async def __init__(self) -> None:  # type: ignore[misc]  # (Ray awaits an async actor's)
        self._hosts: dict[str, _Managed] = {}
        self._version = 0
        self._changed = asyncio.Event()
        self._history: deque[Scaling] = deque()
        self._namespace = ray.get_runtime_context().namespace
        found: list[ScaledHost] | None = kept()  # restarted by Ray (`agents.ray.kept`)
        if found is not None:
            # Versions its dispatchers knew are not this life's; the replicas up are those
            # whose actors live.
            self._version = time.time_ns()
            running = {
                h.host: [i for i, r in enumerate(h.recipes) if self._lives(r)] for h in found
            }
            await self.manage(found, running)
            logger.warning("the scaler was restarted: it scales %d hosts again", len(found))

    async def manage(self, hosts: list[ScaledHost], running: dict[str, list[int]]) -> None:
        """Scale these hosts, whose replicas `running` are up (a service starting the system).

        A host already managed keeps its replicas (another service replica started first).
        """
        for spec in hosts:
            managed = self._hosts.get(spec.host)
            if managed is not None and managed.task is not None and not managed.task.done():
                managed.spec = spec
                continue
            managed = _Managed(spec, sorted(running.get(spec.host, [0])))
            self._hosts[spec.host] = managed
            managed.task = asyncio.get_running_loop().create_task(self._loop(managed))
        self._bump()
        keep([m.spec for m in self._hosts.values()])  # for its next life

    def _lives(self, recipe: HostRecipe) -> bool:
        """Whether a replica's actor is there (alive, or being restarted)."""
        try:
            ray.get_actor(recipe.name, namespace=self._namespace)
        except ValueError:
            return False
        return True

    async def membership(self, known: int) -> tuple[int, dict[str, list[int]]]:
        """The replicas to choose from, by host, once they differ from version `known`."""
        if known == self._version:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(PARK_S):
                    await self._changed.wait()
        return self._version, {h: list(m.active) for h, m in self._hosts.items()}

    def history(self) -> list[Scaling]:
        """The decisions of the last hour, oldest first."""
        self._forget()
        return list(self._history)

    def _bump(self) -> None:
        self._version += 1
        self._changed.set()
        self._changed = asyncio.Event()

    def _forget(self) -> None:
        while self._history and time.time() - self._history[0]["at"] > HISTORY_S:
            self._history.popleft()

    def _decided(self, managed: _Managed, before: int, after: int, why: str) -> None:
        decision = Scaling(
            at=time.time(), host=managed.spec.host, before=before, after=after, why=why
        )
        self._history.append(decision)
        self._forget()
        logger.warning("agent host %s: %d -> %d replicas: %s", decision["host"], before, after, why)

    def _handle(self, managed: _Managed, replica: int) -> Any:
        return ray.get_actor(managed.spec.recipes[replica].name, namespace=self._namespace)

    async def _inflight(self, managed: _Managed, replica: int) -> int | None:
        """How many delegations a replica holds (None: it does not answer)."""
        try:
            async with asyncio.timeout(2.0):
                stats = await self._handle(managed, replica).stats.remote()
        except (ValueError, RayActorError, ActorUnavailableError, TimeoutError):
            return None
        return sum(int(agent["inflight"]) for agent in stats["agents"].values())

    async def _loop(self, managed: _Managed) -> None:
        while True:
            try:
                await self._tick(managed)
            except Exception:
                logger.exception("scaling agent host %s", managed.spec.host)
            await asyncio.sleep(SCALER_TICK_S)

    async def _tick(self, managed: _Managed) -> None:
        policy, now = managed.spec.policy, time.monotonic()
        active = list(managed.active)
        held = await asyncio.gather(*(self._inflight(managed, i) for i in active))
        total = sum(h or 0 for h in held)
        if total > policy.target * len(active):
            managed.over_since = managed.over_since or now
        else:
            managed.over_since = None
        for replica, holds in zip(active, held, strict=True):
            if holds == 0:
                managed.idle_since.setdefault(replica, now)
            else:
                managed.idle_since.pop(replica, None)
        count = len(active) + len(managed.starting)
        if managed.over_since is not None and now - managed.over_since >= policy.up_after_s:
            wanted = min(policy.max, math.ceil(total / policy.target))
            free = [i for i in range(policy.max) if i not in active and i not in managed.starting]
            free = [i for i in free if i not in managed.draining]
            adding = free[: max(wanted - count, 0)]
            if adding:
                why = (
                    f"{total} delegations in flight on {len(active)} replicas (target "
                    f"{policy.target:g} each) for {now - managed.over_since:.0f} s"
                )
                self._decided(managed, count, count + len(adding), why)
                managed.over_since = None
                for replica in adding:
                    managed.starting.add(replica)
                    asyncio.get_running_loop().create_task(self._start(managed, replica))
            return
        if len(active) <= policy.min or managed.starting:
            return
        idle = [r for r in active if now - managed.idle_since.get(r, now) >= policy.down_after_s]
        if idle:
            replica = max(idle)  # the newest goes first; replica 0 stays
            why = f"replica {replica} held nothing for {policy.down_after_s:g} s"
            self._decided(managed, count, count - 1, why)
            managed.active.remove(replica)
            managed.idle_since.pop(replica, None)
            managed.draining.add(replica)
            self._bump()
            asyncio.get_running_loop().create_task(self._drain(managed, replica))

    async def _start(self, managed: _Managed, replica: int) -> None:
        """Create a replica; once it is warm, dispatchers may choose it."""
        recipe = managed.spec.recipes[replica]
        try:
            handle = recipe.create()
            async with asyncio.timeout(START_TIMEOUT_S):
                await handle.ready.remote()
            if managed.spec.supervisor is not None:  # watched as the first ones are
                supervisor = ray.get_actor(managed.spec.supervisor, namespace=self._namespace)
                await supervisor.watch_more.remote([recipe])
        except Exception as exc:
            logger.error("agent host %s did not start: %s", recipe.name, describe_error(exc))
            with contextlib.suppress(Exception):
                ray.kill(ray.get_actor(recipe.name, namespace=self._namespace))
            return
        finally:
            managed.starting.discard(replica)
        managed.active = sorted({*managed.active, replica})
        self._bump()

    async def _drain(self, managed: _Managed, replica: int) -> None:
        """Stop a replica taken out of the choice, once it holds nothing."""
        recipe = managed.spec.recipes[replica]
        try:
            await asyncio.sleep(DRAIN_GRACE_S)
            while (held := await self._inflight(managed, replica)) not in (0, None):
                logger.info("agent host %s drains: %d delegations left", recipe.name, held)
                await asyncio.sleep(SCALER_TICK_S)
            if managed.spec.supervisor is not None:  # not created again once stopped
                supervisor = ray.get_actor(managed.spec.supervisor, namespace=self._namespace)
                await supervisor.unwatch.remote(recipe.name)
            with contextlib.suppress(ValueError):
                ray.kill(ray.get_actor(recipe.name, namespace=self._namespace), no_restart=True)
        finally:
            managed.draining.discard(replica)
