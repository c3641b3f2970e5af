"""Fan-out: a coordinator delegating to 8 and 32 sub-agents in one step, every model call taking
100 ms. Ideal wall time is the critical path of three model latencies (coordinator, sub-agent,
coordinator); the figure is wall time / ideal.

Two floors, measured in the same run: bare Ray actors doing the same fan-out, and the model
calls alone in this process (one `litellm.acompletion`, then `width` of them gathered, then one:
no orchestration, no Ray, no spans). The latter is what the stack itself costs here: its calls'
CPU is spent on one core, one after the other, between the sleeps.

Run: .venv/bin/python bench/fanout.py [N ...]
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ray

from agents.core.messages import RunStatus
from bench._common import PlainModel, engine, median_seconds, start
from orchestrator.engine import Submission

WIDTHS = tuple(int(n) for n in sys.argv[1:]) or (8, 32)
LATENCY_MS = 100
IDEAL_S = 3 * LATENCY_MS / 1000


def _model() -> PlainModel:
    return PlainModel({"latency_ms": LATENCY_MS, "replies": [{"content": "done"}]})


@ray.remote
class BareWorker:
    def __init__(self) -> None:
        self._model = _model()

    async def call(self, task: str) -> str:
        await self._model.complete([{"role": "user", "content": task}])
        return "part done"


@ray.remote
class BareCoordinator:
    """The floor: model call, the same fan-out over bare actors, model call."""

    def __init__(self, workers: list[object]) -> None:
        self._workers = workers
        self._model = _model()

    async def call(self, task: str) -> int:
        messages = [{"role": "user", "content": task}]
        await self._model.complete(messages)
        parts = await asyncio.gather(*(w.call.remote(task) for w in self._workers))  # type: ignore[attr-defined]
        await self._model.complete(messages)
        return len(parts)


async def floor_seconds(width: int) -> float:
    workers = [BareWorker.remote() for _ in range(width)]  # type: ignore[attr-defined]
    head = BareCoordinator.remote(workers)  # type: ignore[attr-defined]
    seconds = await median_seconds(lambda: head.call.remote("fan out"), warmup=2, repeats=7)
    for actor in [head, *workers]:
        ray.kill(actor)
    return seconds


async def in_process_seconds(width: int) -> float:
    model = _model()

    async def fan_out() -> None:
        messages = [{"role": "user", "content": "fan out"}]
        await model.complete(messages)
        await asyncio.gather(
            *(model.complete([{"role": "user", "content": "part"}]) for _ in range(width))
        )
        await model.complete(messages)

    return await median_seconds(fan_out, warmup=2, repeats=7)


def fanout_yaml(width: int) -> str:
    calls = ", ".join(
        f"{{name: delegate_to_w{i}, arguments: {{task: part {i}}}}}" for i in range(width)
    )
    lines = [
        f"name: fanout{width}",
        f"limits: {{max_parallel_tools: {width}}}",
        "agents:",
        f"  - name: coordinator\n    delegates: [{', '.join(f'w{i}' for i in range(width))}]",
        f"    model: {{name: baton/scripted, params: {{latency_ms: {LATENCY_MS}, "
        f"replies: [{{tool_calls: [{calls}]}}, {{content: combined}}]}}}}",
    ]
    lines += [
        f"  - {{name: w{i}, model: {{name: baton/scripted, params: {{latency_ms: "
        f"{LATENCY_MS}, replies: [{{content: part done}}]}}}}}}"
        for i in range(width)
    ]
    return "\n".join(lines)


async def main() -> None:
    start()
    print(
        f"{'sub-agents':>10} {'wall ms':>8} {'ideal ms':>9} {'wall/ideal':>10} "
        f"{'floor ms':>9} {'wall/floor':>10} {'in-proc ms':>10} {'in-proc/ideal':>13}"
    )
    for width in WIDTHS:
        floor = await floor_seconds(width)
        alone = await in_process_seconds(width)
        baton = engine(fanout_yaml(width))

        async def run(baton=baton, width=width) -> None:  # type: ignore[no-untyped-def]
            result = await baton.run(Submission("fan out"))
            assert result.status == RunStatus.SUCCEEDED, result.error
            assert result.tree is not None and len(result.tree.children) == width

        wall = await median_seconds(run, warmup=2, repeats=7)
        baton.stop()
        print(
            f"{width:>10} {wall * 1000:>8.1f} {IDEAL_S * 1000:>9.0f} {wall / IDEAL_S:>10.3f} "
            f"{floor * 1000:>9.1f} {wall / floor:>10.3f} {alone * 1000:>10.1f} "
            f"{alone / IDEAL_S:>13.3f}",
            flush=True,
        )
    print("target: wall/ideal <= 1.15 at 32 (floor: bare actors making the same litellm calls;")
    print("in-proc: the same model calls alone in one process, what litellm costs by itself)")


if __name__ == "__main__":
    asyncio.run(main())
