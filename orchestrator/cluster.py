"""Joining a Ray cluster, or starting a local Ray instance that only its owner can call.

Ray 2.60 cannot be told to listen on loopback only: `ray.init` replaces a loopback node address
by the machine's own, and its gRPC servers listen on every interface. What keeps others out is
Ray's token authentication, which Ray turns on by default for a new local instance, with a
token kept in `~/.ray/auth_token`. Baton makes sure that file is readable by its owner alone
(Ray writes it with the default umask), refuses to hide a local instance started with
`RAY_AUTH_MODE=disabled` (it warns), and treats the token as a secret. A cluster that Baton
joins keeps its own authentication: start it with `RAY_AUTH_MODE=token`.

A service's local instance (`baton serve`) runs in a session of its own (`ray start` in a new
session, then joined): a signal to the service's process group (a terminal's job control, a
`kill -TERM -PGID`) reaches the service alone, which drains its runs while Ray still carries
their events, then stops Ray itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import ray

__all__ = [
    "Connection",
    "RaySession",
    "connect_ray",
    "is_local",
    "keep_sigterm_handler",
    "local_token_path",
]

logger = logging.getLogger(__name__)
# Tasks whose events the GCS of a local Ray instance keeps (Ray's default: 100,000).
TASK_EVENTS_KEPT = 10_000
# How long a local instance in a session of its own may take to start, and to stop once asked
# (its GCS takes seconds to end on SIGTERM, holding nothing of ours by then: then SIGKILL).
_START_S = 120.0
_STOP_S = 3.0
_PR_SET_PDEATHSIG = 1  # prctl(2)


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
    session: RaySession | None = None  # a local instance in a session of its own

    def close(self) -> None:
        """Stop the local instance this process started (its agents' processes included)."""
        if not self.local:
            return
        if self.session is None:
            _stop_autoscaler_monitor()
            ray.shutdown()
            return
        ray.shutdown()
        self.session.stop()


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


def is_local(address: str | None) -> bool:
    """Whether `connect_ray(address, ...)` starts a local Ray instance (no cluster named)."""
    return address is None and not os.environ.get("RAY_ADDRESS")


def connect_ray(
    address: str | None, namespace: str, session: RaySession | None = None
) -> Connection:
    """Join the cluster at `address` (or $RAY_ADDRESS), or start a local Ray instance.

    `session`: the local instance, already started in a session of its own (`RaySession`).
    """
    if ray.is_initialized():
        return Connection()
    local = is_local(address)
    token = _local_token() if local else None
    if session is not None:
        if token is not None:  # a driver joining a cluster uses its token only if told
            _use_token_auth()
        try:
            session.wait_ready()
            ray.init(
                address=session.address,
                namespace=namespace,
                log_to_driver=False,
                logging_level=logging.ERROR,
                configure_logging=True,
            )
        except BaseException:
            session.stop()
            raise
        return Connection(local=True, token=token, session=session)
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


def _local_token() -> str | None:
    """The local instances' token (made if missing); None: token authentication is off."""
    mode = os.environ.get("RAY_AUTH_MODE", "token").lower()
    if mode != "token":
        logger.warning(
            "RAY_AUTH_MODE=%s: the local Ray instance accepts calls (which run code) from "
            "anyone who can reach this machine",
            mode,
        )
        return None
    return os.environ.get("RAY_AUTH_TOKEN") or _private_token()


def _use_token_auth() -> None:
    """Have this process (and those it starts) use token authentication.

    As `ray.init` does for a local instance of its own: Ray reads the mode once, at import.
    """
    from ray._private.authentication import authentication_token_setup as setup

    quiet = logging.getLogger(setup.__name__)
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # (it warns that it does what is asked)
    try:
        setup.maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    finally:
        quiet.setLevel(level)


def _die_with_parent() -> None:
    """In a child, before it runs: be killed when the thread that started it ends (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class RaySession:
    """A local head node in a session of its own (`ray start --head --block`).

    A signal to this process's group does not reach it; it dies with this process all the same
    (the `ray start` process is killed when its starter dies, and Ray's daemons with it).
    Start it from the thread that lives as long as the process (the main one): the kernel ties
    the child's fate to that thread.
    """

    def __init__(self) -> None:
        _local_token()  # the token file exists before the instance reads it
        with socket.socket() as probe:  # a free port for its GCS
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.address = f"127.0.0.1:{port}"
        self._said = tempfile.NamedTemporaryFile(prefix="baton-ray-", suffix=".log")
        config = json.dumps({"task_events_max_num_task_in_gcs": TASK_EVENTS_KEPT})
        command = [
            str(Path(sys.executable).with_name("ray")), "start", "--head", f"--port={port}",
            "--include-dashboard=false", "--disable-usage-stats", f"--system-config={config}",
            "--block",
        ]  # fmt: skip
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._said,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its daemons are of this group, not of the service's
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )

    def wait_ready(self, timeout_s: float = _START_S) -> None:
        """Wait until the instance has started (RuntimeError saying why if it does not)."""
        deadline = time.monotonic() + timeout_s
        log = Path(self._said.name)
        while "Ray runtime started" not in log.read_text(errors="replace"):
            if self._process.poll() is not None:
                said = log.read_text(errors="replace").strip()[-2000:]
                raise RuntimeError(f"the local Ray instance did not start: {said}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the local Ray instance did not start within {timeout_s:g}s")
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop every process of the instance: asked first, then killed."""
        group = self._process.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)
            deadline = time.monotonic() + _STOP_S
            while time.monotonic() < deadline:
                os.killpg(group, 0)  # (ProcessLookupError once none is left)
                time.sleep(0.1)
            os.killpg(group, signal.SIGKILL)
        self._process.wait()
        self._said.close()


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
