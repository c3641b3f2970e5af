"""The run store as the CLI opens it: URLs as people write them, a store that is not up yet, and
one clear line (never a password) when it cannot be opened."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.store import RunStore, StoreRefused
from tests.ports import free_port

runner = CliRunner()


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("nosuchdb://x", "the run store URL 'nosuchdb://x' names no store Baton opens: use "),
        # Another driver than Baton's (it names the fix, never the password).
        ("mysql://bob:s3cret-pw@127.0.0.1/runs", "the run store URL 'mysql://bob:***@"),
        # PostgreSQL as people write it: the async driver is taken; nothing listens there.
        ("postgresql://bob:s3cret-pw@127.0.0.1:{port}/runs", "the run store at 127.0.0.1:{port} "
         "cannot be reached: [Errno 111]"),
    ],
    ids=["unknown", "other-database", "unreachable"],
)  # fmt: skip
def test_an_unusable_store_url_is_one_clear_line_without_its_password(url: str, said: str) -> None:
    port = free_port()
    result = runner.invoke(app, ["runs"], env={"BATON_STORE_URL": url.format(port=port)})
    assert result.exit_code == 2
    assert result.output.startswith(said.format(port=port)), result.output
    assert len(result.output.strip().splitlines()) == 1 and "s3cret-pw" not in result.output


def test_a_postgresql_url_as_people_write_it_opens_the_store(postgres_url: str) -> None:
    plain = postgres_url.replace("postgresql+asyncpg://", "postgresql://")
    result = runner.invoke(app, ["runs"], env={"BATON_STORE_URL": plain})
    assert result.exit_code == 0, result.output


def test_baton_serve_waits_for_its_store_then_stops_in_one_line(tmp_path: Path) -> None:
    port = free_port()
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "serve", "--port", str(free_port())],
        env={**os.environ, "BATON_STORE_URL": f"postgresql://bob:s3cret-pw@127.0.0.1:{port}/x",
             "BATON_STORE_START_WAIT_S": "2"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    said = done.stderr.strip().splitlines()
    # (logged as the service logs: `WARNING:  ...`, as uvicorn's own lines)
    assert said[0].startswith(
        f"WARNING:  waiting for the run store: the run store at 127.0.0.1:{port}"
    )
    assert said[-1].endswith("(waited 2s: BATON_STORE_START_WAIT_S)"), said
    assert len(said) == 2 and "Traceback" not in done.stderr and "s3cret-pw" not in done.stderr


@pytest.mark.anyio
async def test_a_store_that_comes_late_is_waited_for(tmp_path: Path) -> None:
    later = tmp_path / "later"  # (SQLite cannot open a file in a folder not made yet)

    async def make_it() -> None:
        await asyncio.sleep(1.0)
        later.mkdir()

    making = asyncio.ensure_future(make_it())
    store = await RunStore.open(f"sqlite:///{later / 'runs.db'}", start_wait_s=30)
    await making
    await store.close()
    with pytest.raises(StoreRefused, match=r"cannot be reached.*waited 0s"):
        await RunStore.open(f"sqlite:///{tmp_path / 'never' / 'runs.db'}")
