"""The run store slow, stalled, locked, or reporting a write it made as failed: runs go on, the
API answers 503 with Retry-After within its bound instead of holding its client, nothing is lost
or written twice, and what waited is recorded once the store is back.

PostgreSQL is reached through a TCP proxy of the test's own, in a process of its own
(`tests.tcp_proxy`), which delays, stalls or cuts what it carries; SQLite is locked by another
connection holding its write lock.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.postgres import PostgresServer, fresh_database, own_server
from tests.service import ServiceProcess, all_events, follow, submit
from tests.tcp_proxy import ProxyProcess

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.long, pytest.mark.heavy]

# How long the services here wait on their store before answering 503.
WAIT_S = 2.0
# Past it, time for the answer to come back: a 503 that takes longer is a held client.
ANSWER_BOUND_S = WAIT_S * 2 + 3


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with own_server() as server:
        yield server


@pytest.fixture(scope="module")
def proxy(postgres: PostgresServer) -> Iterator[ProxyProcess]:
    proxy = ProxyProcess(postgres.port)
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def proxied(
    ray_address: str, service_dir: Path, postgres: PostgresServer, proxy: ProxyProcess
) -> Iterator[ServiceProcess]:
    """A service whose store (PostgreSQL) is reached through the proxy."""
    url = postgres.url.replace(f":{postgres.port}/", f":{proxy.port}/")
    service = ServiceProcess(
        service_dir / "svc.yaml", url, ray_address, service_dir / "proxied.log",
        BATON_INSTANCE_ID="proxied", BATON_LEASE_S="3", BATON_STORE_WAIT_S=str(WAIT_S),
        BATON_RATE_LIMIT_PER_S="10000", BATON_RATE_LIMIT_BURST="10000",
    )  # fmt: skip
    service.start()
    yield service
    service.stop()


@pytest.fixture
async def flowing(proxy: ProxyProcess) -> AsyncIterator[ProxyProcess]:
    """The proxy, set back to carrying everything at once after the test."""
    yield proxy
    for order in ("flow", "delay 0", "cut-after-commit 0"):
        assert proxy.order(order) == "ok"


async def recorded(client: httpx.AsyncClient, run_id: str, within_s: float = 60) -> dict[str, Any]:
    """The run once its final record is in the store (bounded)."""
    answer = None
    try:
        async with asyncio.timeout(within_s):
            while True:
                answer = await client.get(f"/v1/runs/{run_id}")
                if answer.status_code == 200 and answer.json()["status"] not in (
                    "queued",
                    "running",
                ):
                    return answer.json()  # type: ignore[no-any-return]
                await asyncio.sleep(0.2)
    except TimeoutError:
        said = answer.text[:300] if answer is not None else None
        raise AssertionError(f"run {run_id} not recorded in {within_s} s: {said}") from None


async def events_stored_twice(postgres: PostgresServer, database: str = "runs") -> int:
    """Events stored more than once (under two ids): the same invocation's same numbered event,
    read from PostgreSQL directly (not through the proxy). Keys make a row twice impossible; a
    write retried as new rows would not be."""
    connection = await asyncpg.connect(f"postgresql://baton@127.0.0.1:{postgres.port}/{database}")
    try:
        twice = await connection.fetchval(
            "SELECT count(*) FROM (SELECT run_id, data->>'invocation', data->>'seq', "
            "data->>'type' FROM run_events GROUP BY 1, 2, 3, 4 HAVING count(*) > 1) AS twice"
        )
        return int(twice)
    finally:
        await connection.close()


async def test_a_store_that_answers_after_seconds_slows_runs_but_loses_nothing(
    proxied: ServiceProcess, flowing: ProxyProcess, postgres: PostgresServer
) -> None:
    assert flowing.order("delay 0.3") == "ok"  # each way: a statement takes over half a second
    runs = [
        (await submit(proxied.url, {"task": f"calculate {n} * 7", "agent": "analyst"})).json()
        for n in range(2)
    ]
    async with httpx.AsyncClient(base_url=proxied.url, timeout=60) as client:
        for n, run in enumerate(runs):
            stored = await recorded(client, run["id"])
            assert stored["status"] == "succeeded" and str(n * 7) in stored["output"], stored
            events = await all_events(proxied.url, run["id"])
            assert [i for i, _, _ in events] == list(range(1, len(events) + 1))
            assert events[-1][1] == "run_finished"
    assert await events_stored_twice(postgres) == 0


async def test_a_stalled_store_is_a_prompt_503_and_the_run_is_recorded_once_it_flows(
    proxied: ServiceProcess, flowing: ProxyProcess, postgres: PostgresServer
) -> None:
    run = (await submit(proxied.url, {"task": "wait", "agent": "sleeper"})).json()
    stream = follow(proxied.url, run["id"])  # opened while the store answers
    async for _, kind, _ in stream:
        if kind == "tool_started":  # its start is stored
            break
    assert flowing.order("stall") == "ok"  # connections stay open; nothing comes back
    async with httpx.AsyncClient(base_url=proxied.url, timeout=60) as client:
        for method, path, body in (
            ("GET", f"/v1/runs/{run['id']}", None),
            ("GET", "/v1/runs", None),
            ("POST", "/v1/runs", {"task": "calculate 1 + 1", "agent": "analyst"}),
        ):
            began = time.monotonic()
            answer = await client.request(method, path, json=body)
            took = time.monotonic() - began
            assert answer.status_code == 503, (path, answer.text)
            assert answer.json()["error"]["code"] == "store_unavailable"
            assert answer.headers["Retry-After"] == "5"
            assert took < ANSWER_BOUND_S, (path, took)  # not held until the store is back
        assert (await client.get("/healthz")).status_code == 200
        # The run ends while the store stalls (its followers are told) ...
        async with asyncio.timeout(60):
            async for _, kind, data in stream:
                if kind == "run_finished":
                    assert data["status"] == "succeeded", data
                    break
        assert flowing.order("flow") == "ok"
        # ... and is recorded, whole and once, when it flows again.
        stored = await recorded(client, run["id"])
        assert stored["status"] == "succeeded" and stored["output"] == "rested"
        trace = (await client.get(f"/v1/runs/{run['id']}/trace")).json()
        assert trace["span_count"] > 3
    events = await all_events(proxied.url, run["id"])
    assert [i for i, _, _ in events] == list(range(1, len(events) + 1))
    assert events[-1][1] == "run_finished" and events[-1][2]["status"] == "succeeded"
    assert await events_stored_twice(postgres) == 0


async def test_writes_whose_commit_is_reported_failed_are_not_made_twice(
    proxied: ServiceProcess, flowing: ProxyProcess, postgres: PostgresServer
) -> None:
    # Commits that reach the server but whose answer never comes back, during runs: the run
    # service's and the ledger's writes are retried, and each row is there once.
    assert flowing.order("cut-after-commit 6") == "ok"
    headers = {"Idempotency-Key": "ambiguous-1"}
    body = {"task": "calculate 6 * 7", "agent": "analyst"}
    async with httpx.AsyncClient(base_url=proxied.url, timeout=60) as client:
        ids = set()
        for _ in range(5):  # a client retrying its submission, as it must after a 503
            answer = await client.post("/v1/runs", json=body, headers=headers)
            assert answer.status_code in (200, 202, 503), answer.text
            if answer.status_code != 503:
                ids.add(answer.json()["id"])
        [run_id] = ids  # one run, however many of its writes were cut
        others = [
            (await submit(proxied.url, {"task": "calculate 2 + 2", "agent": "analyst"}))
            for _ in range(4)
        ]
        for answer in others:
            assert answer.status_code in (202, 503), answer.text
        for run in [run_id] + [a.json()["id"] for a in others if a.status_code == 202]:
            stored = await recorded(client, run)
            assert stored["status"] == "succeeded", stored
            events = await all_events(proxied.url, run)
            assert [i for i, _, _ in events] == list(range(1, len(events) + 1))
        listed = (await client.get("/v1/runs", params={"limit": 200})).json()["runs"]
        assert sum(1 for r in listed if r["id"] == run_id) == 1
    assert int(flowing.order("count")) >= 1, "no commit was cut: the test proved nothing"
    assert await events_stored_twice(postgres) == 0


async def test_a_locked_sqlite_store_is_a_prompt_503_and_the_run_is_recorded_after(
    ray_address: str, service_dir: Path
) -> None:
    database = service_dir / "locked.db"
    service = ServiceProcess(
        service_dir / "svc.yaml", f"sqlite+aiosqlite:///{database}", ray_address,
        service_dir / "locked.log", BATON_INSTANCE_ID="locked", BATON_LEASE_S="3",
        BATON_STORE_WAIT_S=str(WAIT_S),
    )  # fmt: skip
    service.start()
    holder = sqlite3.connect(database, timeout=30, isolation_level=None)
    try:
        run = (await submit(service.url, {"task": "wait", "agent": "sleeper"})).json()
        stream = follow(service.url, run["id"])
        async for _, kind, _ in stream:
            if kind == "tool_started":
                break
        holder.execute("BEGIN IMMEDIATE")  # another process's write lock, held
        async with httpx.AsyncClient(base_url=service.url, timeout=60) as client:
            # Reads go on beside a writer (WAL); a write waits its bound, then 503.
            assert (await client.get(f"/v1/runs/{run['id']}")).status_code == 200
            began = time.monotonic()
            answer = await client.post("/v1/runs", json={"task": "calculate 1 + 1"})
            took = time.monotonic() - began
            assert answer.status_code == 503, answer.text
            assert answer.headers["Retry-After"] == "5" and took < ANSWER_BOUND_S, took
            async with asyncio.timeout(60):
                async for _, kind, data in stream:
                    if kind == "run_finished":
                        assert data["status"] == "succeeded", data
                        break
            holder.execute("ROLLBACK")
            stored = await recorded(client, run["id"])
            assert stored["status"] == "succeeded" and stored["output"] == "rested"
        events = await all_events(service.url, run["id"])
        assert [i for i, _, _ in events] == list(range(1, len(events) + 1))
        assert events[-1][2]["status"] == "succeeded"
    finally:
        holder.close()
        service.stop()


# Two slow steps: the store stalls through the first and flows again during the second.
NAPPER = """
name: napper
agents:
  - name: napper
    description: Naps twice.
    tools: [tests.testkit:slow_step]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: slow_step, arguments: {seconds: 1}}]}
          - {tool_calls: [{name: slow_step, arguments: {seconds: 16}}]}
          - {content: rested twice}
