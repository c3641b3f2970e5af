"""The cluster's provider gates on Ray: one named actor every system and replica takes from.

Named per namespace, not per system: two teams (or two versions of one) calling the same
provider share its limits. Each system declares its gates when it starts; a gate declared twice
keeps the stricter of each limit (`agents.gates.book`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ray

from agents.core.gate_spec import GateSpec, gate_for
from agents.gates.book import GateKeeper
from agents.ray.kept import keep, kept

__all__ = ["GATES_ACTOR", "GateActor", "RayGates"]

GATES_ACTOR = "baton-gates"


@ray.remote(num_cpus=0)
class GateActor:
    """Hosts the cluster's `GateKeeper`: callers wait here for their lease."""

    def __init__(self) -> None:
        self._keeper = GateKeeper()
        # Every gate declared, kept for its next life (`agents.ray.kept`): Ray restarts it, and
        # it holds them again; their windows start empty, so up to one window's worth more
        # than a limit may pass just after.
        self._declared: list[GateSpec] = kept() or []
        if self._declared:
            self._keeper.book.declare(tuple(self._declared))

    async def declare(self, specs: list[GateSpec]) -> None:
        """Hold calls to these gates' models (see `GateBook.declare`)."""
        self._keeper.book.declare(tuple(specs))
        self._declared += [s for s in specs if s not in self._declared]
        keep(self._declared)

    async def take(
        self, gate: str, tokens: int, hold_s: float, max_wait_s: float
    ) -> tuple[str | None, float, str]:
        """Wait for a lease (see `agents.core.ports.Gates.take`)."""
        return await self._keeper.take(gate, tokens, hold_s, max_wait_s)

    async def release(self, lease: str, used_tokens: int | None) -> None:
        """A call ended (see `agents.core.ports.Gates.release`)."""
        self._keeper.release(lease, used_tokens)

    async def pause(self, gate: str, seconds: float, why: str) -> None:
        """Let no call through for a while (a provider's `Retry-After`)."""
        self._keeper.pause(gate, seconds, why)

    async def free_in(self, gate: str, tokens: int) -> tuple[float, str]:
        """Seconds until a call could pass, and what holds it (no lease is taken)."""
        return self._keeper.free_in(gate, tokens)


@dataclass(frozen=True)
class RayGates:
    """The `Gates` port over the gates actor (handed to agent hosts and the service).

    Args:
        handle: the actor.
        specs: the gates this system declared (a model without one makes no call here).
    """

    handle: Any
    specs: tuple[GateSpec, ...]

    async def take(
        self, gate: str, tokens: int, hold_s: float, max_wait_s: float
    ) -> tuple[str | None, float, str]:
        """Wait for a lease (see `agents.core.ports.Gates.take`)."""
        lease, waited, why = await self.handle.take.remote(gate, tokens, hold_s, max_wait_s)
        return lease, waited, why

    def release(self, lease: str, used_tokens: int | None) -> None:
        """A call ended (see `agents.core.ports.Gates.release`)."""
        self.handle.release.remote(lease, used_tokens)  # not awaited: the call has ended

    def pause(self, gate: str, seconds: float, why: str) -> None:
        """Let no call through for a while (a provider's `Retry-After`)."""
        self.handle.pause.remote(gate, seconds, why)

    async def free_in(self, model: str, tokens: int = 1) -> tuple[float, str, str] | None:
        """How long until a call to `model` could pass its gate, if one holds it.

        (seconds, what holds it, the gate's name); None when no gate holds the model.
        """
        gate = gate_for(self.specs, model)
        if gate is None:
            return None
        wait, why = await self.handle.free_in.remote(gate.label, tokens)
        return wait, why, gate.label
