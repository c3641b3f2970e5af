"""The common shapes of a workflow, declared in a team's YAML: no Python needed.

A step is one of:

- a call: `{agent: NAME, task: "...", input: {...}, as: SLOT}` (or the agent's name alone);
- `sequence: [STEP, ...]`: in order, each one given the previous one's answer;
- `parallel: [STEP, ...]`: at once, their answers joined; or `parallel: {over: "{slot.list}",
  agent: NAME, task: "... {item} ..."}`: one call per item of a list (a map);
- `loop: {steps: [STEP, ...], until: {field: done, equals: true}, max_iterations: N}`: the steps
  again until the last answer says done (or a check function does), at most N times;
- `route: {by: "{slot.field}", cases: {VALUE: STEP}, default: STEP}`: the step the value names.

Any step may keep its answer under `as:` for the later ones: `"{slot}"` in a task is that
answer's text, `"{slot.field}"` a field of its JSON. `{task}` and `{input}` are the workflow's
own; `{previous}` the last answer. They run on the same mechanism as Python workflows
(`agents.workflows`): each call a delegation, durable, traced, drawn.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "CallStep",
    "LoopSpec",
    "LoopStep",
    "MapSpec",
    "ParallelStep",
    "RouteSpec",
    "RouteStep",
    "SequenceStep",
    "Step",
    "Until",
    "parse_step",
    "places",
    "step_agents",
    "step_checks",
]

# `{slot}` or `{slot.field.0}` in a template.
_PLACE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}")
_SLOT = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
_RESERVED_SLOTS = frozenset({"task", "input", "previous", "item", "index"})


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    keep_as: str | None = Field(
        default=None,
        alias="as",
        pattern=_SLOT,
        description="Keep the step's answer under this name for the steps after it.",
    )

    @field_validator("keep_as")
    @classmethod
    def _free(cls, value: str | None) -> str | None:
        if value in _RESERVED_SLOTS:
            raise ValueError(f"{value!r} is the workflow's own: name the slot otherwise")
        return value


class CallStep(_Shape):
    """Call an agent (a delegation), with a task and structured input made from templates."""

    agent: str = Field(min_length=1)
    task: str | None = Field(
        default=None,
        description="What the agent is asked; `{slot}` places. Default: the previous answer (the "
        "workflow's task for the first step).",
    )
    input: Any = Field(
        default=None,
        description="Structured input: JSON whose strings may be `{slot.field}` places (a "
        "string that is only a place takes the value as it is: a list stays a list).",
    )


class Until(BaseModel):
    """When a loop ends: a field of the last answer's JSON has a value, or a check says so."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    field: str | None = Field(
        default=None, description="A field of the last answer's JSON (`verdict`, `review.ok`)."
    )
    equals: Any = Field(default=True, description="The value that ends the loop.")
    check: str | None = Field(
        default=None,
        description="Or a function `package.module:done(answer) -> bool`, given the last answer.",
    )

    @model_validator(mode="after")
    def _one(self) -> Until:
        if (self.field is None) == (self.check is None):
            raise ValueError("until: give field (with equals) or check, one of them")
        return self


class LoopSpec(BaseModel):
    """The body of a loop and when it stops."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    steps: tuple[Step, ...] = Field(min_length=1)
    until: Until | None = None
    max_iterations: int = Field(ge=1, le=100)

    @field_validator("steps", mode="before")
    @classmethod
    def _steps(cls, value: Any) -> Any:
        return _steps(value)


class MapSpec(BaseModel):
    """One call of `agent` per item of a list (`{item}` and `{index}` in its task and input)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    over: str = Field(description="A place naming a list: `{plan.queries}`.")
    agent: str = Field(min_length=1)
    task: str = "{item}"
    input: Any = None
    max_concurrency: int | None = Field(
        default=None, ge=1, description="At most this many at once (default: all)."
    )

    @field_validator("over")
    @classmethod
    def _place(cls, value: str) -> str:
        if not _PLACE.fullmatch(value):
            raise ValueError(f"over: {value!r} is not a place such as '{{plan.queries}}'")
        return value


