"""Joining a Ray cluster, or starting a local Ray instance that only its owner can call.

Ray 2.60 cannot be told to listen on loopback only: `ray.init` replaces a loopback node address
by the machine's own, and its gRPC servers listen on every interface. What keeps others out is
Ray's token authentication, which Ray turns on by default for a new local instance, with a
token kept in `~/.ray/auth_token`. Baton makes sure that file is readable by its owner alone
(Ray writes it with the default umask), refuses to hide a local instance started with
`RAY_AUTH_MODE=disabled` (it warns), and treats the token as a secret. A cluster that Baton
joins keeps its own authentication: start it with `RAY_AUTH_MODE=token`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import ray

__all__ = ["Connection", "connect_ray", "keep_sigterm_handler", "local_token_path"]

logger = logging.getLogger(__name__)
# Tasks whose events the GCS of a local Ray instance keeps (Ray's default: 100,000).
TASK_EVENTS_KEPT = 10_000


def local_token_path() -> Path:
    """Where Ray keeps the token of local instances (unless RAY_AUTH_TOKEN(_PATH) says else)."""
    return Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")


def _private_token() -> str:
    """The local instances' token, created if missing, in a file only its owner can read."""
    path = local_token_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        path.chmod(0o600)
    else:
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_hex(32))
    return path.read_text().strip()


@dataclass(frozen=True)
class Connection:
    """How this process is on Ray: whether it started the local instance, and its token."""

    local: bool = False
    token: str | None = None  # a secret, never to be recorded

    def close(self) -> None:
        """Stop the local instance this process started (its agents' processes included)."""
        if self.local:
            _stop_autoscaler_monitor()
            ray.shutdown()


def _stop_autoscaler_monitor() -> None:
    """Kill the local instance's autoscaler monitor, before `ray.shutdown` stops the rest.

    `ray.shutdown` (Ray 2.60) stops the GCS first and the monitor after it; the monitor's SIGTERM
    handler then tries to report its end to the GCS that is gone, and is killed only after
    Ray's one-second grace: a second of every local `baton run` and `baton serve` stop. A
    single-node instance's monitor, about to go with it, holds nothing to lose.
    """
    worker = getattr(getattr(ray, "_private", None), "worker", None)
    kill = getattr(getattr(worker, "_global_node", None), "kill_monitor", None)
    if kill is not None:  # (another Ray: its shutdown as it is)
        with contextlib.suppress(Exception):
            kill(check_alive=False)


def connect_ray(address: str | None, namespace: str) -> Connection:
    """Join the cluster at `address` (or $RAY_ADDRESS), or start a local Ray instance."""
    if ray.is_initialized():
        return Connection()
    token = None
    local = address is None and not os.environ.get("RAY_ADDRESS")
    if local:
        mode = os.environ.get("RAY_AUTH_MODE", "token").lower()
        if mode != "token":
            logger.warning(
                "RAY_AUTH_MODE=%s: the local Ray instance accepts calls (which run code) from "
                "anyone who can reach this machine",
                mode,
            )
        else:
            token = os.environ.get("RAY_AUTH_TOKEN") or _private_token()
    ray.init(
        # "local": a new instance of our own, not whatever cluster this machine last started.
        address="local" if local else address,
        # Ray's GCS keeps every task's events (22 MiB per 1,000 runs, without end); a local
        # instance of ours keeps the newest only. (A cluster's own: its operator's setting,
        # RAY_task_events_max_num_task_in_gcs.)
        _system_config={"task_events_max_num_task_in_gcs": TASK_EVENTS_KEPT} if local else None,
        namespace=namespace,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
        configure_logging=True,
    )
    return Connection(local=local, token=token)


@contextlib.contextmanager
def keep_sigterm_handler() -> Iterator[None]:
    """Keep this process's SIGTERM handling across `ray.init` (called in the block).

    A Ray driver installs a crash handler for SIGTERM that kills the process 3 s later
    (absl's failure-signal alarm), which would cut every graceful shutdown (uvicorn's, and
    `RunService.stop`'s grace) short. The handler that was there before is put back.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if before is not None:
            signal.signal(signal.SIGTERM, before)
