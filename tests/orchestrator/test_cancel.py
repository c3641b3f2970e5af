"""Cancelling runs over HTTP, wherever the cancellation finds them: queued, starting, mid-run."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.service import all_events, follow, submit

pytestmark = [pytest.mark.ray, pytest.mark.anyio]


async def test_cancelling_mid_run_stops_it_and_keeps_its_spans(api: str) -> None:
    run = (await submit(api, {"task": "wait for it", "agent": "sleeper"})).json()
    seen: list[str] = []
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        async for _, kind, data in follow(api, run["id"]):
            seen.append(kind)
            if kind == "tool_started":
                # The event arrived while the run is going on: streamed live, not at the end.
                assert (await client.get(f"/v1/runs/{run['id']}")).json()["status"] == "running"
                # The trace and the diagram are live too: open spans, a running note.
                live = (await client.get(f"/v1/runs/{run['id']}/trace")).json()
                assert live["spans"][0]["end_ns"] is None
                diagram = (await client.get(f"/v1/runs/{run['id']}/diagram")).text
                assert "Note over a3: running…" in diagram
                cancelled = await client.post(f"/v1/runs/{run['id']}/cancel")
                assert cancelled.status_code == 202
            if kind == "run_finished":
                assert data["status"] == "cancelled"
        stored = (await client.get(f"/v1/runs/{run['id']}")).json()
        trace = (await client.get(f"/v1/runs/{run['id']}/trace")).json()
    assert "tool_started" in seen and seen[-1] == "run_finished"
    assert stored["status"] == "cancelled"
    assert stored["duration_s"] < 3  # the 3 s tool was cut short

    def names(nodes: list[dict[str, Any]]) -> list[str]:
        return [n["name"] for n in nodes] + [m for n in nodes for m in names(n["children"])]

    assert {"invoke_workflow baton", "invoke_agent sleeper", "execute_tool slow_step"} <= set(
        names(trace["spans"])
    )


async def test_runs_cancelled_as_soon_as_they_are_accepted_end_cancelled(api: str) -> None:
    # Each cancellation lands somewhere in a run's start: queued, its start being recorded,
    # its agent being called. Wherever it lands, the run ends cancelled, not a minute later.
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:

        async def accepted_then_cancelled() -> str:
            run = (await client.post("/v1/runs", json={"task": "wait", "agent": "dozer"})).json()
            assert (await client.post(f"/v1/runs/{run['id']}/cancel")).status_code == 202
            return str(run["id"])

        ids = await asyncio.gather(*(accepted_then_cancelled() for _ in range(12)))
        ends = await asyncio.wait_for(
            asyncio.gather(*(all_events(api, run_id) for run_id in ids)), timeout=20
        )
    assert [events[-1][2]["status"] for events in ends] == ["cancelled"] * 12
