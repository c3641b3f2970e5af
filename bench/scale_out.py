"""Scale-out across Ray nodes, on a cluster simulated on this machine (`ray.cluster_utils`).

1. Fan-out: a coordinator delegates 32 parts in one step to a `worker` agent; each part runs a
   CPU-bound tool (~200 ms of hashing, no sleep). The worker has one replica per worker node, each
   replica asking for one CPU; every worker node has one CPU. Wall time with 1 worker node vs 2,
   and their ratio (the speed-up; the ideal is 2.0, less what the coordinator, the ledger and
   Ray's own processes take from this machine's 2 cores).
2. Per-hop overhead: a chain of 4 delegations with an instant model, every agent on one node,
   vs each hop crossing to the other node; ms per hop is (chain run - single-agent run) / 4,
   measured in turns.

Run: .venv/bin/python bench/scale_out.py
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ray
from ray.cluster_utils import Cluster

from agents.core.messages import RunStatus
from bench._common import engine, interleaved_medians, median_seconds
from bench.work import rounds_for
from orchestrator.engine import Engine

PARTS = 32
TOOL_SECONDS = 0.2
HOPS = 4


def fanout_yaml(name: str, replicas: int, rounds: int) -> str:
    calls = ", ".join(
        f"{{name: delegate_to_worker, arguments: {{task: part {i}}}}}" for i in range(PARTS)
    )
    return f"""
name: {name}
limits: {{max_parallel_tools: {PARTS}}}
agents:
  - name: coordinator
    delegates: [worker]
    model: {{name: baton/scripted, params: {{replies: [{{tool_calls: [{calls}]}},
                                                         {{content: combined}}]}}}}
  - name: worker
    tools: [bench.work:burn]
    ray: {{replicas: {replicas}, num_cpus: 1}}
    model:
      name: baton/scripted
      params: {{replies: [{{tool_calls: [{{name: burn, arguments: {{rounds: {rounds}}}}}]}},
                          {{content: part done}}]}}
"""


async def fanout_seconds(name: str, replicas: int, rounds: int) -> float:
    baton = engine(fanout_yaml(name, replicas, rounds))
    placed = {r["node_id"] for r in await baton.placement() if r["agent"] == "worker"}
    assert len(placed) == replicas, f"worker replicas share a node: {placed}"

    async def run() -> None:
        result = await baton.run("fan out")
        assert result.status == RunStatus.SUCCEEDED, result.error
        assert result.tree is not None and len(result.tree.children) == PARTS

    seconds = await median_seconds(run, warmup=1, repeats=3)
    baton.stop()
    return seconds


def chain_yaml(name: str, nodes: list[str]) -> str:
    """Agents a0..aN, agent i pinned by custom resource to nodes[i]."""
    lines = [f"name: {name}", f"limits: {{max_depth: {len(nodes)}}}", "agents:"]
    last = len(nodes) - 1
    for i, node in enumerate(nodes):
        replies = (
            f"[{{tool_calls: [{{name: delegate_to_a{i + 1}, arguments: {{task: go}}}}]}}, "
            "{content: done}]"
            if i < last
            else "[{content: done}]"
        )
        delegates = f"delegates: [a{i + 1}], " if i < last else ""
        lines.append(
            f"  - {{name: a{i}, {delegates}ray: {{resources: {{{node}: 0.01}}}}, "
            f"model: {{name: baton/scripted, params: {{replies: {replies}}}}}}}"
        )
    return "\n".join(lines)


def chain_run(baton: Engine):  # type: ignore[no-untyped-def]
    async def run() -> None:
        result = await baton.run("go")
        assert result.status == RunStatus.SUCCEEDED, result.error

    return run


async def hop_ms() -> tuple[float, float]:
    single = engine(chain_yaml("single", ["node_a"]))
    within = engine(chain_yaml("within", ["node_a"] * (HOPS + 1)))
    across = engine(chain_yaml("across", ["node_a", "node_b"] * (HOPS // 2) + ["node_a"]))
    base, near, far = await interleaved_medians(
        [chain_run(single), chain_run(within), chain_run(across)], warmup=5, repeats=40
    )
    for baton in (single, within, across):
        baton.stop()
    return (near - base) * 1000 / HOPS, (far - base) * 1000 / HOPS


async def main() -> None:
    # The head takes no CPU work: agents asking for CPUs go to the worker nodes.
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False}
    )
    cluster.add_node(num_cpus=1, resources={"node_a": 1})
    ray.init(
        address=cluster.address,
        namespace="baton-bench",
        logging_level="ERROR",
        log_to_driver=False,
    )
    try:
        rounds = rounds_for(TOOL_SECONDS)
        one = await fanout_seconds("one_node", 1, rounds)
        cluster.add_node(num_cpus=1, resources={"node_b": 1})
        cluster.wait_for_nodes()
        two = await fanout_seconds("two_nodes", 2, rounds)
        serial = PARTS * TOOL_SECONDS
        print(f"fan-out: {PARTS} parts x {TOOL_SECONDS * 1000:.0f} ms of CPU ({rounds} rounds)")
        print(f"{'worker nodes':>12} {'wall s':>7} {'serial s':>9}")
        print(f"{1:>12} {one:>7.2f} {serial:>9.2f}")
        print(f"{2:>12} {two:>7.2f} {serial:>9.2f}")
        print(f"speed-up 2 nodes vs 1: {one / two:.2f} (ideal 2.0)", flush=True)

        near, far = await hop_ms()
        print(
            f"per-hop overhead: within a node {near:.2f} ms, across nodes {far:.2f} ms, "
            f"ratio {far / near:.2f}"
        )
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
