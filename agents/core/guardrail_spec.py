"""Guardrails as the YAML declares them: checks on an agent's input, output and tool calls."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["GuardrailSpec", "GuardrailsSpec", "JudgeSpec", "ToolGuardrailSpec"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class JudgeSpec(_Strict):
    """A model that judges a text: it answers PASS, or FAIL and the reason."""

    model: Any = Field(description="A litellm model string, or {name, params}.")
    instructions: str = Field(min_length=1, description="What it checks.")


class GuardrailSpec(_Strict):
    """One check on a text: a regular expression, a Python callable, or a model's judgement.

    A callable (`package.module:function`, sync or async) takes the text and returns None or
    False (passes), or a reason (a string) or True (trips).
    """

    name: str | None = Field(default=None, description="Names it where it trips.")
    regex: str | None = Field(default=None, description="Trips when the text matches.")
    function: str | None = Field(default=None, description="`package.module:function`.")
    judge: JudgeSpec | None = None
    message: str | None = Field(default=None, description="The reason given when it trips.")

    @model_validator(mode="after")
    def _one_kind(self) -> GuardrailSpec:
        kinds = [k for k in ("regex", "function", "judge") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("give exactly one of regex, function or judge")
        return self

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"regex {value!r} does not compile: {exc}") from None
        return value

    @property
    def label(self) -> str:
        """How it is named in errors, events and spans."""
        if self.name:
            return self.name
        if self.regex is not None:
            return f"regex {self.regex!r}"
        return self.function or "judge"


class ToolGuardrailSpec(GuardrailSpec):
    """A check on a tool call's arguments (before it runs) or its result (before the model)."""

    tool: str = Field(min_length=1, description="The tool's name, or `*` for every tool.")
    # (Not `on`: YAML reads a bare `on` key as the boolean true.)
    check: Literal["arguments", "result"] = "arguments"
    action: Literal["reject", "redact"] = Field(
        default="reject",
        description="reject: the call fails with the reason (the model reads it); redact: what "
        "the regex matches is replaced (regex only).",
    )

    @model_validator(mode="after")
    def _redact_needs_regex(self) -> ToolGuardrailSpec:
        if self.action == "redact" and self.regex is None:
            raise ValueError("action redact needs a regex (what to replace)")
        return self


class GuardrailsSpec(_Strict):
    """An agent's (or every agent's, at the top level) guardrails."""

    input: tuple[GuardrailSpec, ...] = Field(default=(), description="On the task it is given.")
    output: tuple[GuardrailSpec, ...] = Field(default=(), description="On its final answer.")
    tools: tuple[ToolGuardrailSpec, ...] = ()

    def __add__(self, other: GuardrailsSpec) -> GuardrailsSpec:
        return GuardrailsSpec(
            input=self.input + other.input,
            output=self.output + other.output,
            tools=self.tools + other.tools,
        )

    def __bool__(self) -> bool:
        return bool(self.input or self.output or self.tools)
