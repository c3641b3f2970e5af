"""Shared fixtures: one real local Ray instance per test session, and no real model calls."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# The CLI's output is read as text: wide enough that no table wraps, whichever worker or
# terminal runs the tests (rich reads COLUMNS once, when the CLI's consoles are made).
os.environ["COLUMNS"] = "160"

import pytest

from agents.models.safety import forbid_remote_models

forbid_remote_models()
# And in every `baton` process the tests start (their agents included).
os.environ["BATON_FORBID_REMOTE_MODELS"] = "1"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long files first (`long` marker), so that the workers (one file at a time each) end
    together rather than one finishing a long file alone; `last` files after everything else
    (their own Ray nodes would slow the timing tests the other worker runs beside them)."""
    items.sort(
        key=lambda item: (
            item.get_closest_marker("last") is not None,
            item.get_closest_marker("long") is None,
        )
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """On CI (`CI` set), a test skipped for a missing part (PostgreSQL, Chromium, a kit) is a
    failure: CI must have every part, and a skip there would hide that a promise went untested."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped on CI, where nothing may be: {report.longrepr}"


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """Ray for the whole session, started once: a real cluster on this machine, of one head
    node. Tests add and remove nodes of their own (each node costs its Ray processes' CPU for
    as long as it lives)."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "include_dashboard": False,
            # Its log monitor tails every worker's log for drivers that print them; Baton's
            # drivers (the tests, and `baton` processes) all run with log_to_driver off, so it
            # would only cost ~1.5% of a core for the session's length.
            "include_log_monitor": False,
            # No idle workers started ahead for drivers and queued work: they cost about 2% of
            # a core each while they wait (3 for the head: 6% of a core for the session's
            # length, against 1 without), where an actor waits ~0.2 s longer for its worker.
            "_system_config": {
                "prestart_worker_first_driver": False,
                "enable_worker_prestart": False,
            },
        },
    )
    ray.init(
        address=cluster.address,
        namespace="baton-tests",
        logging_level="ERROR",
        log_to_driver=False,
        # Enforced in every worker too: no test reaches a real model provider.
        runtime_env={"worker_process_setup_hook": "agents.models.safety.forbid_remote_models"},
    )
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture(scope="session")
def ray_address(ray_cluster: Any) -> str:
    return str(ray_cluster.address)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server for the session. CI must have it (the Makefile installs it);
    elsewhere the PostgreSQL tests are skipped when it is not installed."""
    from tests.postgres import find_pg_bin, postgres_server

    bin_dir = find_pg_bin()
    if bin_dir is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not installed; `make test` installs it (apt: postgresql)")
        pytest.skip("PostgreSQL is not installed (apt: postgresql)")
    with postgres_server(bin_dir) as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh run store URL, on a SQLite file and on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    from tests.postgres import fresh_database

    base: str = request.getfixturevalue("postgres_url")
    return fresh_database(base, tmp_path.name)
