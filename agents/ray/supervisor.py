"""Supervising a system's agent hosts: a host that died is created again under its name.

Ray restarts an actor only as often as its `max_restarts` allows (0 by default) and then forgets
a detached one. Without more, a host process killed (by the OOM killer, a tool that crashes it,
its node lost) leaves every run that needs its agents failing until the service restarts.

The supervisor, one named actor per system (the service's hosts are detached, so their names
are free again the moment they die), watches each host replica through a call parked in it (it
fails the moment the process dies: no polling), creates a dead one again after a pause that
doubles (`SupervisionOptions`), and tells dispatchers waiting for a host (`back`) when it is
back or that it will not be (a crash loop: too many restarts in the window; left down).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

import ray
from ray.exceptions import ActorUnavailableError, RayActorError

from agents.core.errors import describe_error
from agents.core.spec import SupervisionOptions
from agents.ray.kept import keep, kept

__all__ = ["HostRecipe", "HostState", "HostSupervisor"]

logger = logging.getLogger(__name__)

# A parked call returns after this long and is parked again (so that one left behind by a
# supervisor that restarted ends by itself).
PARK_S = 300.0
# How long a host created again may take to start (import, MCP servers, warm-up).
READY_TIMEOUT_S = 120.0
# While Ray restarts a host itself (`max_restarts`), how often to look whether it is back.
_RAY_RESTART_POLL_S = 0.2


@dataclass(frozen=True)
class HostRecipe:
    """How to create one host replica, as the pool first created it.

    Its Ray name, actor class, options and constructor arguments.
    """

    name: str
    actor_class: Any
    options: dict[str, Any]
    args: tuple[Any, ...]

    def create(self) -> Any:
        """Create the replica (or find it: `get_if_exists`), not waiting for it to start."""
        return self.actor_class.options(**self.options).remote(*self.args)


class HostState(TypedDict):
    """What the supervisor knows of one host replica."""

    actor: str
    state: Literal["alive", "restarting", "crash_loop"]
    restarts: int  # created again by the supervisor, since the service started it
    cause: str | None  # why it last died (in a crash loop: that it is one, and why)
    died_at: float | None  # when it last died (Unix seconds)
    back_at: float | None  # when it was last back (Unix seconds)


@dataclass
class _Watch:
    recipe: HostRecipe
    state: HostState
    recent: deque[float] = field(default_factory=deque)  # restarts within the window
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def set(self, state: Literal["alive", "restarting", "crash_loop"], **what: Any) -> None:
        self.state["state"] = state
        self.state.update(what)  # type: ignore[typeddict-item]
        self.changed.set()
        self.changed = asyncio.Event()


@ray.remote(num_cpus=0)
class HostSupervisor:
    """Watches a system's host replicas and creates each one that dies again (see the module).

    Every call runs on the actor's one event loop: the watches and `back` share state freely.
    """

    async def __init__(self) -> None:  # type: ignore[misc]  # (Ray awaits an async actor's)
        self._watches: dict[str, _Watch] = {}
        self._options = SupervisionOptions()
        found = kept()  # restarted by Ray: watch again what it watched (`agents.ray.kept`)
        if found is not None:
            options, recipes = found
            await self.watch(recipes, options)
            logger.warning("the supervisor was restarted: it watches %d replicas", len(recipes))

    async def watch(self, recipes: list[HostRecipe], options: SupervisionOptions) -> None:
        """Watch these replicas (each just started or found by a service starting).

        Called again by each service that starts the system: the recipes and options are its,
        and a host left down in a crash loop is watched again (the service created it anew).
        """
        self._options = options
        for recipe in recipes:
            watch = self._watches.get(recipe.name)
            if watch is not None and watch.task is not None and not watch.task.done():
                watch.recipe = recipe
                continue
            watch = _Watch(
                recipe,
                HostState(
                    actor=recipe.name,
                    state="alive",
                    restarts=watch.state["restarts"] if watch else 0,
                    cause=watch.state["cause"] if watch else None,
                    died_at=watch.state["died_at"] if watch else None,
                    back_at=None,
                ),
            )
            self._watches[recipe.name] = watch
            watch.task = asyncio.get_running_loop().create_task(self._watch(watch))
        self._keep()

    def _keep(self) -> None:
        """What it watches, for its next life (Ray restarts it if it dies)."""
        keep((self._options, [w.recipe for w in self._watches.values()]))

    async def watch_more(self, recipes: list[HostRecipe]) -> None:
        """Watch these replicas too (the scaler started them), under the options given."""
        await self.watch(recipes, self._options)

    def unwatch(self, actor: str) -> None:
        """Stop watching a replica (the scaler stops it: it is not to be created again)."""
        watch = self._watches.pop(actor, None)
        if watch is not None and watch.task is not None:
            watch.task.cancel()
        self._keep()

    def states(self) -> dict[str, HostState]:
        """Every watched replica's state, by actor name."""
        return {name: HostState(**w.state) for name, w in self._watches.items()}

    async def back(self, actor: str, timeout_s: float) -> HostState | None:
        """Wait (at most `timeout_s`) until the replica `actor` is alive, or left down.

        Returns its state then (still `restarting` if the time ran out), or None for an actor
        not watched here. A caller may see a death before the parked call does: a replica
        said alive is asked, and waited for if it does not answer.
        """
        watch = self._watches.get(actor)
        if watch is None:
            return None
        deadline = time.monotonic() + max(timeout_s, 0.0)
        while time.monotonic() < deadline:
            changed = watch.changed
            if watch.state["state"] == "crash_loop":
                break
            if watch.state["state"] == "alive" and await self._answers(actor, deadline):
                break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(deadline - time.monotonic(), 0.0)):
                    await changed.wait()
        return HostState(**watch.state)

    async def _answers(self, actor: str, deadline: float) -> bool:
        try:
            handle = ray.get_actor(actor, namespace=ray.get_runtime_context().namespace)
            async with asyncio.timeout(min(max(deadline - time.monotonic(), 0.01), 2.0)):
                await handle.stats.remote()
            return True
        except (ValueError, RayActorError, ActorUnavailableError, TimeoutError):
            return False

    async def _watch(self, watch: _Watch) -> None:
        """Park a call in the replica; when it dies, create it again (or give up)."""
        name = watch.recipe.name
        namespace = ray.get_runtime_context().namespace
        while True:
            try:
                handle = ray.get_actor(name, namespace=namespace)
            except ValueError:  # dead for good, and forgotten by Ray
                if not await self._restart(watch):
                    return
                continue
            try:
                await handle.stats.remote()
                if watch.state["state"] != "alive":  # Ray restarted it (`max_restarts`)
                    watch.set("alive", back_at=time.time())
                await handle.parked.remote(PARK_S)
            except (RayActorError, ActorUnavailableError) as exc:
                if watch.state["state"] == "alive":
                    watch.set("restarting", cause=describe_error(exc), died_at=time.time())
                    logger.warning("agent host %s died: %s", name, describe_error(exc))
                # Ray may be restarting it (its name is kept meanwhile), or it is gone.
                await asyncio.sleep(_RAY_RESTART_POLL_S)
            except Exception:
                logger.exception("watching agent host %s", name)
                await asyncio.sleep(1.0)

    async def _restart(self, watch: _Watch) -> bool:
        """Create the replica again after its pause; False: it is in a crash loop, left down."""
        options, name = self._options, watch.recipe.name
        if watch.state["state"] == "alive":  # gone between two looks
            watch.set("restarting", cause="its actor is gone", died_at=time.time())
        now = time.monotonic()
        while watch.recent and now - watch.recent[0] > options.window_s:
            watch.recent.popleft()
        if len(watch.recent) >= options.restarts:
            cause = (
                f"crash loop: died again after {len(watch.recent)} restarts within "
                f"{options.window_s:g} s; last: {watch.state['cause']}"
            )
            watch.set("crash_loop", cause=cause)
            logger.error("agent host %s is left down: %s", name, cause)
            return False
        await asyncio.sleep(options.pause_s(len(watch.recent)))
        watch.recent.append(time.monotonic())
        watch.state["restarts"] += 1
        handle = watch.recipe.create()
        try:
            async with asyncio.timeout(READY_TIMEOUT_S):
                await handle.ready.remote()
        except Exception as exc:  # it died starting: the next look finds it gone
            watch.state["cause"] = f"while starting again: {describe_error(exc)}"
            return True
        watch.set("alive", back_at=time.time())
        logger.warning("agent host %s started again (restart %d)", name, watch.state["restarts"])
        return True
