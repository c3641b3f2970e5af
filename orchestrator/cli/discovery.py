"""Finding a `baton serve` running on this machine, so that `baton run` can use its warm agents.

A local `baton serve` announces itself in a small file under `~/.baton/servers/` (readable by
its owner only) for as long as it runs: its URL, its process id, a digest of the agent system
it serves and the run store it records into. `baton run` with the same config and the same
store submits there instead of starting Ray and the agents itself (tens of seconds saved);
anything else (another config or store, a dead process, no answer) and it runs here as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx

from orchestrator.store import absolute_store_url
from orchestrator.system.config import AgentSystem

__all__ = ["announce", "find_server", "system_digest"]

_PROBE_S = 1.0


def _folder() -> Path:
    return Path.home() / ".baton" / "servers"


def system_digest(system: AgentSystem) -> str:
    """What identifies an agent system: its validated config, canonically."""
    canonical = system.config.model_dump_json(exclude_none=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


@contextlib.contextmanager
def announce(url: str, system: AgentSystem, store_url: str, keys: bool) -> Iterator[None]:
    """Say that this process serves `system` at `url` into `store_url`, until the block ends."""
    folder = _folder()
    path = folder / f"{os.getpid()}.json"
    entry = {
        "url": url,
        "pid": os.getpid(),
        "system": system_digest(system),
        "store": absolute_store_url(store_url),
        "keys": keys,
    }
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(entry, out)
    except OSError:  # a read-only home: nothing to announce in, nothing lost
        yield
        return
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def find_server(system: AgentSystem, store_url: str, has_key: bool) -> str | None:
    """The URL of a live local `baton serve` of this system and store, or None."""
    digest = system_digest(system)
    for path in sorted(_folder().glob("*.json")) if _folder().is_dir() else []:
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            pid, url = int(entry["pid"]), str(entry["url"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not _alive(pid):
            path.unlink(missing_ok=True)  # its server died without cleaning up
            continue
        if entry.get("system") != digest or entry.get("store") != absolute_store_url(store_url):
            continue
        if entry.get("keys") and not has_key:
            continue
        try:
            if httpx.get(f"{url}/readyz", timeout=_PROBE_S).status_code == 200:
                return url
        except httpx.HTTPError:
            continue
    return None
