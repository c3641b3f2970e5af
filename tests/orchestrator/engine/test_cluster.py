"""Agents on a multi-node Ray cluster (the session's head, and two worker nodes with custom
resources for this module's tests), and runs that stay correct when actors and nodes fail."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import ray
from prometheus_client.parser import text_string_to_metric_families

from agents.core.events import ModelFinished
from agents.core.messages import RunStatus
from agents.ray.gate_actor import GATES_ACTOR
from orchestrator.engine import Engine, Execution, Submission
from tests.openai_server import FakeOpenAI
from tests.service import ServiceProcess, all_events, follow
from tests.testkit import start, until_written, wait_for_event

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.long, pytest.mark.heavy]

# The provider gate of the gate test: requests per window of seconds.
GATE_REQUESTS, GATE_S = 6, 1.5


@pytest.fixture(scope="module", autouse=True)
def worker_nodes(ray_cluster: Any) -> Iterator[None]:
    """Two worker nodes, one with the custom resource `coder`, one with `writer`."""
    nodes = [ray_cluster.add_node(num_cpus=1, resources={r: 4}) for r in ("coder", "writer")]
    ray_cluster.wait_for_nodes()
    yield
    for node in nodes:
        ray_cluster.remove_node(node)


def node_of(cluster: Any, resource: str) -> str:
    """The id of the (live) node that has `resource`."""
    return str(next(n["NodeID"] for n in ray.nodes() if n["Alive"] and resource in n["Resources"]))


async def test_agents_land_where_their_resources_are_and_their_spans_join_one_trace(
    ray_cluster: Any, started: list[Engine]
) -> None:
    engine = start(
        started,
        """
        name: placed
        agents:
          - {name: lead, delegates: [coder, writer], description: leads}
          - {name: coder, description: writes code, ray: {resources: {coder: 1}}}
          - {name: writer, description: writes prose, ray: {resources: {writer: 1}}}
        """,
    )
    placement = {r["agent"]: r for r in await engine.placement()}
    assert placement["coder"]["node_id"] == node_of(ray_cluster, "coder")
    assert placement["writer"]["node_id"] == node_of(ray_cluster, "writer")
    assert placement["coder"]["node_ip"] and placement["coder"]["state"] == "alive"

    result = await engine.run(Submission("write the code and write the prose"))
    assert result.status == RunStatus.SUCCEEDED and result.tree is not None
    assert {c.agent for c in result.tree.children} == {"coder", "writer"}
    assert len({s["trace_id"] for s in result.spans}) == 1
    agents = {
        s["attributes"]["gen_ai.agent.name"]: s["resource"]["baton.ray.node_id"]
        for s in result.spans
        if s["name"].startswith("invoke_agent ")
    }
    assert agents["coder"] == node_of(ray_cluster, "coder")
    assert agents["writer"] == node_of(ray_cluster, "writer")
    by_id = {s["span_id"]: s for s in result.spans}
    coder = next(s for s in result.spans if s["name"] == "invoke_agent coder")
    assert by_id[coder["parent_span_id"]]["name"] == "execute_tool delegate_to_coder"
    # Load, as the API reports it: every delegation counted where it ran.
    after = {r["agent"]: r for r in await engine.placement()}
    assert after["coder"]["invocations"] == 1 and after["coder"]["inflight"] == 0


async def test_a_node_removed_mid_run_ends_the_run_with_its_spans(
    ray_cluster: Any, started: list[Engine]
) -> None:
    doomed = ray_cluster.add_node(num_cpus=1, resources={"doomed": 1})
    ray_cluster.wait_for_nodes()
    engine = start(
        started,
        """
        name: doomed
        agents:
          - name: boss
            delegates: [remote]
            description: boss
            ray: {resources: {"node:__internal_head__": 0.01}}  # not on the node that goes
          - name: remote
            description: slow archive search on the doomed node
            tools: [tests.testkit:slow_step]
            ray: {resources: {doomed: 1}}
            model:
              name: baton/scripted
              params: {replies: [{tool_calls: [{name: slow_step, arguments: {seconds: 60}}]}]}
        """,
    )
    job = asyncio.ensure_future(
        engine.run(Submission("search the archive"), Execution("node-gone"))
    )
    await wait_for_event(engine, "node-gone", "tool_started", "remote", timeout_s=60)
    ray_cluster.remove_node(doomed)
    result = await asyncio.wait_for(job, timeout=60)
    assert result.status == RunStatus.SUCCEEDED, result.error  # the boss went on with the error
    assert result.tree is not None
    [remote] = result.tree.children
    assert remote.status == RunStatus.FAILED
    assert "is unavailable" in (remote.error or "") and "no restarts configured" in remote.error
    # The remote agent's own spans died with its node; its caller recorded the loss.
    names = [s["name"] for s in result.spans]
    assert names.count("invoke_agent remote") == 1
    lost = next(s for s in result.spans if s["name"] == "invoke_agent remote")
    assert lost["status"] == "ERROR" and lost["attributes"]["error.type"] in (
        "ActorDiedError",
        "RayActorError",
        "ActorUnavailableError",
    )
    assert {"invoke_workflow baton", "invoke_agent boss", "execute_tool delegate_to_remote"} <= set(
        names
    )
    assert len({s["trace_id"] for s in result.spans}) == 1


RESTARTABLE = """
name: restartable-{tag}
agents:
  - {{name: boss, delegates: [helper], description: boss}}
  - name: helper
    description: helps with the archive
    tools: [{tool}]
    ray: {{max_restarts: 1}}
    model:
      name: baton/scripted
      params:
        replies:
          - {{tool_calls: [{{name: {name}, arguments: {arguments}}}]}}
          - {{content: helped}}
