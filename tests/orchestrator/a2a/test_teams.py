"""Two Baton services on 127.0.0.1, team A delegating to team B over A2A: one trace across both
stores, B's call in A's diagram, a cycle across the systems refused, cancelling A cancels B."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from tests.service import ServiceProcess, all_events, submit

pytestmark = [pytest.mark.ray, pytest.mark.heavy]

TEAM_A = """
name: team_a
agents:
  - name: lead
    description: Leads the work.
    delegates: [team_b]
  - name: team_b
    description: Team B calculates, and can wait.
    capabilities: [calculate, wait]
    a2a: {{url: "{b}"}}
  - name: b_teller
    description: Team B's teller, whose questions go on to the person.
    a2a: {{url: "{b}", agent: teller}}
    ask_user: true
  - name: b_teller_unasked
    description: Team B's teller, with no one here to answer its questions.
    a2a: {{url: "{b}", agent: teller}}
"""

TEAM_B = """
name: team_b
agents:
  - name: worker
    description: Works on what team A asks.
    tools: [configs.tools:calculate]
    delegates: [back, sleeper]
  - name: back
    description: A second opinion from team A.
    capabilities: [second, opinion]
    a2a: {{url: "{a}"}}
  - name: sleeper
    description: Waits.
    capabilities: [wait]
    tools: [tests.testkit:slow_step]
    model:
      name: baton/scripted
      params:
        replies:
          - {{tool_calls: [{{name: slow_step, arguments: {{seconds: 30}}}}]}}
          - {{content: rested}}
  - name: teller
    description: Pays from the account the person picks.
    ask_user: true
