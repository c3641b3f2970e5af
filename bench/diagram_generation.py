"""Diagram generation time for runs of about 100, 1,000 and 10,000 spans.

The spans are real: a hub agent delegating in batches to a worker, run in this process
(`agents.runtime.local.LocalTeam`, no Ray), each delegation three spans (the tool call, the worker's
invocation, its model call). Two shapes: batches of 50 calls to one worker (which fold into
loops), and steps calling 20 and 19 different workers in turn (nothing folds, so large runs are
paged). Prints the median time to compute
page 1 (and, for the paged shape, every page), the time per span, and the growth against the
smallest run. Target: under 1 s for 10,000 spans, and linear growth.

Run: .venv/bin/python bench/diagram_generation.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.runtime.local import LocalTeam
from bench._common import system
from tracing import SpanRecord, configure_tracing, workflow_span
from tracing.sequence import sequence_diagram

SIZES = (100, 1_000, 10_000)
REPEATS = 5


WORKERS = 20


def team_yaml(steps: list[list[str]]) -> str:
    replies = ", ".join(
        "{tool_calls: ["
        + ", ".join(f"{{name: delegate_to_{w}, arguments: {{task: part}}}}" for w in step)
        + "]}"
        for step in steps
    )
    workers = sorted({w for step in steps for w in step})
    lines = [
        "name: bench-diagram",
        f"limits: {{max_steps: {len(steps) + 2}, max_parallel_tools: 64}}",
        "agents:",
        f"  - name: hub\n    delegates: [{', '.join(workers)}]",
        f"    model: {{name: baton/scripted, params: {{replies: [{replies}, {{content: done}}]}}}}",
    ]
    lines += [f"  - {{name: {w}, description: does one part}}" for w in workers]
    return "\n".join(lines)


def steps_for(spans: int, alike: bool) -> list[list[str]]:
    delegations = max(spans // 3, 1)
    if alike:  # one worker, batches of 50: folds into loops
        fan = min(50, delegations)
        return [["worker"] * fan for _ in range(max(delegations // fan, 1))]
    # Twenty different workers a step (no alike calls), 20 and 19 in turn (no alike steps).
    steps: list[list[str]] = []
    while sum(map(len, steps)) < delegations:
        size = min(WORKERS - len(steps) % 2, delegations)
        steps.append([f"w{i}" for i in range(1, size + 1)])
    return steps


async def make_trace(steps: list[list[str]]) -> list[SpanRecord]:
    built = system(team_yaml(steps))
    agents = list(built.config.agents)
    team = LocalTeam(agents, {a.name: built.topology.delegates(a.name) for a in agents})
    collector = configure_tracing("bench")
    with workflow_span("bench", "hub", "bench") as root:
        await team.run("fan out", "hub", limits=built.config.limits)
    return collector.drain(root.get_span_context().trace_id)


def median_s(fn: object) -> float:
    samples = []
    for _ in range(REPEATS):
        began = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


async def main() -> None:
    print(
        f"{'shape':>7} {'spans':>7} {'page 1 ms':>10} {'all pages ms':>13} {'pages':>6} "
        f"{'chars':>7} {'µs/span':>8} {'growth':>7}"
    )
    for alike in (True, False):
        base: float | None = None
        for size in SIZES:
            spans = await make_trace(steps_for(size, alike))
            first = sequence_diagram(spans)
            page_one = median_s(lambda: sequence_diagram(spans))  # noqa: B023
            every = median_s(
                lambda: [sequence_diagram(spans, page=p) for p in range(1, first.pages + 1)]  # noqa: B023
            )
            per_span = page_one / len(spans) * 1e6
            base = base or per_span
            print(
                f"{'alike' if alike else 'unique':>7} {len(spans):>7} {page_one * 1000:>10.1f} "
                f"{every * 1000:>13.1f} {first.pages:>6} {len(first.text):>7} "
                f"{per_span:>8.1f} {per_span / base:>7.2f}",
                flush=True,
            )
    print("target: page 1 under 1000 ms at 10,000 spans; µs/span flat (growth near 1)")


if __name__ == "__main__":
    asyncio.run(main())
