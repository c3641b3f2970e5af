"""A workflow agent's work: its code (or its declared shape) run for one invocation.

No model call of its own: the code decides what runs next, through a `Workflow` context. What
it returns is the invocation's answer (text as is; anything else as JSON); an exception ends
the invocation failed, with the exception's message.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from agents.core.imports import import_object
from agents.core.messages import AgentResult, RunStatus
from agents.core.spec import AgentSpec
from agents.core.workflow_spec import Step
from agents.runtime.invocation import Invocation
from agents.runtime.people import People
from agents.runtime.reporting import Reporter
from agents.runtime.tool_runner import ToolRunner
from agents.tools.delegate import DelegateTool
from agents.workflows.context import Answer, NotDeterministic, Workflow
from agents.workflows.shapes import Shapes

__all__ = ["WorkflowFunction", "WorkflowRun", "load_workflow"]

WorkflowFunction = Callable[[Workflow], Awaitable[Any]]


def load_workflow(path: str) -> WorkflowFunction:
    """The async function `package.module:function` names (ValueError saying why not)."""
    found = import_object(path)  # (an ImportProblem is a ValueError)
    if not inspect.iscoroutinefunction(found):
        raise ValueError(
            f"{path} is not an async function: a workflow is `async def f(flow: Workflow)`"
        )
    return found  # type: ignore[no-any-return]


@dataclass
class WorkflowRun:
    """Runs a workflow agent's invocations (see the module).

    Args:
        spec: the agent; its `workflow` is an import path or a shape.
        runner: how its calls are made (the agent's delegation and own tools).
        people: who answers its questions (`Workflow.ask`).
        reporter: where its events go, and how an invocation ends.
        callees: the delegation tool of each agent it may call, by the agent's name.
    """

    spec: AgentSpec
    runner: ToolRunner
    people: People
    reporter: Reporter
    callees: Mapping[str, DelegateTool]

    def __post_init__(self) -> None:
        workflow = self.spec.workflow
        assert workflow is not None
        self._code: WorkflowFunction = (
            load_workflow(workflow) if isinstance(workflow, str) else _shaped(workflow)
        )

    async def run(self, inv: Invocation) -> AgentResult:
        """Run the code once for the invocation; its return value is the answer."""
        flow = Workflow(inv, self.runner, self.people, self.reporter, self.callees)
        end = self.reporter.end
        answer: Any = None
        failure: str | None = None
        try:
            answer = await self._code(flow)
        except NotDeterministic as exc:
            failure = str(exc)
        except Exception as exc:  # the workflow's own failure: the run says which and why
            failure = f"{type(exc).__name__}: {exc}"
        stopped = next((c for c in inv.children if c.stops_run), None)
        if stopped is not None:  # a hook ended the whole run under it: so do its callers
            result = end(inv, stopped.status, error=stopped.error)
            result.stops_run = True
            return result
        if failure is not None:
            return end(inv, RunStatus.FAILED, error=failure)
        return end(inv, RunStatus.SUCCEEDED, output=_text(answer))


def _shaped(step: Step) -> WorkflowFunction:
    async def shaped(flow: Workflow) -> Any:
        return await Shapes(flow).run(step)

    return shaped


def _text(answer: Any) -> str:
    """A workflow's return value as its answer's text."""
    if answer is None:
        return ""
    if isinstance(answer, str):
        return answer
    if isinstance(answer, Answer):
        return answer.text
    if isinstance(answer, BaseModel):
        return answer.model_dump_json()
    return json.dumps(answer, ensure_ascii=False, default=str)
