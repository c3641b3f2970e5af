"""Durable runs when an agent dies: its actor killed, or its node removed, mid-delegation; the
restarted agent resumes the delegation from its steps."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import ray

from agents.core.messages import RunStatus
from agents.ray.pool import PoolOptions
from orchestrator.engine import Execution, Submission
from orchestrator.store import RunMeta, RunStore
from tests.orchestrator.service.test_durability import _recorded

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.long, pytest.mark.heavy]


# An agent with restarts that counts parcels (at most once) and then waits on an idempotent
# step; it dies during the wait (its actor killed, or its node removed) and resumes.
HELPER = """
name: durable-{tag}
env: [PARCELS_FILE]
agents:
  - name: boss
    delegates: [helper]
    description: boss
    ray: {{resources: {{"node:__internal_head__": 0.01}}}}  # not on the node that goes
  - name: helper
    description: helps with the parcels
    tools:
      - tests.testkit:count_parcels
      - {{function: "tests.testkit:slow_step", idempotent: true}}
    ray: {{max_restarts: 1, resources: {{{resource}}}}}
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
    from orchestrator.store import absolute_store_url
    from tests.testkit import config

    calls, parcels = tmp_path / "calls.txt", tmp_path / "parcels.txt"
    calls.touch()
    # A node of its own to remove; a lost actor is restarted beside the boss.
    resource = '"node:__internal_head__": 0.01' if loss == "actor" else "parcels: 1"
    nodes = [ray_cluster.add_node(num_cpus=1, resources={"parcels": 1})] if loss == "node" else []
    ray_cluster.wait_for_nodes()
    store_url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    store = await RunStore.open(store_url)
    system = config(HELPER.format(tag=loss, resource=resource, calls=calls))
    engine = Engine(
        system,
        PoolOptions(
            namespace="baton-tests",
            env={"PARCELS_FILE": str(parcels)},
            store_url=absolute_store_url(store_url),
        ),
    )
    try:
        engine.start()
        await store.add(Submission("help"), RunMeta("resumed-" + loss, system.config.name, {}))
        job = asyncio.ensure_future(
            engine.run(Submission("help with the parcels"), Execution("resumed-" + loss))
        )
        # The count has run and the slow step was asked for (both recorded): it is under way.
        await _recorded(store_url, "resumed-" + loss, {"tool_result"}, frozenset({"model:2"}))
        if loss == "actor":
            ray.kill(engine.pool.actors["helper"][0], no_restart=False)  # Ray restarts it
        else:
            ray_cluster.remove_node(nodes.pop())  # Ray restarts it where the resource is again
            nodes.append(ray_cluster.add_node(num_cpus=1, resources={"parcels": 1}))
        result = await asyncio.wait_for(job, timeout=90)
    finally:
        engine.stop()
        await store.close()
        for left in nodes:  # a node costs its processes' CPU for as long as it lives
            ray_cluster.remove_node(left)
    assert result.status == RunStatus.SUCCEEDED and result.tree is not None, result.error
    [helper] = [n for n in result.tree.children if n.status == RunStatus.SUCCEEDED]
    assert helper.output == "helped", helper.error
    # The count ran once; the helper's model answered three calls in all, as without the loss.
    assert parcels.read_text().splitlines() == [f"parcels {loss}"]
    assert len(calls.read_text().splitlines()) == 3
