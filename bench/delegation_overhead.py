"""Delegation overhead: ms per delegation for chains of depth 1, 4 and 16 with an instant model,
in two placements, each against its own floor measured in the same run:

- one host (agents without `ray:` options, the default): the floor is one bare async Ray actor
  running the whole chain in its process, each level making the same two `litellm.acompletion`
  calls to the same built-in model (one before and one after its delegation, as an agent does);
- own actors (`ray: {isolate: true}`): the floor is bare async Ray actors, each awaiting the
  next, each making the same two calls.

Each chain runs twice, with tracing on (the default: every span collected, shipped and returned)
and with `tracing: {enabled: false}`; the last column is their ratio (target: at most 1.10).

Run: .venv/bin/python bench/delegation_overhead.py
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ray

from agents.core.messages import RunStatus
from bench._common import PlainModel, engine, interleaved_medians, start
from orchestrator.engine import Engine, Submission

DEPTHS = tuple(int(d) for d in sys.argv[1:]) or (1, 4, 16)
REPEATS = 60

_REPLY = [{"content": "done"}]


@ray.remote
class BareAgent:
    """The floor: model call, await the next actor, model call. Nothing else."""

    def __init__(self, next_actor: object | None) -> None:
        self._next = next_actor
        self._model = PlainModel({"replies": _REPLY})

    async def call(self, task: str) -> str:
        messages = [{"role": "user", "content": task}]
        await self._model.complete(messages)
        if self._next is None:
            return "done"
        answer = await self._next.call.remote(task)  # type: ignore[attr-defined]
        await self._model.complete(messages)
        return answer


@ray.remote
class BareChain:
    """The one-host floor: the same chain as plain awaits inside one actor."""

    def __init__(self) -> None:
        self._model = PlainModel({"replies": _REPLY})

    async def call(self, task: str, depth: int) -> str:
        messages = [{"role": "user", "content": task}]
        await self._model.complete(messages)
        if depth == 1:
            return "done"
        answer = await self.call(task, depth - 1)
        await self._model.complete(messages)
        return answer


def chain_yaml(depth: int, tracing: bool = True, isolate: bool = False) -> str:
    ray_options = ", ray: {isolate: true}" if isolate else ""
    lines = [
        f"name: chain{depth}{'' if tracing else 'dark'}{'apart' if isolate else ''}",
        f"limits: {{max_depth: {depth}, max_steps: 4}}",
        f"tracing: {{enabled: {str(tracing).lower()}}}",
        "agents:",
    ]
    for i in range(1, depth + 1):
        if i < depth:
            replies = (
                f"[{{tool_calls: [{{name: delegate_to_a{i + 1}, arguments: {{task: go}}}}]}}, "
                "{content: done}]"
            )
            lines.append(
                f"  - {{name: a{i}, delegates: [a{i + 1}], model: {{name: baton/scripted, "
                f"params: {{replies: {replies}}}}}{ray_options}}}"
            )
        else:
            lines.append(
                f"  - {{name: a{i}, model: {{name: baton/scripted, "
                f"params: {{replies: [{{content: done}}]}}}}{ray_options}}}"
            )
    return "\n".join(lines)


def baton_run(baton: Engine, tracing: bool) -> Callable[[], Awaitable[object]]:
    async def run() -> None:
        result = await baton.run(Submission("go"))
        assert result.status == RunStatus.SUCCEEDED, result.error
        assert bool(result.spans) == tracing

    return run


async def bench_depth(depth: int, isolate: bool) -> tuple[float, float, float]:
    """Median seconds per run of the floor, traced and untraced chains, measured in turns so
    that drift on the machine affects all three alike."""
    actors: list[object] = []
    if isolate:
        nxt = None
        for _ in range(depth):
            nxt = BareAgent.remote(nxt)  # type: ignore[attr-defined]
            actors.append(nxt)
        head = actors[-1]

        def floor_run() -> Awaitable[object]:
            return head.call.remote("go")  # type: ignore[attr-defined,no-any-return]
    else:
        chain = BareChain.remote()  # type: ignore[attr-defined]
        actors.append(chain)

        def floor_run() -> Awaitable[object]:
            return chain.call.remote("go", depth)  # type: ignore[no-any-return]

    traced = engine(chain_yaml(depth, True, isolate))
    dark = engine(chain_yaml(depth, False, isolate))
    contenders = [floor_run, baton_run(traced, True), baton_run(dark, False)]
    floor, with_spans, without = await interleaved_medians(contenders, warmup=5, repeats=REPEATS)
    traced.stop()
    dark.stop()
    for actor in actors:
        ray.kill(actor)
    return floor, with_spans, without


async def main() -> None:
    start()
    print(
        f"{'depth':>5} {'placement':>10} {'floor ms/deleg':>15} {'traced ms/deleg':>16} "
        f"{'vs floor':>9} {'untraced ms/deleg':>18} {'traced/untraced':>16}"
    )
    for depth in DEPTHS:
        for isolate in (False, True):
            floor, traced, dark = await bench_depth(depth, isolate)
            print(
                f"{depth:>5} {'own actors' if isolate else 'one host':>10} "
                f"{floor * 1000 / depth:>15.2f} {traced * 1000 / depth:>16.2f} "
                f"{traced / floor:>9.2f} {dark * 1000 / depth:>18.2f} {traced / dark:>16.2f}",
                flush=True,
            )
    print("targets: traced vs floor <= 1.3 (either placement); traced/untraced <= 1.10")


if __name__ == "__main__":
    asyncio.run(main())
