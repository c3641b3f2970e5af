"""Cancelling runs, wherever the cancellation finds them: queued, starting, mid-run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from agents.core.events import AgentStarted, RunFinished
from orchestrator.engine import Engine
from orchestrator.engine.submission import Submission
from tests.service import all_events, follow, held_service, submit

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
                cancelled_by = data["cancelled_by"]
        stored = (await client.get(f"/v1/runs/{run['id']}")).json()
        trace = (await client.get(f"/v1/runs/{run['id']}/trace")).json()
        diagram = (await client.get(f"/v1/runs/{run['id']}/diagram?detail=tools")).text
    assert "tool_started" in seen and seen[-1] == "run_finished"
    assert stored["status"] == "cancelled"
    assert stored["duration_s"] < 3  # the 3 s tool was cut short
    # Who asked is recorded: on the run, in its last event and on its root span (no key is
    # configured here: the caller's address).
    assert cancelled_by == stored["cancelled_by"] == "ip:127.0.0.1"

    def flat(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [*nodes, *(m for n in nodes for m in flat(n["children"]))]

    spans = {s["name"]: s for s in flat(trace["spans"])}
    assert {"invoke_workflow baton", "invoke_agent sleeper", "execute_tool slow_step"} <= set(spans)
    # What was cut off looks cut off, in the trace and in the diagram: never a success.
    assert spans["invoke_workflow baton"]["attributes"]["baton.cancelled_by"] == "ip:127.0.0.1"
    for name in ("invoke_workflow baton", "invoke_agent sleeper", "execute_tool slow_step"):
        span = spans[name]
        assert (span["status"], span["attributes"].get("error.type")) == ("ERROR", "cancelled"), (
            name
        )
    assert "cancelled ·" in diagram and "ok ·" not in diagram


async def test_runs_cancelled_as_soon_as_they_are_accepted_end_cancelled(api: str) -> None:
    # Each cancellation lands somewhere in a run's start: queued, its start being recorded,
    # its agent being called. Wherever it lands, the run ends cancelled, not a minute later.
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:

        async def accepted_then_cancelled() -> str:
            run = (await client.post("/v1/runs", json={"task": "wait", "agent": "dozer"})).json()
            assert (await client.post(f"/v1/runs/{run['id']}/cancel")).status_code == 202
            return str(run["id"])

        ids = await asyncio.gather(*(accepted_then_cancelled() for _ in range(12)))
        try:
            ends = await asyncio.wait_for(
                asyncio.gather(*(all_events(api, run_id) for run_id in ids)), timeout=20
            )
        except TimeoutError:  # say where each run stands
            runs = [(await client.get(f"/v1/runs/{run_id}")).json() for run_id in ids]
            pytest.fail(f"not all ended in 20 s: {[(r['id'], r['status']) for r in runs]}")
    assert [events[-1][2]["status"] for events in ends] == ["cancelled"] * 12


async def test_a_run_cancelled_while_its_start_is_recorded_ends_without_calling_an_agent(
    default_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A service of the default team (its agents already up) whose store holds each run's
    # start until told: the cancellation comes in between, before the engine has the run.
    service, recording, recorded = await held_service(
        default_engine, tmp_path, "held-start", monkeypatch
    )
    try:
        run, _ = await service.submit(Submission(task="calculate 2 + 2"))
        await asyncio.wait_for(recording.wait(), 60)
        await service.cancel(run.id)
        recorded.set()

        async def events() -> list[object]:
            return [item[1] async for item in service.events.follow(run) if item is not None]

        seen = await asyncio.wait_for(events(), 30)
        stored = await service.get(run.id)
    finally:
        await service.stop()
        await service.store.close()
    assert (stored.status.value, stored.error) == ("cancelled", "cancelled before it started")
    assert isinstance(seen[-1], RunFinished) and seen[-1].status.value == "cancelled"
    assert not [e for e in seen if isinstance(e, AgentStarted)]
