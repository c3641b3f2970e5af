"""Two service replicas on one cluster and one PostgreSQL store: either serves any run."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psutil
import pytest

from tests.postgres import fresh_database
from tests.service import ServiceProcess, all_events, follow, submit

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.heavy, pytest.mark.long]


@pytest.fixture(scope="module")
def replicas(
    ray_address: str, service_dir: Path, postgres_url: str
) -> Iterator[tuple[ServiceProcess, ServiceProcess]]:
    store = fresh_database(postgres_url, "replicas")
    a, b = (
        ServiceProcess(
            service_dir / "svc.yaml",
            store,
            ray_address,
            service_dir / f"replica-{name}.log",
            BATON_INSTANCE_ID=f"replica-{name}",
            BATON_LEASE_S="3",
            BATON_SSE_HEARTBEAT_S="1",
            BATON_STORE_POOL_SIZE="2" if name == "a" else "20",
            BATON_ACCESS_LOG="true" if name == "a" else "false",
        )
        for name in ("a", "b")
    )
    a.start()
    b.start()
    yield a, b
    a.stop()
    b.stop()


async def test_a_run_submitted_to_one_replica_is_followed_and_cancelled_through_the_other(
    replicas: tuple[ServiceProcess, ServiceProcess],
) -> None:
    a, b = replicas
    run = (await submit(a.url, {"task": "wait", "agent": "sleeper"})).json()
    async with httpx.AsyncClient(base_url=b.url, timeout=30) as client:
        seen = []
        async for _, kind, data in follow(b.url, run["id"]):  # events through B
            seen.append(kind)
            if kind == "tool_started":
                answer = await client.post(f"/v1/runs/{run['id']}/cancel")
                assert answer.status_code == 202 and answer.json()["cancel_requested"]
            if kind == "run_finished":
                assert data["status"] == "cancelled"  # A saw the request and stopped it
        stored = (await client.get(f"/v1/runs/{run['id']}")).json()
    assert seen[0] == "run_started" and "tool_started" in seen
    assert stored["status"] == "cancelled" and stored["duration_s"] < 3
    assert stored["cancelled_by"] == "ip:127.0.0.1"  # recorded by B, told to A


async def test_a_replica_keeps_as_many_store_connections_open_as_it_is_told(
    replicas: tuple[ServiceProcess, ServiceProcess], postgres_url: str
) -> None:
    a, _ = replicas  # BATON_STORE_POOL_SIZE=2
    assert a._process is not None
    service, server_port = psutil.Process(a._process.pid), urlsplit(postgres_url).port

    def to_the_store() -> int:
        connections = service.net_connections("tcp")
        return sum(1 for c in connections if c.raddr and c.raddr.port == server_port)

    async with httpx.AsyncClient(base_url=a.url, timeout=30) as client:
        pages = await asyncio.gather(*(client.get("/v1/runs") for _ in range(16)))
    assert all(page.status_code == 200 for page in pages)
    # Those opened for the burst close after use; the process's sockets say when (no event).
    try:
        async with asyncio.timeout(10):
            while to_the_store() > 2:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
    except TimeoutError:
        pytest.fail(f"{to_the_store()} connections to the store stay open (pool size 2)")


async def test_a_replica_told_not_to_log_requests_logs_the_rest(
    replicas: tuple[ServiceProcess, ServiceProcess],
) -> None:
    a, b = replicas  # B: BATON_ACCESS_LOG=false
    for replica in (a, b):
        async with httpx.AsyncClient(base_url=replica.url) as client:
            assert (await client.get("/healthz")).status_code == 200
    # The line is written as the answer starts: before the client has it.
    assert '"GET /healthz HTTP/1.1" 200' in a.log.read_text()
    quiet = b.log.read_text()
    assert "/healthz" not in quiet and "Application startup complete" in quiet


async def _taken_over_while_paused(
    a: ServiceProcess, b: ServiceProcess, body: dict[str, str]
) -> dict[str, Any]:
    """A run submitted to A, whose A is paused (SIGSTOP) once its tool works, until B has
    taken the run over and resumed it; A wakes (SIGCONT) then."""
    run: dict[str, Any] = (await submit(a.url, body)).json()
    async for _, kind, _ in follow(b.url, run["id"]):
        if kind == "tool_started":
            break
    a.signal(signal.SIGSTOP)
    try:
        async for _, kind, data in follow(b.url, run["id"]):
            if kind == "run_started" and data.get("epoch") == 1:  # B took it over
                break
    finally:
        a.signal(signal.SIGCONT)
    return run


async def test_a_replica_paused_past_its_lease_leaves_its_run_to_the_one_that_took_it_over(
    replicas: tuple[ServiceProcess, ServiceProcess],
) -> None:
    """A freezes (SIGSTOP: a long pause of its process, its machine or its network) while its
    run's tool works; B takes the run over and resumes it. When A wakes, its copy of the run
    ends, but the run is B's now: A's end is not recorded, the run ends once, as B ends it."""
    a, b = replicas
    run = await _taken_over_while_paused(a, b, {"task": "wait", "agent": "sleeper"})
    events = await asyncio.wait_for(all_events(b.url, run["id"]), 60)
    assert [k for _, k, _ in events].count("run_finished") == 1, events
    ids = [seq for seq, _, _ in events]
    assert ids == sorted(set(ids)), ids
    starts = [data for _, kind, data in events if kind == "run_started"]
    assert [data.get("epoch", 0) for data in starts] == [0, 1], starts
    async with httpx.AsyncClient(base_url=b.url) as client:
        stored = (await client.get(f"/v1/runs/{run['id']}")).json()
    assert stored["status"] == "succeeded" and stored["output"] == "rested", stored
    # The end recorded is B's life's (begun when B resumed it), not that of A's copy.
    assert stored["started_at"] >= starts[1]["ts"] - 1, (stored, starts)
    # A said why its copy's end is not the run's (an operator reading A's log).
    assert f"run {run['id']}: taken over by another instance" in a.log.read_text()


async def test_a_replica_that_wakes_to_find_its_run_taken_over_stops_its_copy(
    replicas: tuple[ServiceProcess, ServiceProcess],
) -> None:
    """The same pause during a tool of a minute: when A wakes, its copy still works. A finds
    at its next renewal that the run is B's, stops its copy (its agents too) and records
    nothing of it, rather than doze on for the rest of the minute."""
    a, b = replicas
    run = await _taken_over_while_paused(a, b, {"task": "doze", "agent": "dozer"})
    # Said once A's copy has stopped: its entry agent's call came back cancelled.
    stopped = f"run {run['id']}: this copy stopped; the run goes on where it was taken over"
    try:
        async with asyncio.timeout(30):  # (the tool alone would take 60 s)
            while stopped not in a.log.read_text():  # noqa: ASYNC110
                await asyncio.sleep(0.1)
    except TimeoutError:
        pytest.fail(f"A's copy of the run did not stop:\n{a.log.read_text()[-3000:]}")
    # B's life does not doze again (the tool had started, and may not run twice): it answers.
    events = await asyncio.wait_for(all_events(b.url, run["id"]), 60)
    assert [k for _, k, _ in events].count("run_finished") == 1, events
    assert events[-1][2]["status"] == "succeeded" and events[-1][2]["output"] == "rested"


async def test_when_a_replica_dies_the_other_resumes_its_runs(
    replicas: tuple[ServiceProcess, ServiceProcess],
) -> None:
    a, b = replicas
    run = (await submit(a.url, {"task": "wait", "agent": "sleeper"})).json()
    async for _, kind, _ in follow(b.url, run["id"]):
        if kind == "tool_started":
            break
    a.kill()
    # B notices once A's lease (3 s) runs out, takes the run over and resumes it; the event
    # stream a client follows through B goes on under the same ids.
    events = await asyncio.wait_for(all_events(b.url, run["id"]), 60)
    ids = [seq for seq, _, _ in events]
    assert ids == sorted(set(ids)) and ids[0] == 1
    starts = [data.get("epoch", 0) for _, kind, data in events if kind == "run_started"]
    assert starts == [0, 1], starts
    assert events[-1][1] == "run_finished" and events[-1][2]["status"] == "succeeded"
    async with httpx.AsyncClient(base_url=b.url) as client:
        stored = (await client.get(f"/v1/runs/{run['id']}")).json()
    assert stored["status"] == "succeeded" and stored["output"] == "rested"
