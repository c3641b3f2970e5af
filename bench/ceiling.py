"""The ceiling one team's singletons set, with a ledger of 1 and of 4 shards, through HTTP.

The workload of `http_throughput.py` (two-level delegations, model calls of 50 ms, 50 tasks in
flight through a real `baton serve` on 127.0.0.1, each followed over SSE), run once with
`BATON_LEDGER_SHARDS=1` and once with 4, on one Ray on this machine. For each,
the CPU milliseconds per task of every process: the service and the agent hosts grow with
replicas and nodes, a ledger shard does not (one Python actor uses at most one core), so the
largest shard's CPU per task sets the team's ceiling (1,000 ms / that, tasks per second) however
large the cluster. Printed: each figure, the ratio of the 4-shard ceiling to the 1-shard one
(target: at least 3.5), of the largest shard's CPU per task (target: at most 0.25 of one
shard's), and of the whole system's CPU per task (target: no more than 1.0).

Run: .venv/bin/python bench/ceiling.py
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil
import ray

from bench._common import start
from bench.http_throughput import CONFIG, served_round

TASKS = 300
SHARDS = (1, 4)


def _cpu_by_process(service_pid: int) -> dict[tuple[str, int], float]:
    """CPU seconds so far of each of Baton's and Ray's processes, by (role, pid)."""
    found: dict[tuple[str, int], float] = {}
    for process in psutil.process_iter():
        try:
            line = " ".join(process.cmdline())
            if process.pid == service_pid:
                role = "baton serve"
            elif "LedgerActor" in line:
                role = "ledger shard"
            elif "AgentHost" in line:
                role = "agent host"
            elif "gcs_server" in line or "raylet" in line:
                role = "ray gcs + raylet"
            elif process.pid == os.getpid():
                role = "client (this process)"
            else:
                continue
            times = process.cpu_times()
            found[(role, process.pid)] = times.user + times.system
        except psutil.Error:
            continue
    return found


@dataclass
class Shape:
    """One measurement: CPU ms per task of each process, by role."""

    shards: int
    rate: float
    per_process: dict[tuple[str, int], float]

    def role(self, role: str) -> list[float]:
        return sorted((ms for (r, _), ms in self.per_process.items() if r == role), reverse=True)

    @property
    def largest_shard(self) -> float:
        return max(self.role("ledger shard"), default=0.0)

    @property
    def system_ms(self) -> float:
        """Every process's CPU per task but the benchmark's own client."""
        return sum(ms for (r, _), ms in self.per_process.items() if not r.startswith("client"))

    def lines(self) -> list[str]:
        roles = sorted({r for r, _ in self.per_process})
        parts = []
        for role in roles:
            each = self.role(role)
            shown = " + ".join(f"{ms:.2f}" for ms in each)
            parts.append(f"{role} {sum(each):.2f}" + (f" ({shown})" if len(each) > 1 else ""))
        return [
            f"-- ledger of {self.shards} shard{'s' if self.shards > 1 else ''}: "
            f"{self.rate:.1f} tasks/s through HTTP",
            "CPU ms per task: " + ", ".join(parts),
            f"whole system: {self.system_ms:.2f} ms per task; largest ledger shard "
            f"{self.largest_shard:.2f} ms: a ceiling of {1000 / self.largest_shard:.0f} tasks/s "
            "for the team, whatever the cluster",
        ]


async def measure(shards: int) -> Shape:
    address = ray.get_runtime_context().gcs_address
    # A team of its own each time (its ledger is made with the shards asked).
    config_text = CONFIG.replace("REPLICAS", "1").replace("bench-http", f"bench-ceiling-{shards}")
    wall, _, _, before, after = await served_round(
        config_text, address, _cpu_by_process, TASKS, BATON_LEDGER_SHARDS=str(shards)
    )
    used = {k: (after[k] - before.get(k, 0.0)) * 1000 / TASKS for k in after}
    return Shape(shards, TASKS / wall, {k: ms for k, ms in used.items() if ms > 0.005})


async def main() -> None:
    start()
    print(f"tasks: {TASKS}, 50 at a time, through HTTP; {os.cpu_count()} cores, one Ray node")
    one, many = [await measure(n) for n in SHARDS]
    for shape in (one, many):
        print("\n".join(shape.lines()))
    print("-- 4 shards against 1")
    print(
        f"largest ledger shard's CPU per task: {many.largest_shard / one.largest_shard:.2f} "
        "(target at most 0.25)"
    )
    print(
        f"team ceiling: {one.largest_shard / many.largest_shard:.2f}x "
        f"({1000 / one.largest_shard:.0f} -> {1000 / many.largest_shard:.0f} tasks/s; "
        "target at least 3.5x)"
    )
    print(f"whole system's CPU per task: {many.system_ms / one.system_ms:.2f} (target at most 1.0)")


if __name__ == "__main__":
    asyncio.run(main())
