"""The declared shapes (`agents.core.workflow_spec`) run on a `Workflow`: the same calls as code.

A step's outcome is an `Answer` (a call, a sequence's last step, a loop's last iteration, a
route's case) or a list of them (a parallel step); the next step is given it as `{previous}`,
and `as:` keeps it under a name. Places in templates read them: `{slot}` is the text, and
`{slot.field}` a field of its JSON; a string that is one place only, in `input` or `over`, is
the value itself (a list stays a list).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.core.imports import import_object
from agents.core.workflow_spec import (
    CallStep,
    LoopStep,
    MapSpec,
    ParallelStep,
    RouteStep,
    SequenceStep,
    Step,
    Until,
    places,
)
from agents.workflows.context import Answer, Workflow, WorkflowError
from tracing import attributes as attr

__all__ = ["Shapes"]

Outcome = Answer | list[Any] | None
Marks = Mapping[str, str | int]


@dataclass
class Shapes:
    """Runs a shape's steps on `flow`, keeping the named answers (`as:`) as it goes."""

    flow: Workflow
    slots: dict[str, Any] = field(default_factory=dict)

    async def run(self, step: Step) -> Outcome:
        """The workflow's answer: what its (outermost) step gave."""
        return await self._step(step, None, {}, {})

    async def _step(
        self, step: Step, previous: Outcome, scope: dict[str, Any], marks: Marks
    ) -> Outcome:
        if isinstance(step, CallStep):
            outcome: Outcome = await self._call(step, previous, scope, marks)
        elif isinstance(step, SequenceStep):
            outcome = previous
            for inner in step.sequence:
                outcome = await self._step(inner, outcome, scope, marks)
        elif isinstance(step, ParallelStep):
            outcome = await self._parallel(step, previous, scope, marks)
        elif isinstance(step, LoopStep):
            outcome = await self._loop(step, previous, scope, marks)
        else:
            outcome = await self._route(step, previous, scope, marks)
        if step.keep_as is not None:
            self.slots[step.keep_as] = outcome
        return outcome

    async def _call(
        self, step: CallStep, previous: Outcome, scope: dict[str, Any], marks: Marks
    ) -> Answer:
        known = self._known(previous, scope)
        if step.task is not None:
            task = _render(step.task, known)
        else:  # the previous answer, or the workflow's own task for the first step
            task = _text(previous) if previous is not None else self.flow.task
        given = _values(step.input, known) if step.input is not None else None
        return await self.flow.call(step.agent, task, input=given, marks=marks)

    async def _parallel(
        self, step: ParallelStep, previous: Outcome, scope: dict[str, Any], marks: Marks
    ) -> list[Any]:
        marked = {**marks, attr.BATON_WORKFLOW_SHAPE: "parallel"}
        if isinstance(step.parallel, MapSpec):
            return await self._map(step.parallel, previous, scope, marked)
        branches = (self._step(s, previous, scope, marked) for s in step.parallel)
        return list(await asyncio.gather(*branches))

    async def _map(
        self, spec: MapSpec, previous: Outcome, scope: dict[str, Any], marks: Marks
    ) -> list[Any]:
        items = _value(spec.over.strip("{}"), self._known(previous, scope))
        if not isinstance(items, list):
            raise WorkflowError(f"parallel over {spec.over}: not a list ({_kind(items)})")
        room = asyncio.Semaphore(spec.max_concurrency or max(len(items), 1))
        each = CallStep(agent=spec.agent, task=spec.task, input=spec.input)

        async def one(index: int, item: Any) -> Answer:
            async with room:
                return await self._call(
                    each, previous, {**scope, "item": item, "index": index}, marks
                )

        return list(await asyncio.gather(*(one(i, item) for i, item in enumerate(items))))

    async def _loop(
        self, step: LoopStep, previous: Outcome, scope: dict[str, Any], marks: Marks
    ) -> Outcome:
        spec, outcome = step.loop, previous
        for iteration in range(1, spec.max_iterations + 1):
            marked = {**marks, attr.BATON_WORKFLOW_SHAPE: "loop",
                      attr.BATON_WORKFLOW_ITERATION: iteration}  # fmt: skip
            for inner in spec.steps:
                outcome = await self._step(inner, outcome, scope, marked)
            if spec.until is not None and _done(spec.until, outcome):
                break
        return outcome

    async def _route(
        self, step: RouteStep, previous: Outcome, scope: dict[str, Any], marks: Marks
    ) -> Outcome:
        spec = step.route
        if spec.by is not None:
            chosen = _value(spec.by.strip("{}"), self._known(previous, scope))
            basis = spec.by
        else:
            assert spec.check is not None
            chosen = import_object(spec.check)(previous)
            basis = spec.check
        name = chosen if isinstance(chosen, str) else json.dumps(chosen)
        case = spec.cases.get(name, spec.default)
        if case is None:
            raise WorkflowError(
                f"route on {basis}: no case for {name!r} (cases: {', '.join(spec.cases)}) and "
                "no default"
            )
        said = name if name in spec.cases else f"{name} (default)"
        marked = {**marks, attr.BATON_WORKFLOW_SHAPE: "route",
                  attr.BATON_WORKFLOW_ROUTE: f"{said} by {basis}"}  # fmt: skip
        return await self._step(case, previous, scope, marked)

    def _known(self, previous: Outcome, scope: dict[str, Any]) -> dict[str, Any]:
        return {
            "task": self.flow.task,
            "input": self.flow.input,
            # (Before the first step: what the workflow was asked.)
            "previous": previous if previous is not None else self.flow.task,
            **self.slots,
            **scope,
        }


