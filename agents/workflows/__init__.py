r"""Workflows: agents whose work is code (or a declared shape), calling other agents as steps.

    async def plan_and_write(flow: Workflow) -> str:
        plan = await flow.call("planner", flow.task)
        found = await asyncio.gather(*(flow.call("searcher", q) for q in plan.data["queries"]))
        return (await flow.call("writer", "\\n\\n".join(f.text for f in found))).text

named in the team's YAML as an agent's `workflow: package.module:plan_and_write`, or declared
there as a shape (`sequence`, `parallel`, `loop`, `route`). See `docs/workflows.md`.
"""

from agents.workflows.context import Answer, CallFailed, NotDeterministic, Workflow, WorkflowError
from agents.workflows.run import WorkflowRun, load_workflow

__all__ = [
    "Answer",
    "CallFailed",
    "NotDeterministic",
    "Workflow",
    "WorkflowError",
    "WorkflowRun",
    "load_workflow",
]
