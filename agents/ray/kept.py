"""What a restartable singleton actor keeps in Ray's GCS, to take up again when Ray restarts it.

The supervisor and the scaler are told what to watch and scale by calls (each service that
starts the system makes them), which a process that died forgets. Each keeps what it was told
in the GCS's key-value store under its own name, and Ray, restarting it, runs its constructor
again: it reads that back (`kept`) and goes on. The GCS is the cluster's own record (with
KubeRay's GCS fault tolerance, in Redis): it outlives any actor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import ray
from ray import cloudpickle
from ray.experimental import internal_kv

__all__ = ["keep", "kept"]

# (Ray's own cloudpickle: recipes hold actor classes, which plain pickle cannot.)
_dumps = cast(Callable[[Any], bytes], cloudpickle.dumps)


def _key() -> bytes:
    context = ray.get_runtime_context()
    return f"baton:kept:{context.namespace}:{context.get_actor_name()}".encode()


def keep(value: Any) -> None:
    """Keep `value` for this actor's next life (replacing what it kept before)."""
    internal_kv._internal_kv_put(_key(), _dumps(value), overwrite=True)


def kept() -> Any | None:
    """What this actor kept in its last life, if Ray restarted it (None: a first life)."""
    if not ray.get_runtime_context().was_current_actor_reconstructed:
        return None
    found = internal_kv._internal_kv_get(_key())
    return cloudpickle.loads(found) if found is not None else None
