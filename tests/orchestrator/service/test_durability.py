"""Durable runs: a run whose service is killed mid-way resumes once a service is back, without
repeating what it had finished (model calls, tool calls that must run at most once)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

import httpx
import psutil
import pytest

from orchestrator.store import RunStore
from tests.service import ServiceProcess, all_events, follow, marked_processes, submit

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.long, pytest.mark.heavy]

# Three levels: lead -> middle -> worker. The middle counts parcels (a side effect that must run
# at most once) while the worker's slow model thinks; every model call that is answered is
# written to calls.txt. The offline model's answers list the results they got, so the final
# answer shows how many times the count ran and what the worker said.
CONFIG = """
name: durable
limits: {{deadline_s: 120}}
env: [PARCELS_FILE]
agents:
  - name: lead
    description: Leads.
    delegates: [middle]
    model: {{name: baton/offline, params: {{calls_file: "{calls}"}}}}
  - name: middle
    description: Writes the parcels report.
    delegates: [worker]
    tools: [tests.testkit:count_parcels]
    model: {{name: baton/offline, params: {{calls_file: "{calls}"}}}}
  - name: worker
    description: Weighs parcels.
    model: {{name: baton/offline, params: {{calls_file: "{calls}", latency_ms: {slow_ms}}}}}
  - name: payer
    description: Pays, once a person approves.
    tools: [{{function: "tests.testkit:send_once", confirm: true}}]
    model:
      name: baton/scripted
      params:
        replies:
          - {{tool_calls: [{{name: send_once, arguments: {{path: "{sent}", seconds: 2}}}}]}}
          - {{content: paid}}
  - name: teller
    description: Pays from the account the person picks.
    ask_user: true
"""


ASK = "ask the user which account to pay the rent from"


def _calls(path: Path, task: str) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.startswith(repr(task)[:60]))


async def _recorded(
    store_url: str, run_id: str, kinds: set[str], keys: frozenset[str] = frozenset()
) -> list[dict[str, object]]:
    """The run's step log once it holds steps of each kind and key given (bounded wait)."""
    store = await RunStore.open(store_url)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            steps = await store.steps(run_id)
            if kinds <= {str(s["kind"]) for s in steps} and keys <= {str(s["key"]) for s in steps}:
                return steps
            await asyncio.sleep(0.05)
        raise AssertionError(f"the step log never held {kinds}: {steps}")
    finally:
        await store.close()


async def _answer(url: str, run_id: str) -> dict[str, object]:
    events = await all_events(url, run_id)
    assert events[-1][1] == "run_finished", events[-1]
    async with httpx.AsyncClient(base_url=url) as client:
        return dict((await client.get(f"/v1/runs/{run_id}")).json())


