"""Recording an invocation's steps, and taking them back when it runs again.

An invocation that may have run before (its run was resumed, or its actor died and the call is
retried) reads its recorded steps first. It reuses them in order for as long as its requests
are the same as recorded; from the first model request that differs (the config changed) or
that was never answered, it goes on live.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.core.state import StateChange
from agents.core.steps import Step
from agents.models.base import ModelReply, ToolCall
from agents.runtime.guardrails import Tripped
from agents.tools.base import ToolOutput

__all__ = ["RecordedSteps", "blocked_of", "output_data", "output_of", "reply_data", "reply_of"]


@dataclass
class RecordedSteps:
    """What an invocation recorded before, handed out step by step (see the module)."""

    steps: dict[str, Step] = field(default_factory=dict)
    loaded: bool = False  # the invocation may have run before: its record was read
    diverged: bool = False

    def model(self, key: str, fingerprint: str) -> Step | None:
        """The recorded reply to the same request, or None (and live from here on)."""
        step = None if self.diverged else self.steps.get(key)
        if step is None or step.data.get("fingerprint") != fingerprint:
            self.diverged = True
            return None
        return step

    def get(self, key: str) -> Step | None:
        """A recorded step other than a model reply (a tool's result, its start, a decision)."""
        return None if self.diverged else self.steps.get(key)


def reply_data(
    reply: ModelReply, fingerprint: str, blocked: Tripped | None = None
) -> dict[str, Any]:
    """A model reply as recorded.

    `blocked`: an output guardrail stopped it (its content is what the guardrail kept).
    """
    data: dict[str, Any] = {
        "fingerprint": fingerprint,
        "content": reply.content,
        "tool_calls": [[c.id, c.name, c.arguments] for c in reply.tool_calls],
        "input_tokens": reply.input_tokens,
        "output_tokens": reply.output_tokens,
        "cost_usd": reply.cost_usd,
        "finish_reason": reply.finish_reason,
        "response_model": reply.response_model,
    }
    if blocked is not None:
        data["blocked"] = {
            "guardrail": blocked.guardrail,
            "stage": blocked.stage,
            "reason": blocked.reason,
        }
    return data


def blocked_of(step: Step) -> Tripped | None:
    """The guardrail that stopped a recorded reply, if one did."""
    found = step.data.get("blocked")
    if not isinstance(found, dict):
        return None
    content = step.data.get("content")
    return Tripped(
        str(found["guardrail"]), str(found["stage"]), str(found["reason"]), content or ""
    )


def reply_of(step: Step) -> ModelReply:
    """The model reply a step recorded."""
    data = step.data
    return ModelReply(
        content=data.get("content"),
        tool_calls=[ToolCall(id=i, name=n, arguments=a) for i, n, a in data.get("tool_calls", [])],
        input_tokens=int(data.get("input_tokens", 0)),
        output_tokens=int(data.get("output_tokens", 0)),
        cost_usd=data.get("cost_usd"),
        finish_reason=data.get("finish_reason"),
        response_model=data.get("response_model"),
    )


def output_data(out: ToolOutput) -> dict[str, Any]:
    """A tool's result as recorded, with its writes to the shared state.

    (A delegation's sub-run is not recorded here: the child records its own.)
    """
    data: dict[str, Any] = {"content": out.content, "is_error": out.is_error}
    if out.changes:
        data["state"] = [c.model_dump(mode="json") for c in out.changes]
    return data


def output_of(step: Step) -> ToolOutput:
    """The tool result a step recorded (its writes to the shared state too)."""
    changes = [StateChange.model_validate(c) for c in step.data.get("state") or []]
    return ToolOutput(
        str(step.data.get("content", "")),
        is_error=bool(step.data.get("is_error")),
        changes=changes,
    )
