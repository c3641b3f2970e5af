"""Admission under a real burst: concurrent submissions to two replicas sharing one store."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.service import ServiceProcess

pytestmark = [pytest.mark.ray, pytest.mark.anyio]

BOUNDS = {
    "BATON_MAX_CONCURRENT_RUNS": "2",
    "BATON_MAX_QUEUED_RUNS": "5",
    "BATON_RATE_LIMIT_PER_S": "10000",
    "BATON_RATE_LIMIT_BURST": "10000",
}


async def test_a_concurrent_burst_is_admitted_exactly_up_to_each_replicas_bounds(
    ray_address: str, service_dir: Path
) -> None:
    store = f"sqlite+aiosqlite:///{service_dir / 'burst.db'}"
    replicas = [
        ServiceProcess(
            service_dir / "svc.yaml", store, ray_address, service_dir / f"burst-{name}.log",
            BATON_INSTANCE_ID=f"burst-{name}", **BOUNDS,
        )
        for name in ("a", "b")
    ]  # fmt: skip
    await asyncio.gather(*(asyncio.to_thread(r.start) for r in replicas))
    accepted: list[tuple[str, str]] = []
    try:
        body = {"task": "wait", "agent": "sleeper"}
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:
            # 40 at once to each replica, all sent before any answer comes back.
            answers = await asyncio.gather(
                *(client.post(f"{r.url}/v1/runs", json=body) for r in replicas for _ in range(40))
            )
            for replica, batch in zip(replicas, (answers[:40], answers[40:]), strict=True):
                codes = Counter(a.status_code for a in batch)
                assert codes == {202: 7, 429: 33}, codes  # 2 running + 5 queued, no more
                refused = next(a for a in batch if a.status_code == 429)
                assert refused.json()["error"]["code"] == "overloaded"
                accepted += [(replica.url, a.json()["id"]) for a in batch if a.status_code == 202]
            listed = (await client.get(f"{replicas[0].url}/v1/runs", params={"limit": 100})).json()
            assert sorted(r["id"] for r in listed["runs"]) == sorted(i for _, i in accepted)
    finally:
        async with httpx.AsyncClient(timeout=60) as client:
            for url, run_id in accepted:  # free the shared agents for the other tests
                await client.post(f"{url}/v1/runs/{run_id}/cancel")
        for replica in replicas:
            replica.stop()
