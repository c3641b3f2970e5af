"""Which ledger shard carries a run: a fixed function of its id, chosen so caps stay exact.

A team's ledger may be several actors (shards). Every item of a run (its events, spans, steps,
waits and spending) goes to the shard its id maps to, so each shard is the whole ledger of its
runs and no shard asks another anything. Daily spending caps are counted where the runs they
apply to are: the ids of the runs under one tenant's (or, without one, one key's) daily cap are
chosen to map to the shard of that scope, so one shard sees all of the scope's spending and a cap
stops runs exactly as with one ledger.
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Sequence

from agents.core.limits import SpendCap

__all__ = ["MAX_SHARDS", "default_shards", "new_run_id", "placement", "shard_of"]

# At most this many shards per team (each is an actor on the head node).
MAX_SHARDS = 64
# A shard per this many cores of the cluster: a shard's work per task is about a fifth of all
# the CPU a task costs (bench/ceiling.py), so it is not the first to run out of room.
CORES_PER_SHARD = 4


def shard_of(key: str, shards: int) -> int:
    """The shard (0 to `shards` - 1) of a run id or a spending scope."""
    if shards <= 1:
        return 0
    return zlib.crc32(key.encode()) % shards


def placement(caps: Sequence[SpendCap]) -> str | None:
    """The spending scope whose shard the run goes to, or None (its id decides alone).

    A tenant's daily cap before a key's: a key's runs are all of one tenant, so the runs under
    a key's cap are also together when their tenant's decides.
    """
    daily = [c.scope for c in caps if c.daily]
    tenants = [s for s in daily if s.startswith("tenant:")]
    found = tenants or daily
    return found[0] if found else None


def new_run_id(shards: int, caps: Sequence[SpendCap] = ()) -> str:
    """A new run's id: random, and on the shard of its caps' scope when it has daily ones."""
    scope = placement(caps)
    while True:
        run_id = uuid.uuid4().hex
        if scope is None or shard_of(run_id, shards) == shard_of(scope, shards):
            return run_id  # (`shards` tries on average)


def default_shards(cluster_cpus: float) -> int:
    """The shards a team's ledger gets when its configuration does not say."""
    return max(1, min(MAX_SHARDS, int(cluster_cpus // CORES_PER_SHARD)))
