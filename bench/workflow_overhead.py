"""Workflow overhead: ms per call of a workflow (16 calls in a row, and a map of 32 at once),
against the same work delegated by a model, and against the floor of the same work, measured in
the same run.

Each call asks a worker agent whose built-in model answers at once (one model call). Three ways
to do the same calls, in one host:

- floor: one bare async Ray actor making the workers' model calls (16 awaited in turn, or 32
  gathered), with the same `litellm.acompletion` of the same built-in model;
- workflow: a `workflow:` agent whose code calls the worker (`Workflow.call`);
- delegation: a scripted model that delegates to the worker (16 steps of one call each, or one
  step of 32 calls), which costs the manager's own model calls too.

Targets: a workflow call within 1.3x its floor, no dearer than a delegation; the workflow makes
no model call of its own.

Run: .venv/bin/python bench/workflow_overhead.py
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ray

from agents.core.messages import RunStatus
from agents.workflows import Workflow
from bench._common import PlainModel, engine, interleaved_medians, start
from orchestrator.engine import Engine, Submission

REPEATS = 40
IN_A_ROW, AT_ONCE = 16, 32
_REPLY = [{"content": "done"}]


async def in_a_row(flow: Workflow) -> str:
    """16 calls, each after the one before."""
    for n in range(IN_A_ROW):
        await flow.call("worker", f"step {n}")
    return "done"


async def at_once(flow: Workflow) -> str:
    """A map of 32 calls at once."""
    await asyncio.gather(*(flow.call("worker", f"item {n}") for n in range(AT_ONCE)))
    return "done"


@ray.remote
class BareManager:
    """The floor: the workers' model calls, made by one actor."""

    def __init__(self) -> None:
        self._model = PlainModel({"replies": _REPLY})

    async def call(self, parallel: bool) -> str:
        async def one(n: int) -> object:
            return await self._model.complete([{"role": "user", "content": f"call {n}"}])

        if parallel:
            await asyncio.gather(*(one(n) for n in range(AT_ONCE)))
        else:
            for n in range(IN_A_ROW):
                await one(n)
        return "done"


WORKER = "  - {name: worker, model: {name: baton/scripted, params: {replies: [{content: done}]}}}"


def workflow_yaml(parallel: bool) -> str:
    flow = "at_once" if parallel else "in_a_row"
    return "\n".join(
        [
            f"name: wf{flow.replace('_', '')}",
            "limits: {max_steps: 40}",
            "agents:",
            f"  - {{name: manager, workflow: 'bench.workflow_overhead:{flow}', "
            "delegates: [worker]}",
            WORKER,
        ]
    )


def delegation_yaml(parallel: bool) -> str:
    call = "{name: delegate_to_worker, arguments: {task: go}}"
    if parallel:
        replies = f"[{{tool_calls: [{', '.join([call] * AT_ONCE)}]}}, {{content: done}}]"
    else:
        replies = "[" + ", ".join([f"{{tool_calls: [{call}]}}"] * IN_A_ROW) + ", {content: done}]"
    return "\n".join(
        [
            f"name: dl{'par' if parallel else 'row'}",
            # (its one turn hands work to the worker in every step: no visit limit short of it)
            "limits: {max_steps: 40, max_visits: 40, max_parallel_tools: 64}",
            "agents:",
            "  - {name: manager, delegates: [worker], model: {name: baton/scripted, "
            f"params: {{replies: {replies}}}}}}}",
            WORKER,
        ]
    )


def baton_run(baton: Engine, calls: int, workflow: bool) -> Callable[[], Awaitable[object]]:
    async def run() -> None:
        result = await baton.run(Submission("go"))
        assert result.status == RunStatus.SUCCEEDED, result.error
        assert result.tree is not None and len(result.tree.children) == calls
        if workflow:  # the workflow's own model calls: none
            assert result.tree.usage.model_calls == 0, result.tree.usage

    return run


async def bench(parallel: bool) -> tuple[float, float, float]:
    calls = AT_ONCE if parallel else IN_A_ROW
    floor_actor = BareManager.remote()  # type: ignore[attr-defined]

    def floor_run() -> Awaitable[object]:
        return floor_actor.call.remote(parallel)  # type: ignore[no-any-return]

    flow, delegated = engine(workflow_yaml(parallel)), engine(delegation_yaml(parallel))
    contenders = [floor_run, baton_run(flow, calls, True), baton_run(delegated, calls, False)]
    medians = await interleaved_medians(contenders, warmup=5, repeats=REPEATS)
    flow.stop()
    delegated.stop()
    ray.kill(floor_actor)
    floor, workflow, delegation = (m * 1000 / calls for m in medians)
    return floor, workflow, delegation


async def main() -> None:
    start()
    print(
        f"{'shape':>14} {'floor ms/call':>14} {'workflow ms/call':>17} {'vs floor':>9} "
        f"{'delegation ms/call':>19} {'workflow/delegation':>20}"
    )
    for parallel in (False, True):
        floor, workflow, delegation = await bench(parallel)
        shape = f"{AT_ONCE} at once" if parallel else f"{IN_A_ROW} in a row"
        print(
            f"{shape:>14} {floor:>14.2f} {workflow:>17.2f} {workflow / floor:>9.2f} "
            f"{delegation:>19.2f} {workflow / delegation:>20.2f}",
            flush=True,
        )
    print("targets: workflow vs floor <= 1.3; workflow/delegation <= 1.0; workflow model calls: 0")


if __name__ == "__main__":
    asyncio.run(main())
