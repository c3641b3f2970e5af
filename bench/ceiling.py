"""The ceiling one team's ledger sets, with 1 and with 4 shards, through HTTP.

The workload of `http_throughput.py` (two-level delegations, model calls of 50 ms, each task
followed over SSE) through a real `baton serve` on 127.0.0.1, run with `BATON_LEDGER_SHARDS=1`
and with 4, on one Ray on this machine, each at three loads (10, 25 and 50 tasks in flight).
For each, the CPU milliseconds per task of every process: the service and the agent hosts grow
with replicas and nodes, a ledger shard does not (one Python actor uses at most one core), so the
busiest shard's CPU per task sets the team's ceiling (1,000 ms / that, tasks per second) however
large the cluster. A shard's CPU per task falls as the load grows (each process sends it a batch
at most every 50 ms, however many runs the batch carries), so each load is printed. Printed: the
figures, and 4 shards against 1 at the highest load: the busiest shard's CPU per task (target at
most 0.25), the ceiling (target at least 3.5x), the whole system's CPU per task (target at most
1.0). Last, a shard's CPU per run it carries: one shard also runs at 4 in flight, about the runs a
second each of 4 shards carries at 50, so the two compare at the same load per shard.

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
from bench.http_throughput import CONFIG, served_rounds


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
    def per_run_carried(self) -> float:
        """A shard's mean CPU per run it carries (the runs spread evenly over the shards)."""
        return sum(self.role("ledger shard"))

    @property
    def carried(self) -> float:
        """Runs a second each shard carries."""
        return self.rate / self.shards

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


LOADS = [(150, 10), (200, 25), (300, 50)]  # (tasks, in flight)
# One shard also at about the runs a second each of 4 shards carries at the highest load.
CARRIED = (150, 4)


async def measure(shards: int, loads: list[tuple[int, int]]) -> list[Shape]:
    """The shape at each load."""
    address = ray.get_runtime_context().gcs_address
    # A team of its own each time (its ledger is made with the shards asked).
    config_text = CONFIG.replace("REPLICAS", "1").replace("bench-http", f"bench-ceiling-{shards}")
    rounds = await served_rounds(
        config_text, address, _cpu_by_process, loads, BATON_LEDGER_SHARDS=str(shards)
    )
    shapes = []
    for one in rounds:
        used = {k: (one.after[k] - one.before.get(k, 0.0)) * 1000 / one.tasks for k in one.after}
        kept = {k: ms for k, ms in used.items() if ms > 0.005}
        shapes.append(Shape(shards, one.tasks / one.wall, kept))
    return shapes


async def main() -> None:
    start()
    loads = ", ".join(f"{tasks} tasks {n} in flight" for tasks, n in LOADS)
    print(f"through HTTP, {loads}; {os.cpu_count()} cores, one Ray node")
    [low, *ones], manys = await measure(1, [CARRIED, *LOADS]), await measure(4, LOADS)
    for (_, in_flight), one, many in zip(LOADS, ones, manys, strict=True):
        print(
            f"{in_flight} in flight: busiest shard {one.largest_shard:.2f} ms per task at "
            f"{one.rate:.0f} tasks/s (1 shard), {many.largest_shard:.2f} at {many.rate:.0f} "
            f"(4 shards): {many.largest_shard / one.largest_shard:.2f}"
        )
    one, many = ones[-1], manys[-1]
    for shape in (one, many):
        print("\n".join(shape.lines()))
    print("-- 4 shards against 1, at the highest load")
    print(
        f"busiest ledger shard's CPU per task: {many.largest_shard / one.largest_shard:.2f} "
        "(target at most 0.25)"
    )
    print(
        f"team ceiling: {one.largest_shard / many.largest_shard:.2f}x "
        f"({1000 / one.largest_shard:.0f} -> {1000 / many.largest_shard:.0f} tasks/s; "
        "target at least 3.5x)"
    )
    print(f"whole system's CPU per task: {many.system_ms / one.system_ms:.2f} (target at most 1.0)")
    print("-- a shard's CPU per run it carries, by the runs a second it carries")
    for label, shape in (("1 shard", low), ("each of 4 shards", many), ("1 shard", one)):
        print(f"{label} at {shape.carried:.1f} runs/s: {shape.per_run_carried:.2f} ms per run")


if __name__ == "__main__":
    asyncio.run(main())