def _done(until: Until, outcome: Outcome) -> bool:
    if until.check is not None:
        return bool(import_object(until.check)(outcome))
    assert until.field is not None
    try:
        return bool(_into(_data(outcome), until.field.split(".")) == until.equals)
    except (KeyError, IndexError, TypeError, ValueError):
        return False  # (not said yet: go on)


def _value(place: str, known: dict[str, Any]) -> Any:
    """The value at `slot.field...`: an answer's JSON (or its text), a field of it."""
    name, *path = place.split(".")
    if name not in known:
        raise WorkflowError(f"{{{place}}}: no step kept an answer as {name!r}")
    found = known[name]
    if not path:
        return _data(found)
    try:
        return _into(_data(found), path)
    except (KeyError, IndexError, TypeError, ValueError):
        raise WorkflowError(f"{{{place}}}: {name} has no {'.'.join(path)}") from None


def _into(value: Any, path: list[str]) -> Any:
    for part in path:
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def _data(found: Any) -> Any:
    """An outcome as a value: an answer's JSON (else its text); a list of such."""
    if isinstance(found, Answer):
        data = found.data
        return found.text if data is None else data
    if isinstance(found, list):
        return [_data(f) for f in found]
    return found


def _text(found: Any) -> str:
    """An outcome as text: an answer's text; a list's joined; a value's JSON."""
    if isinstance(found, Answer):
        return found.text
    if isinstance(found, list):
        return "\n\n".join(_text(f) for f in found)
    if isinstance(found, str):
        return found
    return json.dumps(found, ensure_ascii=False)


def _render(template: str, known: dict[str, Any]) -> str:
    """The template with each place's text in it."""
    text = template
    for place in dict.fromkeys(places(template)):
        text = text.replace(f"{{{place}}}", _text(_value(place, known)))
    return text


def _values(given: Any, known: dict[str, Any]) -> Any:
    """Structured input with its places filled: a string that is one place is its value."""
    if isinstance(given, str):
        found = places(given)
        if len(found) == 1 and given == f"{{{found[0]}}}":
            return _value(found[0], known)
        return _render(given, known)
    if isinstance(given, dict):
        return {k: _values(v, known) for k, v in given.items()}
    if isinstance(given, list):
        return [_values(v, known) for v in given]
    return given


def _kind(value: Any) -> str:
    return type(value).__name__
