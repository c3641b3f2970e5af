"""Durable runs: a run whose service is killed mid-way resumes once a service is back, without
repeating what it had finished (model calls, tool calls that must run at most once)."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import ray

from agents.core.messages import RunStatus
from orchestrator.store import RunStore
from tests.orchestrator.test_api import all_events, follow, submit
from tests.service import ServiceProcess

pytestmark = [pytest.mark.ray, pytest.mark.anyio]

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
"""


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
    (tmp_path / "durable.yaml").write_text(CONFIG.format(calls=calls, sent=sent, slow_ms=6000))
    store_url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    service = ServiceProcess(
        tmp_path / "durable.yaml", store_url, "", tmp_path / "serve.log",
        BATON_INSTANCE_ID="durable-test", PARCELS_FILE=str(parcels),
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
        assert service._process is not None
        processes = psutil.Process(service._process.pid).children(recursive=True)
        hosts = [p for p in processes if "AgentHost" in p.name()]
        assert len(hosts) == 1, [p.name() for p in processes]  # the team shares one host
        hosts[0].send_signal(signal.SIGSTOP)
        async with httpx.AsyncClient(base_url=service.url) as client:
            decided = await client.post(
                f"/v1/runs/{paying}/approvals/{call_id}", json={"approve": True}
            )
            assert decided.status_code == 200, decided.text
        service.kill()
        hosts[0].kill()
        _, alive = psutil.wait_procs(processes, timeout=60)  # its local Ray goes with it...
        names = [p.name() for p in alive]
        assert not [n for n in names if n in ("raylet", "gcs_server")], names
        for leftover in alive:  # ...but for Ray's own dashboard and runtime-env agents
            leftover.kill()
        assert not sent.exists()  # the approved call had not run

        service.start()
        resumed = await _answer(service.url, killed)
        assert resumed["status"] == "succeeded", resumed
        # The same run, uninterrupted, for comparison.
        fresh_task = "parcels report R"
        fresh_id = (await submit(service.url, {"task": fresh_task, "agent": "lead"})).json()["id"]
        fresh = await _answer(service.url, fresh_id)
        assert fresh["status"] == "succeeded", fresh
        paid = await _answer(service.url, paying)
        payment_events = await all_events(service.url, paying)
    finally:
        service.stop()

    # Approved once, never asked again; the approved call ran once.
    assert paid["status"] == "succeeded", paid
    assert [k for _, k, _ in payment_events].count("approval_requested") == 1
    assert sent.read_text() == "sent\n"

    assert str(resumed["output"]).replace("report K", "report R") == fresh["output"]
    assert "call 1 for this task" in str(resumed["output"])
    # The count ran once; the model answered as many calls as in the uninterrupted run.
    assert parcels.read_text().splitlines().count(task) == 1
    assert _calls(calls, task) == _calls(calls, fresh_task) == 5
    assert resumed["usage"] == fresh["usage"]


# An agent with restarts that counts parcels (at most once) and then waits on an idempotent
# step; it dies during the wait (its actor killed, or its node removed) and resumes.
HELPER = """
name: durable-{tag}
env: [PARCELS_FILE]
agents:
  - {{name: boss, delegates: [helper], description: boss}}
  - name: helper
    description: helps with the parcels
    tools:
      - tests.testkit:count_parcels
      - {{function: "tests.testkit:slow_step", idempotent: true}}
    ray: {{max_restarts: 1, resources: {{{resource}: 1}}}}
    model:
      name: baton/scripted
      params:
        calls_file: "{calls}"
        replies:
          - {{tool_calls: [{{name: count_parcels, arguments: {{task: parcels {tag}}}}}]}}
          - {{tool_calls: [{{name: slow_step, arguments: {{seconds: 2}}}}]}}
          - {{content: helped}}
"""


@pytest.mark.parametrize("loss", ["actor", "node"])
async def test_an_agent_that_dies_mid_delegation_resumes_from_its_steps(
    ray_cluster: Any, tmp_path: Path, loss: str
) -> None:
    from orchestrator.engine import Engine
    from orchestrator.serving import journal_url
    from tests.testkit import config

    calls, parcels = tmp_path / "calls.txt", tmp_path / "parcels.txt"
    calls.touch()
    resource = f"parcels_{loss}"
    node = ray_cluster.add_node(num_cpus=1, resources={resource: 1})
    ray_cluster.wait_for_nodes()
    store_url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    store = await RunStore.open(store_url)
    system = config(HELPER.format(tag=loss, resource=resource, calls=calls))
    engine = Engine(
        system,
        namespace="baton-tests",
        env={"PARCELS_FILE": str(parcels)},
        journal_url=journal_url(store_url),
    )
    try:
        engine.start()
        await store.add("resumed-" + loss, "help", agent=None, system=system.config.name, config={})
        job = asyncio.ensure_future(engine.run("help with the parcels", run_id="resumed-" + loss))
        # The count has run and the slow step was asked for (both recorded): it is under way.
        await _recorded(store_url, "resumed-" + loss, {"tool_result"}, frozenset({"model:2"}))
        if loss == "actor":
            ray.kill(engine.pool.actors["helper"][0], no_restart=False)  # Ray restarts it
        else:
            ray_cluster.remove_node(node)  # Ray restarts it where the resource is again
            ray_cluster.add_node(num_cpus=1, resources={resource: 1})
        result = await asyncio.wait_for(job, timeout=90)
    finally:
        engine.stop()
        await store.close()
    assert result.status == RunStatus.SUCCEEDED and result.tree is not None, result.error
    [helper] = [n for n in result.tree.children if n.status == RunStatus.SUCCEEDED]
    assert helper.output == "helped", helper.error
    # The count ran once; the helper's model answered three calls in all, as without the loss.
    assert parcels.read_text().splitlines() == [f"parcels {loss}"]
    assert len(calls.read_text().splitlines()) == 3


async def test_a_replay_reproduces_a_run_from_its_record_without_calling_anything(
    api: str,
) -> None:
    first = (await submit(api, {"task": "calculate 6 * 7", "agent": "coordinator"})).json()
    original = await _answer(api, first["id"])
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        answer = await client.post(f"/v1/runs/{first['id']}/replay")
        assert answer.status_code == 202, answer.text
        replay_id = answer.json()["id"]
        assert answer.json()["replay_of"] == first["id"]
        replayed = await _answer(api, replay_id)
        assert replayed["status"] == "succeeded", replayed
        assert replayed["output"] == original["output"] and "42" in str(original["output"])
        assert replayed["usage"] == original["usage"]  # tokens as recorded, no call made
        for detail in ("agents", "full"):
            texts = [
                (
                    await client.get(
                        f"/v1/runs/{run_id}/diagram",
                        params={"detail": detail, "comparable": "true"},
                    )
                ).text
                for run_id in (first["id"], replay_id)
            ]
            assert texts[0] == texts[1], detail  # byte for byte
            assert "calculate" in texts[0] or detail == "agents"
        spans = (await client.get(f"/v1/runs/{replay_id}/trace")).json()["spans"]
        # A run still going cannot be replayed.
        running = (await submit(api, {"task": "wait", "agent": "sleeper"})).json()
        refused = await client.post(f"/v1/runs/{running['id']}/replay")
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "not_replayable"
        await client.post(f"/v1/runs/{running['id']}/cancel")

    def walk(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [n for node in nodes for n in (node, *walk(node["children"]))]

    chats = [s for s in walk(spans) if s["name"].startswith("chat ")]
    assert chats and all(s["attributes"].get("baton.step.replayed") for s in chats)


FORKED = """
name: forked
agents:
  - name: coordinator
    description: Plans the work.
    delegates: [analyst]
    model: {{name: baton/offline, params: {{calls_file: "{calls}"}}}}
  - name: analyst
    description: Does arithmetic.
    capabilities: [calculate]
    instructions: "{instructions}"
    tools: [configs.tools:calculate]
    model: {{name: baton/offline, params: {{calls_file: "{calls}"}}}}
"""


async def test_a_fork_with_a_changed_instruction_goes_live_from_the_step_it_changes(
    ray_cluster: Any, tmp_path: Path
) -> None:
    from orchestrator.engine import Engine
    from orchestrator.serving import journal_url
    from tests.testkit import config
    from tracing.sequence import sequence_diagram

    store_url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    store = await RunStore.open(store_url)
    calls = {v: tmp_path / f"{v}.txt" for v in ("before", "after")}
    engines = [
        Engine(
            config(FORKED.format(calls=calls[v], instructions=text)),
            namespace="baton-tests",
            journal_url=journal_url(store_url),
        )
        for v, text in (("before", "Be brief."), ("after", "Show your working, step by step."))
    ]
    try:
        for engine, run_id in zip(engines, ("parent", "fork"), strict=True):
            engine.start()
            await store.add(run_id, "calculate 6 * 7", agent=None, system="forked", config={})
        parent = await engines[0].run("calculate 6 * 7", run_id="parent")
        fork = await engines[1].run("calculate 6 * 7", run_id="fork", replay_of="parent", fork=True)
        # The same with the old config is a plain replay: nothing differs, nothing is called.
        same = await engines[0].run("calculate 6 * 7", run_id="same", replay_of="parent")
    finally:
        for engine in engines:
            engine.stop()
        await store.close()
    assert parent.status == fork.status == same.status == RunStatus.SUCCEEDED
    texts = [
        sequence_diagram(r.spans, detail="full", comparable=True).text.splitlines()
        for r in (parent, fork, same)
    ]
    assert texts[2] == texts[0]
    first = next(i for i, (a, b) in enumerate(zip(texts[0], texts[1], strict=False)) if a != b)
    # Identical up to the analyst's first model call, whose request (instructions) changed.
    assert "delegate_to_analyst" in "\n".join(texts[0][:first])
    assert "tok" in texts[1][first] and texts[1][first] != texts[0][first], texts[1][first]
    # The fork called the model only for the analyst, whose requests changed; the coordinator's
    # steps came from the record (its requests were the same).
    fork_calls = calls["after"].read_text().splitlines()
    assert len(fork_calls) == 2 and len(calls["before"].read_text().splitlines()) == 4
    assert fork.output == parent.output
