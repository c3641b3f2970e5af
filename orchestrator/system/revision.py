"""Which revision of the agents' code this process runs, for the names of the actors it starts."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import agents
import tracing

__all__ = ["code_revision"]

_PACKAGES = (Path(*agents.__path__), Path(*tracing.__path__))


@functools.cache
def code_revision(packages: tuple[Path, ...] = _PACKAGES) -> str:
    """A short hash of the code that agent hosts and the ledger run (`agents`, `tracing`).

    A service's actors are detached: they outlive it, and a restarted service finds them by
    name. After an upgrade, actors of the old code (their Ray cluster still up) must not be
    found and handed calls they do not take; the new code starts actors of its own.
    """
    digest = hashlib.sha256()
    for root in packages:
        for path in sorted(root.rglob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:6]