"""


async def kill_helper_mid_tool(engine: Engine, run_id: str, effect: Path | None = None) -> Any:
    """Run, and kill the helper's actor while its tool runs (once `effect` exists, if given).

    (`tool_started` reaches the ledger as the tool is about to run: the tool's own first act
    may not have happened yet.)
    """
    job = asyncio.ensure_future(engine.run(Submission("help with the archive"), Execution(run_id)))
    await wait_for_event(engine, run_id, "tool_started", "helper", timeout_s=60)
    if effect is not None:
        await until_written(effect, f"the tool never made {effect}")
    ray.kill(engine.pool.actors["helper"][0], no_restart=False)  # Ray restarts it
    return await asyncio.wait_for(job, timeout=60)


async def test_a_restartable_agent_killed_mid_delegation_is_retried_once(
    started: list[Engine],
) -> None:
    engine = start(
        started,
        RESTARTABLE.format(
            tag="idempotent",
            tool="{function: 'tests.testkit:slow_step', idempotent: true}",
            name="slow_step",
            arguments="{seconds: 1.5}",
        ),
    )
    result = await kill_helper_mid_tool(engine, "killed-retried")
    assert result.tree is not None
    [helper] = result.tree.children
    assert result.status == RunStatus.SUCCEEDED, (result.error, helper.status, helper.error)
    assert helper.status == RunStatus.SUCCEEDED and helper.output == "helped", helper.error
    helpers = [s for s in result.spans if s["name"] == "invoke_agent helper"]
    assert sorted(s["status"] for s in helpers) == ["ERROR", "OK"]  # the lost try, the retry
    stats = {r["agent"]: r for r in await engine.placement()}
    assert stats["helper"]["restarted"] is True


async def test_a_call_that_must_run_at_most_once_is_never_run_again(
    started: list[Engine], tmp_path: Path
) -> None:
    outbox = tmp_path / "outbox"
    engine = start(
        started,
        RESTARTABLE.format(
            tag="effects",
            tool="tests.testkit:send_once",
            name="send_once",
            arguments=f'{{path: "{outbox}", seconds: 1.5}}',
        ),
    )
    result = await kill_helper_mid_tool(engine, "killed-not-retried", outbox)
    assert result.tree is not None
    [helper] = result.tree.children
    assert helper.status == RunStatus.FAILED
    assert "not retried: send_once had started (at most once)" in (helper.error or "")
    assert outbox.read_text() == "sent\n"  # once, not twice


async def test_a_host_killed_past_its_restarts_is_started_again_until_a_crash_loop(
    started: list[Engine],
) -> None:
    engine = start(
        started,
        RESTARTABLE.format(
            tag="exhausted",
            tool="{function: 'tests.testkit:slow_step', idempotent: true}",
            name="slow_step",
            arguments="{seconds: 1.5}",
        )
        # Baton starts a dead host again once in the window; the next death is a crash loop.
        + "supervision: {restarts: 1, backoff_min_s: 0.2}\n",
        detached=True,  # as `baton serve`'s: supervised, and a dead one's name is gone at once
    )

    async def sigkill_helper_mid_tool(run_id: str) -> Any:
        # As the kernel's OOM killer does: SIGKILL to the actor's process.
        pid = {r["agent"]: r for r in await engine.placement()}["helper"]["pid"]
        job = asyncio.ensure_future(
            engine.run(Submission("help with the archive"), Execution(run_id))
        )
        await wait_for_event(engine, run_id, "tool_started", "helper", timeout_s=60)
        os.kill(pid, signal.SIGKILL)
        return await asyncio.wait_for(job, timeout=90)

    first = await sigkill_helper_mid_tool("exhausted-1")  # Ray's one restart
    assert first.status == RunStatus.SUCCEEDED, first.error
    # Ray's restarts are spent: the supervisor creates the host again and the run goes on.
    second = await sigkill_helper_mid_tool("exhausted-2")
    assert second.status == RunStatus.SUCCEEDED, second.error
    assert second.tree is not None and second.tree.children[0].output == "helped"
    events, _ = await engine.ledger.events("exhausted-2", 0, wait_s=0)
    [back] = [e for _, e in events if e.type == "host_restarted"]
    assert back.agent == "helper" and back.restarts == 1 and "ActorDiedError" in (back.cause or "")
    [wait] = [s for s in second.spans if s["name"] == "wait_for_host helper"]
    assert wait["attributes"]["baton.host.state"] == "alive" and wait["status"] != "ERROR"
    stats = {r["agent"]: r for r in await engine.placement()}
    assert stats["helper"]["state"] == "alive" and stats["helper"]["restarts"] == 1
    # The host started again has its own Ray restart; past it, it died again within the
    # window: left down, and the delegation fails at once saying why.
    third = await sigkill_helper_mid_tool("exhausted-3")
    assert third.status == RunStatus.SUCCEEDED, third.error
    began = time.monotonic()
    fourth = await sigkill_helper_mid_tool("exhausted-4")
    took = time.monotonic() - began
    assert fourth.tree is not None
    [helper] = fourth.tree.children
    assert helper.status == RunStatus.FAILED and "crash loop" in (helper.error or ""), helper.error
    # The tool takes 1.5 s and the run's deadline is minutes away: nothing waits on the dead.
    assert took < 15, took
    stats = {r["agent"]: r for r in await engine.placement()}
    assert stats["helper"]["state"].startswith("crash_loop: ")
    # A run that begins with it fails at once; once one has, the next are refused before they
    # start (the service's 503 at admission), saying why; those that begin elsewhere are not.
    direct = await engine.run(Submission("help", agent="helper"), Execution("exhausted-5"))
    assert direct.status == RunStatus.FAILED and "left down" in (direct.error or "")
    entry, cause = await engine.left_down("helper") or ("", "")
    assert entry == "helper" and cause.startswith("crash loop: died again after 1 restarts")
    assert await engine.left_down("boss") is None and await engine.left_down(None) is None


# How soon a service's dead host is back: its pause (2 s here, to see it down) and a start.
HOST_BACK_BOUND_S = 45.0


def test_a_services_dead_host_is_not_ready_until_baton_starts_it_again(
    ray_address: str, tmp_path: Path
) -> None:
    outbox = tmp_path / "outbox"
    config = tmp_path / "shared.yaml"
    # Both agents share one host (no `ray:` options): killing it takes both.
    config.write_text(
        f"""
