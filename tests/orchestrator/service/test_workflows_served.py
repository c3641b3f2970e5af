"""Workflows served: typed input at every door (HTTP, A2A, MCP, the CLI), checked where it comes
in; an approval inside a workflow's call; a cancellation that stops every call in flight."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from tests.service import all_events, follow, submit

pytestmark = [pytest.mark.ray, pytest.mark.anyio]
ROOT = Path(__file__).resolve().parents[3]


async def test_a_runs_input_is_checked_at_the_door_kept_with_it_and_reaches_the_workflow(
    api: str,
) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        misfit = await client.post(
            "/v1/runs", json={"task": "card", "agent": "pipeline", "input": {"name": 5}}
        )
        assert misfit.status_code == 422, misfit.text
        error = misfit.json()["error"]
        assert error["code"] == "invalid_input"
        assert error["details"] == {
            "agent": "pipeline",
            "problems": ["name: 5 is not of type 'string'"],
        }
        body = {
            "task": "a card for Ada",
            "agent": "pipeline",
            "input": {"name": "Ada"},
            "metadata": {"ticket": "T-17"},
        }
        made = await client.post("/v1/runs", json=body)
        assert made.status_code == 202, made.text
        run = made.json()
        assert (run["input"], run["metadata"]) == ({"name": "Ada"}, {"ticket": "T-17"})
        # The clerk's stamp, called by the workflow, waits for a person's approval.
        async with asyncio.timeout(60):
            async for kind, data in _stream(api, run["id"]):
                if kind == "approval_requested":
                    assert data["agent"] == "clerk" and data["tool"] == "stamp"
                    break
        url = f"/v1/runs/{run['id']}/approvals/{data['call_id']}"
        assert (await client.post(url, json={"approve": True})).status_code == 200
        events = await all_events(api, run["id"])
        assert events[-1][2]["status"] == "succeeded", events[-1]
        answer = json.loads(events[-1][2]["output"])
        assert answer["card"]["age"] == 7 and "clerk done" in answer["stamped"]
        diagram = (await client.get(f"/v1/runs/{run['id']}/diagram")).text
    assert "participant a3 as pipeline" in diagram
    assert "delegate_to_profiler" in diagram and "delegate_to_clerk" in diagram


async def _stream(api: str, run_id: str) -> Any:
    async for _, kind, data in follow(api, run_id):
        yield kind, data


async def test_cancelling_a_workflow_stops_every_call_in_flight(api: str) -> None:
    run = (await submit(api, {"task": "nap", "agent": "fanout"})).json()
    naps = 0
    async with asyncio.timeout(60):
        async for _, kind, data in follow(api, run["id"]):
            naps += kind == "tool_started" and data["agent"] == "sleeper"
            if naps == 2:  # both naps are under way (3 s each)
                break
    began = time.monotonic()
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        assert (await client.post(f"/v1/runs/{run['id']}/cancel")).status_code == 202
    events = await all_events(api, run["id"])
    took = time.monotonic() - began
    assert events[-1][2]["status"] == "cancelled" and took < 2.5, took
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        trace = (await client.get(f"/v1/runs/{run['id']}/trace")).json()
    nodes, naps = list(trace["spans"]), []
    while nodes:
        node = nodes.pop()
        nodes += node["children"]
        if node["name"] == "invoke_agent sleeper":
            naps.append((node["status"], node["attributes"].get("error.type")))
    assert naps == [("ERROR", "cancelled")] * 2  # both stopped, neither finished its nap


async def test_a2a_data_parts_are_the_runs_input(api: str) -> None:
    async def send(data: dict[str, Any]) -> Any:
        message = {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_USER",
            "parts": [{"text": "a card"}, {"data": data}],
            "metadata": {"baton.agent": "profiler"},
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        async with httpx.AsyncClient(base_url=api, timeout=60) as http:
            answer = await http.post("/a2a", json=body, headers={"A2A-Version": "1.0"})
        return answer.json()

    done = (await send({"name": "Ada", "age": 36}))["result"]["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert json.loads(done["artifacts"][0]["parts"][0]["text"])["age"] == 36
    refused = (await send({"name": "Ada"}))["error"]
    assert refused["code"] == -32602 and "'age' is a required property" in refused["message"]


async def test_mcp_submit_task_takes_input(api: str) -> None:
    async with Client(f"{api}/mcp") as client:
        answer = await client.call_tool(
            "submit_task",
            {"task": "a card", "agent": "profiler", "input": {"name": "Al", "age": 4}},
        )
        assert not answer.is_error, answer.content
        run = json.loads(answer.content[0].text)  # type: ignore[union-attr]
        assert json.loads(run["output"])["age"] == 4
        refused = await client.call_tool(
            "submit_task", {"task": "a card", "agent": "profiler", "input": {"age": -1}}
        )
    assert refused.is_error and "age: -1 is less than the minimum of 0" in str(refused.content)


def test_baton_run_takes_input_from_a_json_file(api: str, tmp_path: Path) -> None:
    given = tmp_path / "card.json"
    given.write_text('{"name": "Bo", "age": 12}')
    env = {**os.environ, "COLUMNS": "200"}
    args = [sys.executable, "-m", "orchestrator", "run", "a card", "--agent", "profiler"]
    done = subprocess.run(
        [*args, "--server", api, "--input", str(given), "--json"],
        capture_output=True, text=True, env=env, timeout=120, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(json.loads(done.stdout)["output"])["age"] == 12
    given.write_text('{"name": "Bo",')
    broken = subprocess.run(
        [*args, "--server", api, "--input", str(given)],
        capture_output=True, text=True, env=env, timeout=120, check=False, cwd=ROOT,
    )  # fmt: skip
    assert broken.returncode == 2 and f"--input {given}: not JSON (line 1" in broken.stderr