"""


async def test_what_a_stall_mid_run_kept_from_the_store_is_written_by_the_runs_end(
    ray_address: str,
    service_dir: Path,
    flowing: ProxyProcess,
    postgres: PostgresServer,
) -> None:
    (service_dir / "napper.yaml").write_text(NAPPER)
    # A database of its own: the module's service (another team) would take over this run once
    # the stall let its lease lapse, and finish it with its own agents.
    direct = await asyncio.to_thread(fresh_database, postgres.url, "napper")
    database = direct.rsplit("/", 1)[1]
    url = direct.replace(f":{postgres.port}/", f":{flowing.port}/")
    service = ServiceProcess(
        service_dir / "napper.yaml", url, ray_address, service_dir / "napper.log",
        BATON_INSTANCE_ID="napper", BATON_LEASE_S="3", BATON_STORE_WAIT_S=str(WAIT_S),
    )  # fmt: skip
    service.start()
    try:
        run = (await submit(service.url, {"task": "nap"})).json()
        stream = follow(service.url, run["id"])
        async for _, kind, _ in stream:
            if kind == "tool_started":
                break
        assert flowing.order("stall") == "ok"
        # The first nap ends in the stall: its events and spans are on their way, until the
        # ledger's writer gives them up (its statements' bound); then the store flows again,
        # before the second nap ends.
        async with asyncio.timeout(60):
            async for _, kind, _ in stream:
                if kind == "tool_started":
                    break
        await asyncio.sleep(12)  # (past the writer's bound on a stalled statement: 10 s)
        assert flowing.order("flow") == "ok"
        async with httpx.AsyncClient(base_url=service.url, timeout=60) as client:
            stored = await recorded(client, run["id"])
            assert stored["status"] == "succeeded" and stored["output"] == "rested twice"
            trace = (await client.get(f"/v1/runs/{run['id']}/trace")).json()
        events = await all_events(service.url, run["id"])
    finally:
        service.stop()
    # In the store, read directly: every event and span of the run, each once.
    connection = await asyncpg.connect(f"postgresql://baton@127.0.0.1:{postgres.port}/{database}")
    try:
        ids = await connection.fetch(
            "SELECT seq FROM run_events WHERE run_id = $1 ORDER BY seq", run["id"]
        )
        spans = await connection.fetchval("SELECT count(*) FROM spans WHERE run_id = $1", run["id"])
    finally:
        await connection.close()
    assert [r["seq"] for r in ids] == [i for i, _, _ in events] == list(range(1, len(events) + 1))
    assert spans == trace["span_count"] >= 7
    assert await events_stored_twice(postgres, database) == 0
