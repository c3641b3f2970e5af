"""`ask_user`: the built-in tool with which an agent asks the person a question mid-run.

Offered to an agent whose config says `ask_user: true`. The call itself is made by the tool
loop (`agents.runtime.questions.Questions`): the run waits (status `input_required`) until the
person answers, over HTTP, A2A, MCP elicitation or at the terminal, and the answer is the
call's result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.tools.base import ToolCallContext, ToolOutput
from tracing import attributes as attr

__all__ = ["ASK_USER", "MAX_CHOICES", "AskUserTool"]

ASK_USER = attr.ASK_USER_TOOL
MAX_CHOICES = 20


@dataclass(frozen=True)
class AskUserTool:
    """The question tool: a question, and optionally the answers to choose from."""

    idempotent: bool = True  # asked once by its own record (the step log), never run twice

    @property
    def name(self) -> str:
        """`ask_user`."""
        return ASK_USER

    @property
    def description(self) -> str:
        """When to use it, for the model."""
        return (
            "Ask the user (the person who gave you the task) a question and wait for the "
            "answer. Use it when the task is ambiguous or misses something only they know; "
            "returns their answer."
        )

    @property
    def parameters(self) -> dict[str, Any]:
        """A question, and optionally a few answers to choose from."""
        return {
            "type": "object",
            "properties": {
                "question": {"type": "string", "description": "One clear question."},
                "choices": {
                    "type": "array",
                    "items": {"type": "string"},
                    "maxItems": MAX_CHOICES,
                    "description": "Answers to choose from, if the question has a few.",
                },
            },
            "required": ["question"],
            "additionalProperties": False,
        }

    async def call(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolOutput:
        """Not called: the tool loop asks the person itself (it holds the run's record)."""
        return ToolOutput("error: ask_user is asked by the tool loop", is_error=True)
