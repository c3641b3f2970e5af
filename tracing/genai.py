"""Captured content in the shape the GenAI semantic conventions give it.

`gen_ai.input.messages` and `gen_ai.output.messages` are arrays of `{role, parts: [...]}`
(output messages also carry `finish_reason`), `gen_ai.system_instructions` an array of parts and
`gen_ai.tool.definitions` an array of `{type, name, description, parameters}`: the JSON schemas
published with the conventions (docs/gen-ai/gen-ai-*.json in open-telemetry/semantic-conventions).
Viewers that understand them show a chat instead of a JSON string. Baton's conversations are in
OpenAI's chat-completions shape; these functions translate.

Content is clipped string by string, so that what a span carries stays valid JSON.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "clip",
    "clip_strings",
    "input_messages",
    "output_messages",
    "system_instructions",
    "text_messages",
    "tool_definitions",
]

# OpenAI's finish reasons where the conventions name them differently.
_FINISH_REASONS = {"tool_calls": "tool_call", "function_call": "tool_call"}


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more chars]"


def clip_strings(value: Any, limit: int) -> Any:
    """`value` with every string in it cut to `limit` characters."""
    if isinstance(value, str):
        return clip(value, limit)
    if isinstance(value, dict):
        return {k: clip_strings(v, limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clip_strings(v, limit) for v in value]
    return value


def _text(content: Any) -> str:
    """Chat-completions content (a string, or a list of typed parts) as text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def _arguments(raw: Any) -> Any:
    """Tool-call arguments as JSON where they parse (a model may send broken JSON)."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw or "{}")
    except ValueError:
        return raw


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    if message.get("role") == "tool":
        return [
            {
                "type": "tool_call_response",
                "id": message.get("tool_call_id"),
                "response": _text(message.get("content")),
            }
        ]
    parts: list[dict[str, Any]] = []
    text = _text(message.get("content"))
    if text:
        parts.append({"type": "text", "content": text})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": function.get("name", ""),
                "arguments": _arguments(function.get("arguments")),
            }
        )
    return parts


def input_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A chat-completions conversation as `gen_ai.input.messages`."""
    return [{"role": m.get("role", "user"), "parts": _parts(m)} for m in messages]


def output_messages(message: dict[str, Any], finish_reason: str | None) -> list[dict[str, Any]]:
    """A model's reply (an assistant message) as `gen_ai.output.messages`."""
    reason = finish_reason or ("tool_call" if message.get("tool_calls") else "stop")
    return [
        {
            "role": message.get("role", "assistant"),
            "parts": _parts(message),
            "finish_reason": _FINISH_REASONS.get(reason, reason),
        }
    ]


def text_messages(role: str, text: str, finish_reason: str | None = None) -> list[dict[str, Any]]:
    """One text message: a task given to an agent, or its answer (with a finish reason)."""
    message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": text}]}
    if finish_reason is not None:
        message["finish_reason"] = finish_reason
    return [message]


def system_instructions(text: str) -> list[dict[str, Any]]:
    """An agent's instructions as `gen_ai.system_instructions`."""
    return [{"type": "text", "content": text}]


def tool_definitions(schemas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tools offered to a model (OpenAI's function shape) as `gen_ai.tool.definitions`."""
    definitions = []
    for schema in schemas:
        function = schema.get("function") or {}
        definitions.append(
            {
                "type": schema.get("type", "function"),
                "name": function.get("name", ""),
                "description": function.get("description", ""),
                "parameters": function.get("parameters"),
            }
        )
    return definitions
