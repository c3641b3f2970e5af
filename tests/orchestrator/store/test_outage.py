"""The run store goes away mid-run (its PostgreSQL server stopped) and comes back: the API
answers 503 meanwhile (the run in flight can still be followed), the run is recorded once the
store is back, and nothing is corrupted."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.postgres import PostgresServer, own_server
from tests.service import ServiceProcess, all_events, follow, submit

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.heavy]


@pytest.fixture
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of the test's own, which it may stop and start."""
    with own_server() as server:
        yield server


async def _status_when_recorded(client: httpx.AsyncClient, run_id: str) -> dict[str, object]:
    """The run once its final record is in (the service retries it every lease third)."""
    while True:
        answer = await client.get(f"/v1/runs/{run_id}")
        if answer.status_code == 200 and answer.json()["status"] not in ("queued", "running"):
            return answer.json()  # type: ignore[no-any-return]
        await asyncio.sleep(0.2)


async def test_a_store_outage_is_a_503_and_the_run_is_recorded_once_it_is_back(
    ray_address: str, service_dir: Path, postgres: PostgresServer
) -> None:
    service = ServiceProcess(
        service_dir / "svc.yaml", postgres.url, ray_address, service_dir / "outage.log",
        BATON_INSTANCE_ID="outage", BATON_LEASE_S="3",
    )  # fmt: skip
    service.start()
    try:
        run = (await submit(service.url, {"task": "wait", "agent": "sleeper"})).json()
        dozing = (await submit(service.url, {"task": "doze", "agent": "dozer"})).json()
        stream = follow(service.url, run["id"])  # opened while the store is there
        dozing_so_far = follow(service.url, dozing["id"])
        for followed in (stream, dozing_so_far):  # both tools started (and their starts stored)
            async for _, kind, _ in followed:
                if kind == "tool_started":
                    break
        await dozing_so_far.aclose()
        postgres.stop()
        # A run in flight here can still be followed from its start: its events need no store.
        late = follow(service.url, dozing["id"])
        assert (await anext(late))[:2] == (1, "run_started")
        await late.aclose()
        async with httpx.AsyncClient(base_url=service.url, timeout=30) as client:
            for answer in (
                await client.get(f"/v1/runs/{run['id']}"),
                await client.get("/v1/runs"),
                await client.post("/v1/runs", json={"task": "calculate 1 + 1"}),
            ):
                assert answer.status_code == 503, answer.text
                assert answer.json()["error"]["code"] == "store_unavailable"
                assert answer.headers["Retry-After"] == "5"
            ready = await client.get("/readyz")
            assert ready.status_code == 503 and ready.json()["checks"]["store"] != "ok"
            assert (await client.get("/healthz")).status_code == 200  # alive all the same
            # The run ends while the store is away (its followers are told) ...
            async for _, kind, data in stream:
                if kind == "run_finished":
                    assert data["status"] == "succeeded"
                    break
            postgres.start()
            # ... and is recorded, whole, once it is back.
            stored = await asyncio.wait_for(_status_when_recorded(client, run["id"]), 60)
            assert stored["status"] == "succeeded" and stored["output"] == "rested"
            assert (await client.post(f"/v1/runs/{dozing['id']}/cancel")).status_code == 202
            trace = (await client.get(f"/v1/runs/{run['id']}/trace")).json()
            assert trace["span_count"] > 3
        events = await all_events(service.url, run["id"])
        assert events[-1][1] == "run_finished" and events[-1][2]["status"] == "succeeded"
        fresh = (await submit(service.url, {"task": "calculate 2 * 5", "agent": "analyst"})).json()
        assert (await all_events(service.url, fresh["id"]))[-1][2]["status"] == "succeeded"
    finally:
        service.stop()
