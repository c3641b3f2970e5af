"""Guardrails at work: checks that end an invocation, or reject or redact a tool call.

The checks are the YAML's (`agents.core.guardrail_spec`): a regular expression, a Python
callable, or a model's judgement (asked through the runtime, so that its call has its own span
and its tokens count in the run's budget).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from agents.core.guardrail_spec import GuardrailSpec, GuardrailsSpec, JudgeSpec
from agents.core.imports import import_object

__all__ = ["Guardrails", "Judge", "Tripped", "load_callable"]

# Asks a judge model about a text: None when it passes, else why not.
Judge = Callable[[JudgeSpec, str], Awaitable[str | None]]


def load_callable(path: str) -> Callable[..., Any]:
    """The function named `package.module:function` (ValueError when there is none)."""
    found = import_object(path)  # (an ImportProblem is a ValueError)
    if not callable(found):
        raise ValueError(f"{path} is not a function (`package.module:function`)")
    return found  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Tripped:
    """A guardrail that stopped something, why, and what of the text may be kept.

    `kept`: the text with what the guardrail blocked taken out (a regular expression's
    matches), or a placeholder for all of it (a function's or a judge's verdict). The reason
    never quotes the blocked text.
    """

    guardrail: str
    stage: str  # input, output, arguments of a tool, result of a tool
    reason: str
    kept: str = ""

    def __str__(self) -> str:
        return f"guardrail {self.guardrail} tripped on the {self.stage}: {self.reason}"


def _kept(guard: GuardrailSpec, text: str) -> str:
    """`text` with what `guard` blocks taken out, said where."""
    if guard.regex is not None:
        return re.sub(guard.regex, f"[BLOCKED by guardrail {guard.label}]", text)
    return f"[BLOCKED by guardrail {guard.label}: the text was not kept]"


async def _no_judge(judge: JudgeSpec, text: str) -> str | None:
    raise AssertionError("a screen asks no judge")


class Guardrails:
    """An agent's guardrails, ready to check texts."""

    def __init__(self, spec: GuardrailsSpec) -> None:
        self.spec = spec
        self._functions = {
            g.function: load_callable(g.function)
            for g in (*spec.input, *spec.output, *spec.tools)
            if g.function is not None
        }

    def __bool__(self) -> bool:
        return bool(self.spec)

    async def check(
        self, stage: Literal["input", "output"], text: str, judge: Judge
    ) -> Tripped | None:
        """The first of the stage's guardrails that trips on `text` (None: all pass)."""
        for guard in getattr(self.spec, stage):
            reason = await self._trips(guard, text, judge)
            if reason is not None:
                return Tripped(guard.label, stage, reason, _kept(guard, text))
        return None

    async def screen(self, stage: Literal["input", "output"], text: str) -> Tripped | None:
        """The first of the stage's regular expressions and functions that trips on `text`.

        No judge is asked (that is a model call): what can decide without one, before the text
        is kept anywhere.
        """
        for guard in getattr(self.spec, stage):
            if guard.judge is None:
                reason = await self._trips(guard, text, _no_judge)
                if reason is not None:
                    return Tripped(guard.label, stage, reason, _kept(guard, text))
        return None

    async def tool(
        self, tool: str, on: Literal["arguments", "result"], text: str, judge: Judge
    ) -> tuple[str, Tripped | None]:
        """A tool call's arguments or result after its guardrails: redacted, or rejected."""
        for guard in self.spec.tools:
            if guard.check != on or guard.tool not in (tool, "*"):
                continue
            if guard.action == "redact":
                assert guard.regex is not None
                text = re.sub(guard.regex, "[REDACTED]", text)
                continue
            reason = await self._trips(guard, text, judge)
            if reason is not None:
                return text, Tripped(guard.label, f"{on} of {tool}", reason, _kept(guard, text))
        return text, None

    async def _trips(self, guard: GuardrailSpec, text: str, judge: Judge) -> str | None:
        if guard.regex is not None:  # (what matched is what must not be repeated anywhere)
            found = re.search(guard.regex, text)
            return (guard.message or "the text matched its pattern") if found else None
        if guard.judge is not None:
            reason = await judge(guard.judge, text)
            return (guard.message or reason) if reason is not None else None
        assert guard.function is not None
        verdict = self._functions[guard.function](text)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is None or verdict is False or verdict == "":
            return None
        return guard.message or (verdict if isinstance(verdict, str) else "tripped")