async def test_runs_whose_service_is_killed_resume_without_repeating_finished_work(
    tmp_path: Path,
) -> None:
    calls, parcels, sent = tmp_path / "calls.txt", tmp_path / "parcels.txt", tmp_path / "sent"
    calls.touch()
    config = tmp_path / "durable.yaml"
    config.write_text(CONFIG.format(calls=calls, sent=sent, slow_ms=6000))
    store_url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    service = ServiceProcess(
        config, store_url, "", tmp_path / "serve.log",
        BATON_INSTANCE_ID="durable-test", PARCELS_FILE=str(parcels),
        BATON_TEST_MARK=f"durable-{os.getpid()}-{tmp_path.name}",
    )  # fmt: skip
    service._env.pop("RAY_ADDRESS")  # a local Ray of its own: it dies with the service
    service.start()
    try:
        task = "parcels report K"
        killed = (await submit(service.url, {"task": task, "agent": "lead"})).json()["id"]
        async for _, kind, data in follow(service.url, killed):
            if kind == "model_started" and data["agent"] == "worker":
                break
        # The worker's slow model call is under way; the count has run and is recorded.
        await _recorded(store_url, killed, {"model", "tool_started", "tool_result"})
        assert parcels.read_text().splitlines() == [task]
        before = _calls(calls, task)
        assert before == 2  # lead's and middle's first steps; the worker's has not answered
        # A payment waits for approval. Its agents' process is stopped (SIGSTOP), a person
        # approves (stored before the answer comes), and everything dies before the approved
        # call could start.
        paying = (await submit(service.url, {"task": "pay 42", "agent": "payer"})).json()["id"]
        call_id = ""
        async for _, kind, data in follow(service.url, paying):
            if kind == "approval_requested":
                call_id = data["call_id"]
                break
        # A question to the person waits for an answer (asked, in the step log) when it dies.
        asking = (await submit(service.url, {"task": ASK, "agent": "teller"})).json()["id"]
        async for _, kind, _ in follow(service.url, asking):
            if kind == "input_requested":
                break
        await _recorded(store_url, asking, {"question"})
        assert service._process is not None
        processes = marked_processes(f"durable-{os.getpid()}-{tmp_path.name}")
        hosts = [p for p, name in processes.items() if "AgentHost" in name]
        assert len(hosts) == 1, list(processes.values())  # the team shares one host
        hosts[0].send_signal(signal.SIGSTOP)
        async with httpx.AsyncClient(base_url=service.url) as client:
            decided = await client.post(
                f"/v1/runs/{paying}/approvals/{call_id}", json={"approve": True}
            )
            assert decided.status_code == 200, decided.text
        service.kill()
        hosts[0].kill()
        # Its local Ray goes with it...
        ray_own = [p for p, name in processes.items() if name in ("raylet", "gcs_server")]
        _, alive = psutil.wait_procs(ray_own, timeout=60)
        assert not alive, [processes[p] for p in alive]
        for leftover in processes:  # ...but for Ray's own dashboard and runtime-env agents
            with contextlib.suppress(psutil.NoSuchProcess):
                leftover.kill()
        assert not sent.exists()  # the approved call had not run

        # The slow model was there to be cut off; the service that comes back answers at once.
        config.write_text(CONFIG.format(calls=calls, sent=sent, slow_ms=100))
        service.start()
        # The same run, uninterrupted, for comparison (alongside the resumed one).
        fresh_task = "parcels report R"
        fresh_id = (await submit(service.url, {"task": fresh_task, "agent": "lead"})).json()["id"]
        resumed = await _answer(service.url, killed)
        assert resumed["status"] == "succeeded", resumed
        fresh = await _answer(service.url, fresh_id)
        assert fresh["status"] == "succeeded", fresh
        paid = await _answer(service.url, paying)
        payment_events = await all_events(service.url, paying)
        # The resumed run waits for the same question, not asked again; answered once, it ends.
        async with httpx.AsyncClient(base_url=service.url) as client:
            deadline = time.monotonic() + 60
            while not (waiting := (await client.get(f"/v1/runs/{asking}/input")).json()):
                assert time.monotonic() < deadline, "the resumed run never waited again"
                await asyncio.sleep(0.1)
            answered = await client.post(f"/v1/runs/{asking}/input", json={"answer": "savings"})
            assert answered.status_code == 200, answered.text
        told = await _answer(service.url, asking)
        told_events = await all_events(service.url, asking)
    finally:
        service.stop()

    # Approved once, never asked again; the approved call ran once.
    assert paid["status"] == "succeeded", paid
    assert [k for _, k, _ in payment_events].count("approval_requested") == 1
    assert sent.read_text() == "sent\n"

    assert [q["question"] for q in waiting] == [ASK]
    assert told["status"] == "succeeded" and "- ask_user: savings" in str(told["output"]), told
    told_kinds = [k for _, k, _ in told_events]
    assert told_kinds.count("input_requested") == told_kinds.count("input_provided") == 1

    assert str(resumed["output"]).replace("report K", "report R") == fresh["output"]
    assert "call 1 for this task" in str(resumed["output"])
    # The count ran once; the model answered as many calls as in the uninterrupted run.
    assert parcels.read_text().splitlines().count(task) == 1
    assert _calls(calls, task) == _calls(calls, fresh_task) == 5
    assert resumed["usage"] == fresh["usage"]
    # The team came back as another version (its worker's model is faster): that version
    # finished the resumed run, which says where it began too.
    assert resumed["version"] == fresh["version"] == fresh["began_on"]
    assert resumed["began_on"] not in (None, resumed["version"])
