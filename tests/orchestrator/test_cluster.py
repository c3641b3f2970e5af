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

from agents.core.messages import RunStatus
from orchestrator.engine import Engine
from tests.service import ServiceProcess
from tests.testkit import start, until_written, wait_for_event

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.long]


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

    result = await engine.run("write the code and write the prose")
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
    job = asyncio.ensure_future(engine.run("search the archive", run_id="node-gone"))
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
    job = asyncio.ensure_future(engine.run("help with the archive", run_id=run_id))
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


async def test_an_agent_killed_past_its_restarts_fails_the_delegation_at_once(
    started: list[Engine],
) -> None:
    engine = start(
        started,
        RESTARTABLE.format(
            tag="exhausted",
            tool="{function: 'tests.testkit:slow_step', idempotent: true}",
            name="slow_step",
            arguments="{seconds: 1.5}",
        ),
        detached=True,  # as `baton serve`'s: a dead one's name is gone at once
    )

    async def sigkill_helper_mid_tool(run_id: str) -> Any:
        # As the kernel's OOM killer does: SIGKILL to the actor's process.
        pid = {r["agent"]: r for r in await engine.placement()}["helper"]["pid"]
        job = asyncio.ensure_future(engine.run("help with the archive", run_id=run_id))
        await wait_for_event(engine, run_id, "tool_started", "helper", timeout_s=60)
        os.kill(pid, signal.SIGKILL)
        return await asyncio.wait_for(job, timeout=90)

    first = await sigkill_helper_mid_tool("exhausted-1")  # its one restart
    assert first.status == RunStatus.SUCCEEDED, first.error
    began = time.monotonic()
    second = await sigkill_helper_mid_tool("exhausted-2")  # none left: dead for good
    took = time.monotonic() - began
    assert second.tree is not None
    [helper] = second.tree.children
    assert helper.status == RunStatus.FAILED and "is unavailable" in (helper.error or "")
    # The tool takes 1.5 s and the run's deadline is minutes away: nothing waits on the dead.
    assert took < 15, took
    stats = {r["agent"]: r for r in await engine.placement()}
    assert stats["helper"]["state"].startswith("unavailable")


def test_readiness_names_the_agents_of_a_host_that_died(ray_address: str, tmp_path: Path) -> None:
    config = tmp_path / "solo.yaml"
    config.write_text(
        "name: solo-team\n"
        "agents: [{name: solo, description: Adds., tools: [configs.tools:calculate]}]\n"
    )
    service = ServiceProcess(
        config, f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}", ray_address, tmp_path / "log"
    )
    service.start()
    try:
        with httpx.Client(base_url=service.url, timeout=30) as http:
            assert http.get("/readyz").json()["checks"]["agents"] == "ok"
            [solo] = http.get("/v1/agents").json()["agents"]
            os.kill(solo["replicas"][0]["pid"], signal.SIGKILL)  # as the OOM killer does
            deadline = time.monotonic() + 30
            while (ready := http.get("/readyz")).status_code == 200:
                assert time.monotonic() < deadline, "readiness never saw the host die"
            assert ready.status_code == 503
            assert ready.json()["checks"]["agents"].startswith("down: solo (")
    finally:
        service.stop()