class RouteSpec(BaseModel):
    """The step a value chooses: a field of an answer, or what a function says."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    by: str | None = Field(
        default=None, description="A place whose value names the case: `{ticket.category}`."
    )
    check: str | None = Field(
        default=None,
        description="Or a function `package.module:choose(answer) -> str`, given the previous "
        "answer.",
    )
    cases: dict[str, Step] = Field(min_length=1)
    default: Step | None = Field(
        default=None, description="The step when no case matches (else the workflow fails)."
    )

    @field_validator("cases", mode="before")
    @classmethod
    def _cases(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): parse_step(v) for k, v in value.items()}
        return value

    @field_validator("default", mode="before")
    @classmethod
    def _default(cls, value: Any) -> Any:
        return None if value is None else parse_step(value)

    @model_validator(mode="after")
    def _one(self) -> RouteSpec:
        if (self.by is None) == (self.check is None):
            raise ValueError("route: give by (a place) or check (a function), one of them")
        return self


class SequenceStep(_Shape):
    """Steps in order, each given the answer before it."""

    sequence: tuple[Step, ...] = Field(min_length=1)

    @field_validator("sequence", mode="before")
    @classmethod
    def _steps(cls, value: Any) -> Any:
        return _steps(value)


class ParallelStep(_Shape):
    """Steps at once (their answers joined, or a list under `as`), or a map over a list."""

    parallel: tuple[Step, ...] | MapSpec

    @field_validator("parallel", mode="before")
    @classmethod
    def _branches(cls, value: Any) -> Any:
        return _steps(value) if isinstance(value, list | tuple) else value


class LoopStep(_Shape):
    """A body again and again until it is done (or `max_iterations`)."""

    loop: LoopSpec


class RouteStep(_Shape):
    """One of several steps, chosen by a value."""

    route: RouteSpec


Step = CallStep | SequenceStep | ParallelStep | LoopStep | RouteStep

_KINDS: dict[str, type[BaseModel]] = {
    "agent": CallStep,
    "sequence": SequenceStep,
    "parallel": ParallelStep,
    "loop": LoopStep,
    "route": RouteStep,
}


def parse_step(value: Any) -> Any:
    """A step from its YAML: an agent's name, or a mapping with one of the kinds' keys."""
    if isinstance(value, BaseModel):
        return value
    if isinstance(value, str):
        return CallStep(agent=value)
    if isinstance(value, dict):
        kinds = [k for k in _KINDS if k in value]
        if len(kinds) == 1:
            return _KINDS[kinds[0]].model_validate(value)
        if len(kinds) > 1:
            raise ValueError(f"a step is one kind: it has {', '.join(kinds)}")
    raise ValueError(
        "a step is an agent's name, or a mapping with one of: agent, sequence, parallel, loop, "
        "route"
    )


def _steps(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(parse_step(v) for v in value)
    return value


def step_agents(step: Step) -> list[str]:
    """Every agent a step may call, in the order they appear."""
    if isinstance(step, CallStep):
        return [step.agent]
    if isinstance(step, SequenceStep):
        return [a for s in step.sequence for a in step_agents(s)]
    if isinstance(step, ParallelStep):
        if isinstance(step.parallel, MapSpec):
            return [step.parallel.agent]
        return [a for s in step.parallel for a in step_agents(s)]
    if isinstance(step, LoopStep):
        return [a for s in step.loop.steps for a in step_agents(s)]
    routes = [*step.route.cases.values(), *([step.route.default] if step.route.default else [])]
    return [a for s in routes for a in step_agents(s)]


def step_checks(step: Step) -> list[str]:
    """The functions a step names (`until.check`, `route.check`), by import path."""
    if isinstance(step, SequenceStep):
        return [c for s in step.sequence for c in step_checks(s)]
    if isinstance(step, ParallelStep) and not isinstance(step.parallel, MapSpec):
        return [c for s in step.parallel for c in step_checks(s)]
    if isinstance(step, LoopStep):
        own = [step.loop.until.check] if step.loop.until and step.loop.until.check else []
        return own + [c for s in step.loop.steps for c in step_checks(s)]
    if isinstance(step, RouteStep):
        route = step.route
        inner = [*route.cases.values(), *([route.default] if route.default else [])]
        return ([route.check] if route.check else []) + [c for s in inner for c in step_checks(s)]
    return []


def places(template: str) -> list[str]:
    """The places (`slot.field`) a template names."""
    return _PLACE.findall(template)


for _model in (LoopSpec, RouteSpec, SequenceStep, ParallelStep, LoopStep, RouteStep):
    _model.model_rebuild()
