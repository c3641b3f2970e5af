"""What a workflow's code is given: `Workflow`, through which it calls agents, tools and people.

Each call is a step of the workflow's invocation, made as a model's tool call would be (the
same `ToolRunner`): a delegation behind the guard (depth, cycle, budget, deadline), in a span,
with its events, its approval if the callee needs one, cancelled with the run. Calls are
numbered in the order the code makes them; the step log keeps what was called at each place,
so that a resumed run, which runs the code again from the top, is checked to make the same
calls (and the agents it calls take their finished work from their own records).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.core.messages import AgentResult
from agents.core.state import State
from agents.core.steps import call_key, step_number
from agents.models.base import ToolCall
from agents.runtime.invocation import Invocation
from agents.runtime.people import People
from agents.runtime.reporting import Reporter
from agents.runtime.tool_runner import ToolRunner
from agents.tools.base import ToolOutput
from agents.tools.delegate import DelegateTool, input_problems
from tracing import attributes as attr

__all__ = ["Answer", "CallFailed", "NotDeterministic", "Workflow", "WorkflowError"]


class WorkflowError(Exception):
    """The workflow asked for something it may not have (an agent it does not call, ...)."""


class CallFailed(WorkflowError):
    """A call did not succeed: the agent failed, was refused by the guard, or the tool erred.

    Attributes:
        name: the agent (or tool) called.
        status: how the call ended (`failed`, `refused`, `limit_exceeded`, ...).
        reason: why, in words.
    """

    def __init__(self, name: str, status: str, reason: str) -> None:
        self.name, self.status, self.reason = name, status, reason
        super().__init__(f"the call to {name} ended {status}: {reason}")


class NotDeterministic(WorkflowError):
    """A resumed workflow made another call at a place than its recorded run did."""


@dataclass(frozen=True)
class Answer:
    """An agent's answer to a call: its text, and its JSON (`data`) when the text is JSON."""

    agent: str
    text: str
    result: AgentResult | None = field(default=None, repr=False, compare=False)

    @property
    def data(self) -> Any:
        """The answer as JSON (a structured output's object), or None when it is not JSON."""
        try:
            return json.loads(self.text)
        except (json.JSONDecodeError, TypeError):
            return None

    def __str__(self) -> str:
        return self.text