name: shared-team
supervision: {{backoff_min_s: 2}}
agents:
  - name: clerk
    description: Sends the letter once, then files it.
    tools: [tests.testkit:send_once, tests.testkit:slow_step]
    model:
      name: baton/scripted
      params:
        replies:
          - {{tool_calls: [{{name: send_once, arguments: {{path: "{outbox}", seconds: 0}}}}]}}
          - {{tool_calls: [{{name: slow_step, arguments: {{seconds: 30}}}}]}}
          - {{content: filed}}
  - {{name: adder, description: Adds., tools: [configs.tools:calculate]}}
"""
    )
    service = ServiceProcess(
        config, f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}", ray_address, tmp_path / "log"
    )
    service.start()
    try:
        with httpx.Client(base_url=service.url, timeout=30) as http:
            assert http.get("/readyz").json()["checks"]["agents"] == "ok"
            [host] = {
                r["pid"] for a in http.get("/v1/agents").json()["agents"] for r in a["replicas"]
            }
            letter = http.post("/v1/runs", json={"task": "send it", "agent": "clerk"}).json()

            async def until_filing() -> None:  # the letter sent (and stored), the filing begun
                async for _, kind, data in follow(service.url, letter["id"]):
                    if kind == "tool_started" and data.get("tool") == "slow_step":
                        return

            asyncio.run(until_filing())
            os.kill(host, signal.SIGKILL)  # as the OOM killer does
            killed_at = time.monotonic()
            while (ready := http.get("/readyz")).status_code == 200:
                assert time.monotonic() < killed_at + 30, "readiness never saw the host die"
            assert ready.json()["checks"]["agents"].startswith("down: adder (")
            # A run sent meanwhile waits for the host, then runs.
            sum_run = http.post("/v1/runs", json={"task": "calculate 6 * 7", "agent": "adder"})
            said = set()
            while (ready := http.get("/readyz")).status_code == 503:
                said.add(ready.json()["checks"]["agents"].split(":")[1].strip())
                assert time.monotonic() < killed_at + HOST_BACK_BOUND_S, ready.json()
            assert "adder (restarting" in said, said
            replicas = [r for a in http.get("/v1/agents").json()["agents"] for r in a["replicas"]]
            assert {(r["state"], r["restarts"]) for r in replicas} == {("alive", 1)}
            assert {r["pid"] for r in replicas} != {host}
            for run_id in (letter["id"], sum_run.json()["id"]):
                events = asyncio.run(all_events(service.url, run_id))
                assert events[-1][2]["status"] == "succeeded", events[-1]
                [back] = [data for _, kind, data in events if kind == "host_restarted"]
                assert back["waited_s"] > 0 and back["restarts"] == 1
            # The run that was in it resumed from its step log: the letter went once.
            assert outbox.read_text() == "sent\n"
            assert "42" in events[-1][2]["output"]
    finally:
        service.stop()


async def test_a_provider_gate_holds_for_two_replicas_and_an_agent_on_another_node(
    ray_address: str, tmp_path: Path
) -> None:
    """Two services with stores (so agents) of their own; their `near` agents run on the
    `writer` node, their `far` ones on the `coder` node. The provider sees no more than the
    gate's requests in any window, and nothing new during the `Retry-After` it sent."""
    fake = FakeOpenAI("stamp", {"text": "now"}, busy_first=1, retry_after=3)
    model = f'{{name: openai/fake, params: {{api_base: "{fake.base_url}", api_key: sk-none}}}}'
    config = tmp_path / "gated.yaml"
    config.write_text(
        f"""
name: gated
gates:
  - {{name: fake-provider, models: ["openai/*"], requests: {GATE_REQUESTS}, per_s: {GATE_S}}}
agents:
  - name: near
    tools: [tests.testkit:stamp]
    model: {model}
    ray: {{resources: {{writer: 1}}}}
  - name: far
    tools: [tests.testkit:stamp]
    model: {model}
    ray: {{resources: {{coder: 1}}}}
"""
    )
    services = [
        ServiceProcess(
            config, f"sqlite+aiosqlite:///{tmp_path / name}.db", ray_address, tmp_path / name
        )
        for name in ("a", "b")
    ]
    await asyncio.gather(*(asyncio.to_thread(s.start) for s in services))
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            burst = [(s.url, agent) for s in services for agent in ("near", "far", "near", "far")]
            made = await asyncio.gather(
                *(http.post(f"{url}/v1/runs", json={"task": "stamp", "agent": agent})
                  for url, agent in burst)
            )  # fmt: skip
            ran = await asyncio.gather(
                *(all_events(url, r.json()["id"]) for (url, _), r in zip(burst, made, strict=True))
            )
            calls = [d for events in ran for _, kind, d in events if kind == "model_finished"]
            waits = [ModelFinished.model_validate(d) for d in calls]
            # Which runs ran where: both teams' agents on two nodes went through one gate.
            agents = (await http.get(f"{services[0].url}/v1/agents")).json()["agents"]
            nodes = {a["name"]: {r["node_id"] for r in a["replicas"]} for a in agents}
            assert nodes["near"] != nodes["far"] and len(nodes["far"]) == 1, agents
            assert all(events[-1][2]["status"] == "succeeded" for events in ran), ran
            # Eight runs of two calls each, and the one refused.
            refused, arrivals = fake.refused, fake.arrivals
            assert len(arrivals) == 17 and len(refused) == 1
            for t in arrivals:
                inside = [u for u in arrivals if t <= u < t + GATE_S]
                assert len(inside) <= GATE_REQUESTS, (t, arrivals)
            # The first window's calls all passed the gate before the refusal came back (some
            # reached the server after it); the next waited out the Retry-After (longer than the
            # window), on every node.
            assert arrivals[GATE_REQUESTS] - refused[0] >= 3.0
            assert sum(w.gate_wait_s > 0 for w in waits) >= 8
            # Each service counts its own runs' waits (`baton.gate.wait`).
            for service in services:
                scraped = (await http.get(f"{service.url}/metrics")).text
                families = {f.name: f.samples for f in text_string_to_metric_families(scraped)}
                counts = [
                    s for s in families["baton_gate_wait_seconds"] if s.name.endswith("_count")
                ]
                assert sum(s.value for s in counts) >= 1, counts
            print(f"gate: {len(arrivals)} requests in {arrivals[-1] - arrivals[0]:.1f}s")

            # A provider that says to wait 20 s: a run due in 5 s is refused, saying why.
            gates = ray.get_actor(GATES_ACTOR, namespace="baton-tests")
            ray.get(gates.pause.remote("fake-provider", 20, "openai/fake: Retry-After 20s"))
            late = await http.post(
                f"{services[1].url}/v1/runs", json={"task": "stamp", "deadline_s": 5}
            )
            assert late.status_code == 429 and int(late.headers["Retry-After"]) >= 15
            error = late.json()["error"]
            assert error["code"] == "provider_gate_closed"
            assert "provider gate fake-provider: openai/fake: Retry-After 20s" in error["message"]
    finally:
        for service in services:
            service.stop()
        fake.close()
        _kill_actors_of("gated-")


def _kill_actors_of(prefix: str) -> None:
    """Kill the detached actors `baton serve` left of a system (supervisors first: they would
    start the hosts again), before this module removes the nodes its hosts were pinned to."""
    named = [
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["namespace"] == "baton-tests" and a["name"].startswith(prefix)
    ]
    for name in sorted(named, key=lambda n: not n.endswith(".supervisor")):
        ray.kill(ray.get_actor(name, namespace="baton-tests"), no_restart=True)
