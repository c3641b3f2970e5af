"""A throwaway PostgreSQL server for the test session: initdb in a temporary directory, on a free
port on 127.0.0.1, stopped at the end. Debian's `postgresql` package provides the binaries."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["find_pg_bin", "postgres_server"]


def find_pg_bin() -> Path | None:
    """The directory holding `initdb` and `pg_ctl`, or None when PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def postgres_server(bin_dir: Path) -> Iterator[str]:
    """Run a PostgreSQL server and yield an asyncpg SQLAlchemy URL for an empty database."""
    root = Path(tempfile.mkdtemp(prefix="baton-pg-"))
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    prefix: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root: run it as its own user
        user = pwd.getpwnam("postgres")
        for path in (root, sockets):
            os.chown(path, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    port = _free_port()

    def run(*args: str) -> None:
        subprocess.run([*prefix, *args], check=True, capture_output=True, timeout=120)

    run(str(bin_dir / "initdb"), "-D", str(data), "-U", "baton", "--auth=trust", "-E", "UTF8")
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
    # With a log file, the server does not hold on to our captured stdout.
    log = root / "server.log"
    run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "start")
    try:
        run(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "baton", "runs")
        yield f"postgresql+asyncpg://baton@127.0.0.1:{port}/runs"
    finally:
        subprocess.run(
            [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(root, ignore_errors=True)