@dataclass
class Workflow:
    """What a workflow's code works with, for one invocation (see the module).

    Attributes:
        task: what the workflow was asked.
        input: its structured input (checked against its `input_schema`), or None.
    """

    inv: Invocation
    runner: ToolRunner
    people: People
    reporter: Reporter
    callees: Mapping[str, DelegateTool]
    _places: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def task(self) -> str:
        """What the workflow was asked."""
        return self.inv.delegation.task

    @property
    def input(self) -> Any:
        """Its structured input, or None."""
        return self.inv.delegation.input

    @property
    def run_id(self) -> str:
        """The run it works for."""
        return self.inv.ctx.run_id

    @property
    def state(self) -> State:
        """The run's shared state as the workflow has it now: read it, and write it (`set`).

        Its calls' writes are in it once each call returns. Its own writes are not in the
        step log: a resumed workflow runs its code again and makes them again.
        """
        return self.reporter.live_state(self.inv)

    async def call(
        self,
        agent: str,
        task: str | None = None,
        *,
        input: Any = None,
        save_as: str | None = None,
        marks: Mapping[str, str | int] | None = None,
    ) -> Answer:
        """Call `agent` with `task` (and structured `input`) and return its answer.

        `save_as`: also write the answer to the run's shared state at this key (its data when
        it is JSON, else its text), as ADK's `output_key`.

        Without a task, the agent is asked to work on its input. Raises `CallFailed` when the
        agent does not succeed (or the guard refuses the call), `WorkflowError` for an agent the
        workflow does not call or input the agent does not take. `marks`: attributes of the
        call's span.
        """
        place = next(self._places)  # (taken before any await: the code's order)
        callee = self.callees.get(agent)
        if callee is None or not callee.allowed:
            raise WorkflowError(
                f"{self.reporter.agent} does not call {agent!r}: list it under its delegates"
            )
        if problems := input_problems(callee.target, input):
            raise WorkflowError(f"invalid input for {agent}: {'; '.join(problems)}")
        text = task if task is not None else ("" if input is None else "Work on the input.")
        if not text.strip():
            raise WorkflowError(f"the call to {agent} has neither a task nor input")
        arguments: dict[str, Any] = {"task": text}
        if input is not None:
            arguments["input"] = input
        out = await self._made(place, "agent", agent, arguments, marks)
        child = out.child
        if out.is_error or child is None:
            status = child.status.value if child is not None else "refused"
            reason = (child.error if child is not None else None) or out.content
            raise CallFailed(agent, status, reason or "no detail")
        answer = Answer(agent, child.output or "", child)
        if save_as is not None:
            data = answer.data
            self.state.set(save_as, data if data is not None else answer.text)
        return answer

    async def tool(self, name: str, /, **arguments: Any) -> str:
        """Call one of the workflow agent's own tools; its result's text.

        Raises `CallFailed` when the tool returns an error.
        """
        place = next(self._places)
        if name not in self.runner.tools or name.startswith(attr.DELEGATE_TOOL_PREFIX):
            raise WorkflowError(f"{self.reporter.agent} has no tool {name!r}")
        out = await self._made(place, "tool", name, arguments, None)
        if out.is_error:
            raise CallFailed(name, "failed", out.content)
        return out.content

    async def ask(self, question: str, choices: tuple[str, ...] = ()) -> str:
        """Ask the person who submitted the run (the agent needs `ask_user: true`); the answer.

        The run waits, `input_required`, until it comes. Raises `CallFailed` when none came
        before the deadline.
        """
        place = next(self._places)
        asked = {"question": question, "choices": list(choices)}
        self._check(place, "ask", "ask_user", asked)
        call = ToolCall(id=f"w{place}", name="ask_user", arguments=json.dumps(asked))
        out = await self.people.ask(self.inv, call, asked)
        if out.is_error:
            raise CallFailed("ask_user", "unanswered", out.content)
        return out.content

    async def _made(
        self,
        place: int,
        kind: str,
        name: str,
        arguments: dict[str, Any],
        marks: Mapping[str, str | int] | None,
    ) -> ToolOutput:
        """Make the call at `place` (checked against the record of an earlier life)."""
        self._check(place, kind, name, arguments)
        fork = self.inv.ctx.fork_from
        if fork is not None and fork[0] == self.inv.id and place >= step_number(fork[1]):
            self.inv.recorded.diverged = True  # a fork goes live from its place on
        tool = name if kind == "tool" else self.callees[name].name
        call = ToolCall(id=f"w{place}", name=tool, arguments=json.dumps(arguments))
        marked = {attr.BATON_WORKFLOW_PLACE: f"w{place}", **(marks or {})}
        out = await self.runner.call(self.inv, call, step=place, marks=marked)
        if out.child is not None:
            self.inv.children.append(out.child)
        self.reporter.merge(self.inv, out)
        return out

    def _check(self, place: int, kind: str, name: str, arguments: dict[str, Any]) -> None:
        """Record what is called at `place`; a resumed run must call the same there."""
        recorded = self.inv.recorded.get(call_key(place))
        if recorded is None and not self.reporter.logs_steps(self.inv):
            return  # (no step log: nothing to record, nothing to compare)
        digest = hashlib.sha256(json.dumps(arguments, sort_keys=True).encode()).hexdigest()[:16]
        said = _said(arguments)
        if recorded is None:
            data = {"kind": kind, "name": name, "digest": digest, "said": said}
            self.reporter.record(self.inv, call_key(place), "call", data)
            return
        was = recorded.data
        if (was.get("kind"), was.get("name"), was.get("digest")) != (kind, name, digest):
            raise NotDeterministic(
                f"the workflow is not deterministic: its call {place} is {name} ({said!r}), "
                f"where the recorded run called {was.get('name')} ({was.get('said')!r}); a "
                "workflow must make the same calls, in the same order, each time it runs"
            )


def _said(arguments: dict[str, Any]) -> str:
    """What a call asked, short, for an error that names it."""
    text = arguments.get("task") or arguments.get("question") or json.dumps(arguments)
    text = " ".join(str(text).split())
    return text if len(text) <= 80 else text[:79] + "…"
