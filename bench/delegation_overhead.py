"""Delegation overhead: ms per delegation for chains of depth 1, 4 and 16 with an instant model,
against a floor measured in the same run: bare async Ray actors, each awaiting the next, each
making the same two `litellm.acompletion` calls to the same built-in model (one before and one
after its delegation, as an agent does).

Run: .venv/bin/python bench/delegation_overhead.py
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ray

from agents.messages import Outcome
from agents.model import LiteLLMClient
from agents.spec import ModelSpec
from bench._common import engine, median_seconds, start

DEPTHS = tuple(int(d) for d in sys.argv[1:]) or (1, 4, 16)
REPEATS = 30

_REPLY = [{"content": "done"}]


@ray.remote
class BareAgent:
    """The floor: model call, await the next actor, model call. Nothing else."""

    def __init__(self, next_actor: object | None) -> None:
        self._next = next_actor
        self._model = LiteLLMClient(ModelSpec(name="baton/scripted", params={"replies": _REPLY}))

    async def call(self, task: str) -> str:
        messages = [{"role": "user", "content": task}]
        await self._model.complete(messages, [])
        if self._next is None:
            return "done"
        answer = await self._next.call.remote(task)  # type: ignore[attr-defined]
        await self._model.complete(messages, [])
        return answer


def chain_yaml(depth: int) -> str:
    lines = [f"name: chain{depth}", f"limits: {{max_depth: {depth}, max_steps: 4}}", "agents:"]
    for i in range(1, depth + 1):
        if i < depth:
            replies = (
                f"[{{tool_calls: [{{name: delegate_to_a{i + 1}, arguments: {{task: go}}}}]}}, "
                "{content: done}]"
            )
            lines.append(
                f"  - {{name: a{i}, delegates: [a{i + 1}], model: {{name: baton/scripted, "
                f"params: {{replies: {replies}}}}}}}"
            )
        else:
            lines.append(
                f"  - {{name: a{i}, model: {{name: baton/scripted, "
                "params: {replies: [{content: done}]}}}"
            )
    return "\n".join(lines)


async def bench_depth(depth: int) -> tuple[float, float]:
    actors: list[object] = []
    nxt = None
    for _ in range(depth):
        nxt = BareAgent.remote(nxt)  # type: ignore[attr-defined]
        actors.append(nxt)
    head = actors[-1]
    floor = await median_seconds(lambda: head.call.remote("go"), warmup=5, repeats=REPEATS)

    baton = engine(chain_yaml(depth))

    async def run() -> None:
        result = await baton.run("go")
        assert result.status == Outcome.SUCCEEDED, result.error

    measured = await median_seconds(run, warmup=5, repeats=REPEATS)
    baton.stop()
    for actor in actors:
        ray.kill(actor)
    return floor, measured


async def main() -> None:
    start()
    print(f"{'depth':>5} {'floor ms/deleg':>15} {'baton ms/deleg':>15} {'ratio':>6}")
    for depth in DEPTHS:
        floor, measured = await bench_depth(depth)
        print(
            f"{depth:>5} {floor * 1000 / depth:>15.2f} {measured * 1000 / depth:>15.2f} "
            f"{measured / floor:>6.2f}",
            flush=True,
        )
    print("target: ratio <= 1.5")


if __name__ == "__main__":
    asyncio.run(main())
