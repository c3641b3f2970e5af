"""A model client for tests: the real litellm client, keeping what it was asked."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.models.base import ModelReply, TextSink
from agents.models.client import LiteLLMClient

__all__ = ["RecordingClient"]


@dataclass
class RecordingClient(LiteLLMClient):
    """Each request's messages (`seen`) and answer format (`formats`), in order."""

    seen: list[list[dict[str, Any]]] = field(default_factory=list)
    formats: list[dict[str, Any] | None] = field(default_factory=list)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_text: TextSink | None = None,
        response_format: dict[str, Any] | None = None,
        force_tool: str | None = None,
    ) -> ModelReply:
        self.seen.append([dict(m) for m in messages])
        self.formats.append(response_format)
        return await super().complete(messages, tools, on_text, response_format, force_tool)
