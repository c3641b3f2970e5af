"""Hooks and step rules: code (or YAML) that steers an agent's steps from inside its process.

A hook is a `Hooks` subclass named by import path in the agent's `hooks:`; each method may
observe, change the model request, veto a tool call (the model reads the reason) or stop the
invocation. A hook that raises fails the step, visibly. Step rules (`step_rules:`) cover the
common cases without code: on a step, after a tool, or below a budget, use another model, other
tools, a forced tool or an added instruction.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents.core.messages import AgentResult, Usage
from agents.core.state import State
from agents.core.steering_spec import StepRule
from agents.models.base import ModelReply

__all__ = [
    "HookContext",
    "HookFailed",
    "Hooks",
    "ModelRequest",
    "Stop",
    "Stopped",
    "Veto",
    "apply_rules",
    "call_hook",
]


class HookFailed(Exception):
    """A hook raised: the step fails, and says which hook and why."""


class Stopped(Exception):
    """A hook stopped the invocation (`run`: and the whole run)."""

    def __init__(self, message: str, run: bool = False, hook: str | None = None) -> None:
        super().__init__(message)
        self.run = run
        self.hook = hook  # (its class's name)


async def call_hook(hook: Hooks, method: str, *args: Any) -> Any:
    """Call one hook method (sync or async); its exception becomes `HookFailed`."""
    function: Callable[..., Any] = getattr(hook, method)
    try:
        answer = function(*args)
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception as exc:
        name = f"{type(hook).__module__}:{type(hook).__name__}.{method}"
        raise HookFailed(f"hook {name} raised {type(exc).__name__}: {exc}") from exc
    if isinstance(answer, Stop):
        what = "the run" if answer.run else "by hook"
        raise Stopped(
            f"stopped {what} {type(hook).__name__}.{method}: {answer.reason}",
            run=answer.run,
            hook=type(hook).__name__,
        )
    return answer


@dataclass(frozen=True)
class Stop:
    """Ends the invocation (it fails with this reason).

    `run=True`: the whole run, every agent up the chain ending with it.
    """

    reason: str
    run: bool = False


@dataclass(frozen=True)
class Veto:
    """A tool call not made: the model reads the reason as the call's result."""

    reason: str


@dataclass(frozen=True)
class HookContext:
    """Where a hook is called: agent, run, thread, invocation, step, spending, shared state.

    `state` reads the run's shared state; `state.set` writes it, as a tool would. One hook
    object serves every invocation of its agent in its process: `invocation` tells parallel
    ones apart.
    """

    agent: str
    run_id: str
    chain: tuple[str, ...]
    step: int
    usage: Usage
    tools_called: tuple[str, ...] = ()
    thread_id: str | None = None
    invocation: str = ""
    state: State = field(default_factory=lambda: State({}, None, ""))


@dataclass
class ModelRequest:
    """One model call about to be made; hooks and step rules may change any of it.

    `model` is a litellm model name (another one than the agent's gets a client of its own);
    `tools` the offered tools (OpenAI's function shape); `force_tool` a tool the model must
    call; `messages` the conversation (change a copy's items, not the agent's record).
    """

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    force_tool: str | None = None
    params: dict[str, Any] = field(default_factory=dict)  # for another model: its params


class Hooks:
    """Subclass and override what you need; every method is optional and may be async."""

    async def on_start(self, ctx: HookContext, task: str) -> Stop | None:
        """An invocation starts with `task`."""
        return None

    async def before_model(self, ctx: HookContext, request: ModelRequest) -> Stop | None:
        """A model call is about to be made: change `request` in place, or stop."""
        return None

    async def after_model(self, ctx: HookContext, reply: ModelReply) -> Stop | None:
        """The model answered."""
        return None

    async def before_tool(
        self, ctx: HookContext, tool: str, arguments: dict[str, Any]
    ) -> Veto | Stop | None:
        """A tool (or a delegation: `delegate_to_...`) is about to be called."""
        return None

    async def after_tool(self, ctx: HookContext, tool: str, result: str) -> str | None:
        """A tool call returned `result`: return another text to give the model instead."""
        return None

    async def on_end(self, ctx: HookContext, result: AgentResult) -> None:
        """The invocation ended (however it ended)."""


def apply_rules(
    rules: tuple[StepRule, ...], request: ModelRequest, ctx: HookContext, tokens_left: int | None
) -> list[int]:
    """Change `request` by the rules whose conditions hold; return their positions (from 0)."""
    applied = []
    for i, rule in enumerate(rules):
        when, use = rule.when, rule.use
        if when.step is not None and when.step != ctx.step:
            continue
        if when.after_tool is not None and when.after_tool not in ctx.tools_called:
            continue
        if when.budget_below is not None and (
            tokens_left is None or tokens_left >= when.budget_below
        ):
            continue
        applied.append(i)
        if use.model is not None:
            spec = use.model if isinstance(use.model, dict) else {"name": use.model}
            request.model, request.params = spec["name"], dict(spec.get("params") or {})
        if use.tools is not None:
            request.tools = [t for t in request.tools if t["function"]["name"] in use.tools]
        if use.force_tool is not None:
            request.force_tool = use.force_tool
        if use.instruction is not None:
            request.messages = _instructed(request.messages, use.instruction)
    return applied


def _instructed(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """The conversation with `text` added to its system message (one made if none)."""
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0], content=f"{messages[0]['content']}\n\n{text}")
        return [first, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]
