"""Finding a `baton serve` running on this machine, so that `baton run` can use its warm agents.

A local `baton serve` announces itself in a small file under `~/.baton/servers/` (readable by
its owner only) for as long as it runs: its URL, its process id, the name of the agent system
it serves and the run store it records into. `baton run` with the config whose version the
server runs now (its `/readyz` says which) and the same store submits there instead of
starting Ray and the agents itself (tens of seconds saved); anything else (another config or
store, a dead process, no answer) and it runs here as before.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx

from orchestrator.store import absolute_store_url
from orchestrator.system.config import AgentSystem

__all__ = ["announce", "find_server"]

_PROBE_S = 1.0


def _folder() -> Path:
    return Path.home() / ".baton" / "servers"


@contextlib.contextmanager
def announce(url: str, system: AgentSystem, store_url: str, keys: bool) -> Iterator[None]:
    """Say that this process serves `system` at `url` into `store_url`, until the block ends."""
    folder = _folder()
    path = folder / f"{os.getpid()}.json"
    entry = {
        "url": url,
        "pid": os.getpid(),
        "system": system.config.name,
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
    """The URL of a live local `baton serve` of this system and store, or None.

    One whose new runs go to this version of the system (it may have been given another since
    it started: `POST /v1/service/versions`).
    """
    for path in sorted(_folder().glob("*.json")) if _folder().is_dir() else []:
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            pid, url = int(entry["pid"]), str(entry["url"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not _alive(pid):
            path.unlink(missing_ok=True)  # its server died without cleaning up
            continue
        if entry.get("system") != system.config.name:
            continue
        if entry.get("store") != absolute_store_url(store_url):
            continue
        if entry.get("keys") and not has_key:
            continue
        try:
            ready = httpx.get(f"{url}/readyz", timeout=_PROBE_S)
            if ready.status_code == 200 and ready.json()["system_version"] == system.version:
                return url
        except (httpx.HTTPError, ValueError, KeyError):
            continue
    return None
