"""Baton's built-in models, served through litellm's `CustomLLM`.

Every code path (retries, usage, tool-call parsing) is litellm's own, exactly as with a real
provider.

- `baton/offline`: the deterministic offline model (see `agents.models.offline`).
- `baton/scripted`: replies from a list in the model params (`replies`, `repeat_last`); a test
  double that works in any process because its script travels with the config.

Both accept `latency_ms` to simulate a slow model, `chunk_ms` to pause between the pieces of a
streamed reply, and `calls_file`: a file to which each answered call appends one line (to count
calls across processes and restarts). Streamed, text comes a word at a time and each tool call in
two pieces, as providers send them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import agents.models.litellm_env  # noqa: F401  (litellm reads these settings at import)

# isort: split
import litellm
from litellm.llms.custom_llm import CustomLLM, CustomLLMError
from litellm.types.utils import (
    ChatCompletionMessageToolCall,
    Choices,
    Function,
    GenericStreamingChunk,
    Message,
    ModelResponse,
    Usage,
)

from agents.models.offline import estimate_tokens, offline_reply, scripted_reply

__all__ = ["PROVIDER", "register_builtin_models"]

PROVIDER = "baton"


def _reply(model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    tools = params.get("tools") or []
    if model == "offline":
        asked = (params.get("response_format") or {}).get("json_schema") or {}
        shape = asked.get("schema")
        forced = ((params.get("tool_choice") or {}).get("function") or {}).get("name")
        if forced:  # it must call this tool
            tools = [t for t in tools if t.get("function", {}).get("name") == forced]
            return offline_reply(messages, tools, shape, forced=True)
        return offline_reply(messages, tools, shape, name=asked.get("name"))
    if model == "scripted":
        return scripted_reply(
            messages, params.get("replies") or [], bool(params.get("repeat_last", False))
        )
    raise CustomLLMError(  # type: ignore[no-untyped-call]
        status_code=404, message=f"unknown built-in model {PROVIDER}/{model}"
    )


def _response(
    model: str, reply: dict[str, Any], messages: list[dict[str, Any]], response: ModelResponse
) -> ModelResponse:
    # Ids unique within the conversation, and the same for the same conversation (so are the
    # token counts, which are estimated from the messages).
    turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
    calls = [
        ChatCompletionMessageToolCall(
            id=f"call_{turn}_{i}",
            type="function",
            function=Function(name=c["name"], arguments=json.dumps(c["arguments"])),
        )
        for i, c in enumerate(reply.get("tool_calls") or [], 1)
    ]
    content = reply.get("content")
    message = Message(role="assistant", content=content, tool_calls=calls or None)
    response.choices = [
        Choices(index=0, message=message, finish_reason="tool_calls" if calls else "stop")
    ]
    prompt = estimate_tokens(json.dumps(messages, default=str))
    completion = estimate_tokens(content or json.dumps(reply.get("tool_calls")))
    usage = Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )
    response.usage = usage  # type: ignore[attr-defined]
    response.model = f"{PROVIDER}/{model}"
    response.created = int(time.time())
    return response


_WORD = re.compile(r"\s*\S+\s*")


def _pieces(response: ModelResponse) -> list[GenericStreamingChunk]:
    """A whole reply as a provider streams it: words of text, tool calls in two pieces each."""
    message = response.choices[0].message
    pieces: list[GenericStreamingChunk] = [
        {"text": word, "is_finished": False, "finish_reason": "", "usage": None, "index": 0}
        for word in _WORD.findall(message.content or "")
    ]
    calls: list[ChatCompletionMessageToolCall] = message.tool_calls or []  # type: ignore[assignment]
    for i, call in enumerate(calls):
        arguments = call.function.arguments or ""
        half = len(arguments) // 2
        for part, (name, text) in enumerate(
            ((call.function.name, arguments[:half]), (None, arguments[half:]))
        ):
            tool_use = {
                "id": call.id if part == 0 else None,
                "type": "function",
                "function": {"name": name, "arguments": text},
                "index": i,
            }
            pieces.append(
                {
                    "text": "",
                    "tool_use": tool_use,  # type: ignore[typeddict-item]
                    "is_finished": False,
                    "finish_reason": "",
                    "usage": None,
                    "index": 0,
                }
            )
    usage = response.usage  # type: ignore[attr-defined]
    pieces.append(
        {
            "text": "",
            "is_finished": True,
            "finish_reason": response.choices[0].finish_reason or "stop",
            "usage": {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens,
            },
            "index": 0,
        }
    )
    return pieces


def _latency_s(optional_params: dict[str, Any]) -> float:
    return float(optional_params.get("latency_ms", 0)) / 1000


def _count(optional_params: dict[str, Any], messages: list[dict[str, Any]]) -> None:
    path = optional_params.get("calls_file")
    if path:
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        with open(str(path), "a", encoding="utf-8") as out:
            out.write(f"{_task_of(messages)[:60]!r} turn {turn}\n")


def _task_of(messages: list[dict[str, Any]]) -> str:
    return next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")


class BuiltinModels(CustomLLM):
    """litellm handler for the `baton/...` models (litellm passes every argument by keyword)."""

    def completion(  # type: ignore[override]
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        optional_params: dict[str, Any],
        model_response: ModelResponse,
        **_: Any,
    ) -> ModelResponse:
        if latency := _latency_s(optional_params):
            time.sleep(latency)
        reply = _reply(model, messages, optional_params)
        _count(optional_params, messages)
        return _response(model, reply, messages, model_response)

    async def acompletion(  # type: ignore[override]
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        optional_params: dict[str, Any],
        model_response: ModelResponse,
        **_: Any,
    ) -> ModelResponse:
        if latency := _latency_s(optional_params):
            await asyncio.sleep(latency)
        reply = _reply(model, messages, optional_params)
        _count(optional_params, messages)
        return _response(model, reply, messages, model_response)

    async def astreaming(  # type: ignore[override]
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        optional_params: dict[str, Any],
        model_response: ModelResponse,
        **_: Any,
    ) -> AsyncIterator[GenericStreamingChunk]:
        whole = await self.acompletion(
            model=model,
            messages=messages,
            optional_params=optional_params,
            model_response=model_response,
        )
        pause = float(optional_params.get("chunk_ms", 0)) / 1000
        for i, piece in enumerate(_pieces(whole)):
            if pause and i:
                await asyncio.sleep(pause)
            yield piece


def register_builtin_models() -> None:
    """Make `baton/offline` and `baton/scripted` resolvable by litellm in this process."""
    if not any(item.get("provider") == PROVIDER for item in litellm.custom_provider_map):
        litellm.custom_provider_map = [
            *litellm.custom_provider_map,
            {"provider": PROVIDER, "custom_handler": BuiltinModels()},
        ]
        # litellm builds its provider list from the map on first use; refresh it explicitly.
        from litellm.utils import custom_llm_setup

        custom_llm_setup()  # type: ignore[no-untyped-call]
        # Free and known: otherwise litellm searches its price list for an unknown model on
        # every call, which costs more than the call itself.
        quiet = logging.getLogger("LiteLLM")
        level = quiet.level
        quiet.setLevel(logging.ERROR)  # it warns that these names are not in its price list
        litellm.register_model(
            {
                f"{PROVIDER}/{name}": {
                    "litellm_provider": PROVIDER,
                    "mode": "chat",
                    "input_cost_per_token": 0.0,
                    "output_cost_per_token": 0.0,
                    "max_tokens": 1_000_000,
                    "max_input_tokens": 1_000_000,
                    "max_output_tokens": 1_000_000,
                }
                for name in ("offline", "scripted")
            }
        )
        quiet.setLevel(level)
