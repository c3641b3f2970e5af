"""An agent whose replicas follow the load, on a Ray cluster whose own autoscaler adds and removes
nodes (`tests.autoscaling`: Ray's fake multi-node provider, real raylets on this machine): a
burst grows the agent from one replica to three and the cluster by a node for each; when the
burst ends both shrink back; every run of the burst succeeds and its work is done exactly once."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.ports import free_port
from tests.service import ServiceProcess

pytestmark = [pytest.mark.heavy, pytest.mark.last]

ROOT = Path(__file__).resolve().parents[3]
TEAM = """
name: scaling
env: [PARCELS_FILE]
limits: {deadline_s: 120}
agents:
  - name: lead
    description: Hands the counting to the counter.
    delegates: [counter]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: delegate_to_counter, arguments: {task: count the parcels}}]}
          - {content: done}
  - name: counter
    description: Counts parcels, slowly.
    tools: [tests.testkit:slow_step, tests.testkit:count_parcels]
    # Each replica needs a CPU, and the head has one: the first runs there, each other takes a
    # node the autoscaler adds.
    ray: {replicas: {min: 1, max: 3, target: 1, up_after_s: 1, down_after_s: 3}, num_cpus: 1}
    model:
      name: baton/scripted
      params:
        replies:
          - tool_calls:
              - {name: slow_step, arguments: {seconds: 3}}
              - {name: count_parcels, arguments: {task: parcel}}
          - {content: counted}
"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An autoscaling cluster of its own (its address, and the log of its alive nodes)."""
    nodes = tmp_path / "nodes.log"
    helper = subprocess.Popen(
        [sys.executable, "-m", "tests.autoscaling", str(free_port()), "1", "3", str(nodes)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert helper.stdout is not None and helper.stdin is not None
    try:
        yield helper.stdout.readline().strip(), nodes
    finally:
        helper.stdin.close()  # it stops its head and the nodes its autoscaler launched
        helper.wait(timeout=60)


def _alive(nodes: Path) -> list[int]:
    return [int(line.split()[1]) for line in nodes.read_text().splitlines()]


def _metrics(url: str) -> list[Any]:
    """The service's metric samples."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return [sample for f in text_string_to_metric_families(text) for sample in f.samples]


def _sum(samples: list[Any], name: str, **labels: str) -> float:
    return sum(
        s.value
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def _counters(agents: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for a in agents["agents"] if a["name"] == "counter" for r in a["replicas"]]


async def _burst(url: str, most_s: float) -> tuple[list[str], list[int], dict[str, int]]:
    """Runs submitted three at a time until the counter has had three replicas for two rounds
    (at most `most_s`: nodes take a while to start on a busy machine).

    Their ids, the counter's replicas seen after each round, and the most delegations each
    replica had served.
    """
    ids: list[str] = []
    replicas: list[int] = []
    served: dict[str, int] = {}
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        started = time.monotonic()
        while time.monotonic() - started < most_s and replicas[-2:] != [3, 3]:
            made = await asyncio.gather(
                *(client.post("/v1/runs", json={"task": "count"}) for _ in range(3))
            )
            ids += [answer.json()["id"] for answer in made]
            await asyncio.sleep(1.0)
            counters = _counters((await client.get("/v1/agents")).json())
            replicas.append(len(counters))
            for replica in counters:
                served[replica["actor"]] = max(
                    served.get(replica["actor"], 0), replica.get("invocations") or 0
                )
        for run_id in ids:  # each to its end
            async with client.stream("GET", f"/v1/runs/{run_id}/events") as stream:
                async for _ in stream.aiter_lines():
                    pass
    return ids, replicas, served


def test_a_burst_grows_an_agent_and_the_cluster_then_both_shrink_back(
    cluster: tuple[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    address, nodes = cluster
    (tmp_path / "team.yaml").write_text(TEAM)
    parcels = tmp_path / "parcels"
    service = ServiceProcess(
        tmp_path / "team.yaml",
        f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}",
        address,
        tmp_path / "serve.log",
        PARCELS_FILE=str(parcels),
        PYTHONPATH=str(ROOT),
    )
    service.start(timeout_s=240)
    try:
        url = service.url
        ids, seen, served = asyncio.run(_burst(url, 120))
        runs = [httpx.get(f"{url}/v1/runs/{i}", timeout=30).json() for i in ids]
        assert {r["status"] for r in runs} == {"succeeded"}
        # Each run's counting was done once: none lost, none twice.
        assert len(parcels.read_text().splitlines()) == len(ids)
        agents = httpx.get(f"{url}/v1/agents", timeout=30).json()
        grown = [d for d in agents["scaling"] if d["after"] > d["before"]]
        assert grown and grown[0]["before"] == 1 and max(d["after"] for d in grown) == 3
        assert "delegations in flight on 1 replicas" in grown[0]["why"]
        assert max(seen) == 3 and len(served) == 3  # three replicas, and each one took work
        assert all(n > 0 for n in served.values()), served
        # The burst over: the counter drains back to one replica, then the idle nodes go.
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            agents = httpx.get(f"{url}/v1/agents", timeout=30).json()
            metrics = _metrics(url)
            replicas = _sum(metrics, "baton_agent_replicas", baton_host="counter")
            if len(_counters(agents)) == 1 and _alive(nodes)[-1] == 1 and replicas == 1:
                break
            time.sleep(1)
        counters = _counters(agents)
        assert len(counters) == 1 and counters[0]["actor"].endswith(".counter.0")
        shrunk = [d for d in agents["scaling"] if d["after"] < d["before"]]
        assert [d["after"] for d in shrunk][-1] == 1
        alive = _alive(nodes)
        assert max(alive) == 3 and alive[-1] == 1  # a node for each new replica, then none
        # The metrics say so too.
        assert _sum(metrics, "baton_agent_replicas", baton_host="counter") == 1
        up = _sum(metrics, "baton_agent_scalings_total", baton_scaling_direction="up")
        down = _sum(metrics, "baton_agent_scalings_total", baton_scaling_direction="down")
        assert up == len(grown) and down == len(shrunk)
        with capsys.disabled():
            print(
                f"\nautoscaling: {len(ids)} runs; counter replicas seen {seen}; decisions "
                f"{[(d['before'], d['after']) for d in agents['scaling']]}; alive nodes {alive}"
            )
    finally:
        service.stop()