"""


@pytest.fixture(scope="module")
def teams(ray_address: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("teams")
    a, b = (
        ServiceProcess(
            root / f"{name}.yaml",
            f"sqlite+aiosqlite:///{root / name}.db",
            ray_address,
            root / f"{name}.log",
            BATON_SSE_HEARTBEAT_S="1",
        )
        for name in ("a", "b")
    )
    (root / "a.yaml").write_text(TEAM_A.format(b=b.url))
    (root / "b.yaml").write_text(TEAM_B.format(a=a.url))
    a.start()
    b.start()
    yield a, b
    a.stop()
    b.stop()


async def get(url: str, path: str) -> Any:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        answer = await client.get(path)
        assert answer.status_code == 200, answer.text
        return answer.json() if "json" in answer.headers["content-type"] else answer.text


def spans(tree: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for node in tree for s in [node, *spans(node["children"])]]


async def run_on(service: ServiceProcess, task: str) -> tuple[dict[str, Any], list[Any]]:
    answer = await submit(service.url, {"task": task, "stream": True})
    assert answer.status_code == 202, answer.text
    events = await all_events(service.url, answer.json()["id"])
    return await get(service.url, f"/v1/runs/{answer.json()['id']}"), events


@pytest.mark.anyio
async def test_a_delegation_to_another_system_is_one_trace_across_both_stores(
    teams: tuple[ServiceProcess, ServiceProcess],
) -> None:
    a, b = teams
    run, events = await run_on(a, "calculate 6 * 7")
    assert run["status"] == "succeeded", run["error"]
    assert "calculate: 42" in run["output"]
    # A's trace has the remote agent's span, naming B's task: B's run.
    trace_a = await get(a.url, f"/v1/runs/{run['id']}/trace")
    [remote] = [s for s in spans(trace_a["spans"]) if s["name"] == "invoke_agent team_b"]
    assert remote["attributes"]["url.full"] == b.url
    task_id = remote["attributes"]["baton.a2a.task_id"]
    run_b = await get(b.url, f"/v1/runs/{task_id}")
    assert run_b["status"] == "succeeded" and run_b["entry_agent"] == "worker"
    # One trace id across both stores: B's root span is a child of A's remote-agent span.
    trace_b = await get(b.url, f"/v1/runs/{task_id}/trace")
    assert trace_b["trace_id"] == trace_a["trace_id"]
    [root_b] = trace_b["spans"]
    assert root_b["parent_span_id"] == remote["span_id"]
    # B's chain goes on from A's, each name qualified by its system.
    [worker] = [s for s in spans(trace_b["spans"]) if s["name"] == "invoke_agent worker"]
    chain = worker["attributes"]["baton.delegation.chain"]
    assert chain == ["team_a/lead", "team_a/team_b", "worker"]
    # A's run counts what B spent; A's events tell how B's task went.
    assert run["usage"]["input_tokens"] > run_b["usage"]["input_tokens"] > 0
    states = [d["state"] for _, kind, d in events if kind == "remote_update"]
    assert states[0] in ("submitted", "working") and states[-1] == "completed"
    # A's diagram shows the call to B and its answer.
    diagram = await get(a.url, f"/v1/runs/{run['id']}/diagram?detail=agents")
    assert "participant a4 as team_b" in diagram
    assert "a3->>+a4: delegate_to_team_b" in diagram and "a4-->>-a3: ok" in diagram


@pytest.mark.anyio
async def test_a_cycle_across_systems_is_refused_by_the_system_it_would_reenter(
    teams: tuple[ServiceProcess, ServiceProcess],
) -> None:
    a, _ = teams
    before = (await get(a.url, "/v1/runs?limit=1"))["total"]
    run, _ = await run_on(a, "calculate 6 * 7 with a second opinion")
    # B's worker asked A again (team_a -> team_b -> team_a): A refused, and said why.
    assert "delegation cycle across agent systems: team_a -> team_b -> team_a" in run["output"]
    assert "calculate: 42" in run["output"]  # the rest of the work went on
    assert (await get(a.url, "/v1/runs?limit=1"))["total"] == before + 1  # no run for it


@pytest.mark.anyio
async def test_cancelling_a_run_cancels_the_task_it_gave_another_system(
    teams: tuple[ServiceProcess, ServiceProcess],
) -> None:
    a, b = teams
    answer = await submit(a.url, {"task": "wait for it"})
    run_id = answer.json()["id"]
    # Wait until B's run is under way (its sleeper is in a 30 s tool call).
    for _ in range(300):
        found = await get(b.url, "/v1/runs?status=running")
        if found["runs"]:
            break
        await asyncio.sleep(0.1)
    [run_b] = found["runs"]
    async with httpx.AsyncClient(base_url=a.url) as client:
        assert (await client.post(f"/v1/runs/{run_id}/cancel")).status_code == 202
    events = await all_events(a.url, run_id)
    assert events[-1][2]["status"] == "cancelled"
    for _ in range(100):
        status = (await get(b.url, f"/v1/runs/{run_b['id']}"))["status"]
        if status != "running":
            break
        await asyncio.sleep(0.1)
    assert status == "cancelled"
    # A's trace says what became of B's task: cancelled, as B confirmed, not still working.
    trace_a = await get(a.url, f"/v1/runs/{run_id}/trace")
    [remote] = [s for s in spans(trace_a["spans"]) if s["name"] == "invoke_agent team_b"]
    assert remote["attributes"]["baton.a2a.state"] == "TASK_STATE_CANCELED"
    assert (remote["status"], remote["attributes"]["error.type"]) == ("ERROR", "cancelled")


@pytest.mark.anyio
async def test_the_callers_deadline_travels_to_the_other_system(
    teams: tuple[ServiceProcess, ServiceProcess],
) -> None:
    a, b = teams
    answer = await submit(a.url, {"task": "wait for it", "deadline_s": 3})
    events = await all_events(a.url, answer.json()["id"])
    assert events[-1][2]["status"] == "limit_exceeded"
    [task_id] = {d["task_id"] for _, kind, d in events if kind == "remote_update"}
    # B's run had the time A had left (not its own 60 s): it stopped itself and said so.
    run_b = await get(b.url, f"/v1/runs/{task_id}")
    assert run_b["status"] == "limit_exceeded", run_b
    assert re.search(r"run deadline \(2\.\d+s\) passed", run_b["error"]), run_b["error"]
    finished = [d for _, kind, d in events if kind == "agent_finished" and d["agent"] == "team_b"]
    assert finished[0]["status"] == "limit_exceeded"


ASK = "ask the user which account to pay the rent from"


@pytest.mark.anyio
async def test_a_remote_agents_question_goes_on_to_the_person_or_its_task_is_cancelled(
    teams: tuple[ServiceProcess, ServiceProcess],
) -> None:
    a, b = teams
    # Passed on: A's run waits for the person, whose answer goes to B's task, which goes on.
    run_id = (await submit(a.url, {"task": ASK, "agent": "b_teller"})).json()["id"]
    async with httpx.AsyncClient(base_url=a.url, timeout=30) as client:
        for _ in range(300):
            if asked := (await client.get(f"/v1/runs/{run_id}/input")).json():
                break
            await asyncio.sleep(0.1)
        [question] = asked
        assert question["agent"] == "b_teller" and ASK in question["question"]
        assert (await client.get(f"/v1/runs/{run_id}")).json()["status"] == "input_required"
        answered = await client.post(f"/v1/runs/{run_id}/input", json={"answer": "savings"})
        assert answered.status_code == 200, answered.text
    events = await all_events(a.url, run_id)
    assert events[-1][2]["status"] == "succeeded", events[-1]
    assert "- ask_user: savings" in events[-1][2]["output"]
    [task_id] = {d["task_id"] for _, kind, d in events if kind == "remote_update"}
    run_b = await get(b.url, f"/v1/runs/{task_id}")  # one task of B's, asked and answered
    assert run_b["status"] == "succeeded" and "- ask_user: savings" in run_b["output"]

    # Not passed on: the delegation fails saying what was asked, and B's task is cancelled
    # (it would wait there for nobody).
    run_id = (await submit(a.url, {"task": ASK, "agent": "b_teller_unasked"})).json()["id"]
    events = await all_events(a.url, run_id)
    assert events[-1][2]["status"] == "failed"
    assert "asked" in events[-1][2]["error"] and "it was cancelled" in events[-1][2]["error"]
    [task_id] = {d["task_id"] for _, kind, d in events if kind == "remote_update"}
    assert (await get(b.url, f"/v1/runs/{task_id}"))["status"] == "cancelled"


def test_baton_check_fetches_each_remote_agents_card(
    teams: tuple[ServiceProcess, ServiceProcess], tmp_path: Path
) -> None:
    a, b = teams
    done = CliRunner().invoke(app, ["check", str(a.config)], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    assert f"a2a {b.url}" in done.output  # the topology's model column
    assert f"team_b: A2A agent 'team_b' at {b.url} (worker, back, sleeper, teller)" in done.output
    gone = tmp_path / "gone.yaml"
    gone.write_text(TEAM_A.format(b="http://127.0.0.1:9"))
    failed = CliRunner().invoke(app, ["check", str(gone)], env={"COLUMNS": "200"})
    assert failed.exit_code == 1
    assert "team_b: cannot reach the A2A agent at http://127.0.0.1:9" in failed.output
