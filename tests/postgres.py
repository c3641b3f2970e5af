"""A throwaway PostgreSQL server for the test session: initdb in a temporary directory, on a free
port on 127.0.0.1, stopped at the end. Debian's `postgresql` package provides the binaries."""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg

from tests.ports import free_port

__all__ = ["PostgresServer", "find_pg_bin", "fresh_database", "own_server", "postgres_server"]


def find_pg_bin() -> Path | None:
    """The directory holding `initdb` and `pg_ctl`, or None when PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


class PostgresServer:
    """A PostgreSQL server in a temporary directory, on a free port on 127.0.0.1."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="baton-pg-"))
        self.data, sockets = self.root / "data", self.root / "sock"
        sockets.mkdir()
        self._prefix: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root: run it as its own user
            user = pwd.getpwnam("postgres")
            for path in (self.root, sockets):
                os.chown(path, user.pw_uid, user.pw_gid)
            self._prefix = ["runuser", "-u", "postgres", "--"]
        self.port = free_port()
        self._options = f"-p {self.port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("initdb", "-D", str(self.data), "-U", "baton", "--auth=trust", "-E", "UTF8")
        self.url = f"postgresql+asyncpg://baton@127.0.0.1:{self.port}/runs"

    def _run(self, tool: str, *args: str) -> None:
        command = [*self._prefix, str(self.bin_dir / tool), *args]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        """Start the server (again), waiting until it accepts connections."""
        # With a log file, the server does not hold on to our captured stdout.
        log = self.root / "server.log"
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(log), "-o", self._options, "-w", "start"
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (its data stays)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def create_database(self) -> None:
        """The empty database `runs` that `url` names."""
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "baton", "runs")

    def remove(self) -> None:
        """Stop the server if it runs, and delete its files."""
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def postgres_server(bin_dir: Path) -> Iterator[str]:
    """Run a PostgreSQL server and yield an asyncpg SQLAlchemy URL for an empty database."""
    server = PostgresServer(bin_dir)
    try:
        server.start()
        server.create_database()
        yield server.url
    finally:
        server.remove()


def fresh_database(base: str, name: str) -> str:
    """A new empty database on the server of `base` (a store URL), so that tests do not see
    each other's runs; its store URL."""
    database = "t_" + "".join(c if c.isalnum() else "_" for c in name.lower())[:50]
    plain = base.replace("postgresql+asyncpg://", "postgresql://")

    async def create() -> None:
        connection = await asyncpg.connect(plain)
        try:
            await connection.execute(f'CREATE DATABASE "{database}"')
        finally:
            await connection.close()

    asyncio.run(create())
    return base.rsplit("/", 1)[0] + "/" + database


@contextmanager
def own_server() -> Iterator[PostgresServer]:
    """A server of the caller's own, which it may stop and start; the test is skipped where
    PostgreSQL is not installed (and fails on CI, which must have it)."""
    import pytest

    bin_dir = find_pg_bin()
    if bin_dir is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not installed; `make test` installs it (apt: postgresql)")
        pytest.skip("PostgreSQL is not installed (apt: postgresql)")
    server = PostgresServer(bin_dir)
    try:
        server.start()
        server.create_database()
        yield server
    finally:
        server.remove()
