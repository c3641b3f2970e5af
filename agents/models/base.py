"""What the tool loop needs of a model: a client that answers a chat with text or tool calls.

No provider code here (litellm lives in `agents.models.client`), so the runtime and the processes
that only carry records import it cheaply.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BUILTIN_PREFIX",
    "CHANGES_STATE",
    "Busy",
    "ModelClient",
    "ModelIdentity",
    "ModelReply",
    "TextSink",
    "ToolCall",
    "tool_schema",
]

# Baton's own models (`baton/offline`, `baton/scripted`): they answer in the agent's process.
BUILTIN_PREFIX = "baton/"
# A key of a tool's function entry, for built-in models only: the tool declares that it writes or
# destroys (MCP annotations), so the offline model calls it only when the task names it.
CHANGES_STATE = "x-baton-changes-state"


# Takes each piece of text a streaming model produces, as it comes.
TextSink = Callable[[str], None]


def tool_schema(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """A tool as offered to a model (OpenAI's function-tool shape, which litellm speaks)."""
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


@dataclass(frozen=True)
class ToolCall:
    """A tool call a model asked for (its arguments as the model wrote them: JSON text)."""

    id: str
    name: str
    arguments: str


@dataclass
class ModelReply:
    """A model's answer: text, or tool calls, with its token counts and cost."""

    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None  # None: litellm has no price for this model
    finish_reason: str | None = None
    response_model: str | None = None  # the model that answered, as the provider names it
    # Set by a gated model (`agents.models.gated`): the fallback that answered instead of the
    # model asked (its model string), and how long the call waited at provider gates.
    fallback: str | None = None
    gate_wait_s: float = 0.0

    def as_message(self) -> dict[str, Any]:
        """The reply as the assistant message of the conversation (OpenAI's shape)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.tool_calls
            ]
        return message


@dataclass(frozen=True)
class Busy:
    """A call the provider refused for load or lost (429, 503, 529, a dropped connection).

    Worth asking again; `retry_after_s`: how long the provider said to wait (`Retry-After`).
    """

    retry_after_s: float | None = None


@dataclass(frozen=True)
class ModelIdentity:
    """Who a model is, as the GenAI conventions name it on a model call's span.

    `model`: the model as its provider names it (no provider prefix); `provider`: the
    conventions' name of the provider (`openai`, `anthropic`, `aws.bedrock`, ...);
    `server`: the provider's host and port, when known.
    """

    model: str
    provider: str | None = None
    server: tuple[str, int | None] | None = None


class ModelClient(abc.ABC):
    """Anything that answers a chat with text or tool calls (the runtime's seam to models)."""

    model: str

    @property
    def identity(self) -> ModelIdentity:
        """Who the model is; a `provider/model` string names both."""
        provider, sep, name = self.model.partition("/")
        return ModelIdentity(name, provider) if sep else ModelIdentity(self.model)

    def count_tokens(self, messages: list[dict[str, Any]]) -> int:
        """About how many tokens `messages` are for this model."""
        return sum(len(str(m.get("content") or "")) + 16 for m in messages) // 4

    def context_window(self) -> int | None:
        """How many input tokens the model takes (None: unknown)."""
        return None

    def supports_json_schema(self) -> bool:
        """Whether the model takes a JSON Schema for its answer (`response_format`)."""
        return False

    def busy(self, error: BaseException) -> Busy | None:
        """Whether `error` (raised by `complete`) says the provider is busy.

        Not that the request is wrong (None: asking again would fail the same way).
        """
        return None

    @abc.abstractmethod
    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_text: TextSink | None = None,
        response_format: dict[str, Any] | None = None,
        force_tool: str | None = None,
    ) -> ModelReply:
        """Answer the conversation `messages`, offered `tools` (OpenAI's function shape).

        With `on_text`, the model streams: each piece of its text goes there as it comes (the
        reply still holds the whole message). `response_format`: the shape of the answer, in
        OpenAI's structured-output form. `force_tool`: a tool the model must call.
        """
