"""The model client: one `litellm.acompletion` call, normalized to what the tool loop needs."""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from typing_extensions import override

import agents.models.litellm_env  # noqa: F401  (litellm reads these settings at import)

# isort: split
import litellm
import litellm.exceptions as litellm_errors

from agents.core.spec import ModelSpec
from agents.models.base import (
    BUILTIN_PREFIX,
    Busy,
    ModelClient,
    ModelIdentity,
    ModelReply,
    TextSink,
    ToolCall,
)
from agents.models.inline import inline_setup, sets_up_inline
from agents.models.safety import check_model_allowed
from agents.models.tokenizer import defer_default_tokenizer
from agents.models.unlogged import unlogged

__all__ = [
    "LiteLLMClient",
    "configure_litellm",
    "retry_after",
    "takes_json_schema",
]


_configured = False

_BUSY = (
    litellm_errors.RateLimitError,
    litellm_errors.ServiceUnavailableError,
    litellm_errors.InternalServerError,
    litellm_errors.APIConnectionError,
)


def configure_litellm() -> None:
    """Register Baton's built-in models and trim litellm's per-call work (once per process)."""
    global _configured
    if _configured:
        return
    from agents.models.providers import register_builtin_models

    register_builtin_models()
    defer_default_tokenizer()
    litellm.suppress_debug_info = True
    litellm.telemetry = False
    litellm.drop_params = False
    # Baton registers no litellm logging callbacks (spans are Baton's own, contents opt-in), so
    # litellm's message redaction for them would only deep-copy every conversation.
    litellm.turn_off_message_logging = False
    _configured = True


def takes_json_schema(model: str) -> bool:
    """Whether `model` takes a JSON Schema for its answer (`response_format`), as litellm says."""
    try:
        return model.startswith(BUILTIN_PREFIX) or bool(
            litellm.supports_response_schema(model=model)
        )
    except Exception:  # a model litellm does not know
        return False


@dataclass
class LiteLLMClient(ModelClient):
    """A model reached through `litellm.acompletion`, as its spec names and configures it."""

    spec: ModelSpec

    def __post_init__(self) -> None:
        configure_litellm()
        self.model = self.spec.name
        self._inline = sets_up_inline(self.spec.name, self.spec.params)
        self._identity = _identity(self.spec)

    @property
    @override
    def identity(self) -> ModelIdentity:
        return self._identity

    @override
    def count_tokens(self, messages: list[dict[str, Any]]) -> int:
        return int(litellm.token_counter(model=self.spec.name, messages=messages))

    @override
    def context_window(self) -> int | None:
        try:
            window = litellm.get_model_info(self.spec.name).get("max_input_tokens")
        except Exception:  # a model litellm does not know
            return None
        return int(window) if window else None

    @override
    def supports_json_schema(self) -> bool:
        return takes_json_schema(self.spec.name)

    @override
    def busy(self, error: BaseException) -> Busy | None:
        # A refusal for load (429, 503), an overload (Anthropic's 529 is an internal error to
        # litellm) or a connection lost: asking again may work; any other error would repeat.
        if isinstance(error, _BUSY):
            return Busy(retry_after(error))
        return None

    @override
    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_text: TextSink | None = None,
        response_format: dict[str, Any] | None = None,
        force_tool: str | None = None,
    ) -> ModelReply:
        check_model_allowed(self.spec)
        kwargs: dict[str, Any] = dict(self.spec.params)
        # Baton's tools are plain functions, never litellm proxy's MCP gateway tools; without
        # this, litellm's first call with tools imports its gateway (and the mcp package):
        # 1.1 s of CPU and 21 MB in every agent process (measured), before any request is sent.
        kwargs["_skip_mcp_handler"] = True
        if tools:
            kwargs["tools"] = tools
        if response_format is not None:
            kwargs["response_format"] = response_format
        if force_tool is not None:
            kwargs["tool_choice"] = {"type": "function", "function": {"name": force_tool}}
        # `acompletion` is the cheapest async way into litellm that keeps its retries
        # (`num_retries`), usage and cost. Measured with the built-in model (no network) on a
        # 2-core machine: 1.0-1.2 ms of CPU per call, of which the cost calculation is about a
        # third and the (callback-less) success logging a tenth to a fifth; `Router.acompletion`
        # costs half as much again, and the sync `completion` blocks the event loop for the
        # whole request. What Baton trims: the worker-thread hop of its set-up (`inline_setup`:
        # 0.80-0.89 ms per call without it) and, while no litellm callback is registered, the
        # success logging (`unlogged`). bench/delegation_overhead.py's floors call plain
        # `litellm.acompletion`.
        with inline_setup(self._inline), unlogged(kwargs):
            if on_text is not None:
                response = await self._streamed(messages, kwargs, on_text)
            else:
                response = await litellm.acompletion(
                    model=self.spec.name, messages=messages, **kwargs
                )
        message = response.choices[0].message
        calls = [
            ToolCall(
                id=c.id or f"call_{i}",
                name=c.function.name or "",
                arguments=c.function.arguments or "{}",
            )
            for i, c in enumerate(message.tool_calls or [])
        ]
        usage = getattr(response, "usage", None)
        hidden = getattr(response, "_hidden_params", None) or {}
        cost = hidden.get("response_cost")
        return ModelReply(
            content=message.content or None,  # a streamed reply has "" where others have None
            tool_calls=calls,
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=float(cost) if isinstance(cost, int | float) else None,
            finish_reason=response.choices[0].finish_reason,
            response_model=getattr(response, "model", None) or None,
        )

    async def _streamed(
        self, messages: list[dict[str, Any]], kwargs: dict[str, Any], on_text: TextSink
    ) -> Any:
        """Stream the reply, handing on its text as it comes; the whole reply, rebuilt.

        litellm's chunk builder joins tool calls sent in pieces, and takes the token counts from
        the last chunk (`include_usage`: providers report usage only when asked to).
        """
        stream = await litellm.acompletion(
            model=self.spec.name,
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
            **kwargs,
        )
        chunks = []
        async for chunk in stream:
            chunks.append(chunk)
            text = chunk.choices[0].delta.content if chunk.choices else None
            if text:
                on_text(text)
        return litellm.stream_chunk_builder(chunks, messages=messages)


# litellm's names of providers that the GenAI conventions name otherwise.
_CONVENTION_NAMES = {
    "bedrock": "aws.bedrock",
    "bedrock_converse": "aws.bedrock",
    "vertex_ai": "gcp.vertex_ai",
    "vertex_ai_beta": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "mistral": "mistral_ai",
    "watsonx": "ibm.watsonx.ai",
    "xai": "x_ai",
}
# Where the best-known providers answer when no `api_base` says otherwise.
_DEFAULT_HOSTS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}


def _identity(spec: ModelSpec) -> ModelIdentity:
    """The model, its provider and its server, as litellm resolves the spec (once per client)."""
    api_base = spec.params.get("api_base") or spec.params.get("base_url")
    try:
        model, provider, _, resolved = litellm.get_llm_provider(
            model=spec.name, api_base=api_base if isinstance(api_base, str) else None
        )
    except Exception:  # a model litellm does not know: as the string names it
        return ModelIdentity(spec.name)
    server = None
    base = resolved or (api_base if isinstance(api_base, str) else None)
    if base:
        where = urlsplit(base)
        if where.hostname:
            server = (where.hostname, where.port or (443 if where.scheme == "https" else 80))
    elif provider in _DEFAULT_HOSTS:
        server = (_DEFAULT_HOSTS[provider], 443)
    return ModelIdentity(model, _CONVENTION_NAMES.get(provider, provider), server)


def retry_after(error: BaseException) -> float | None:
    """Seconds the provider said to wait before asking again, if it said.

    Its `Retry-After` (seconds or a date), or OpenAI's `retry-after-ms`, from the headers of the
    response a litellm error carries.
    """
    headers = getattr(error, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(error, "response", None), "headers", None)
    if not headers:
        return None
    try:
        if headers.get("retry-after-ms") is not None:
            return max(float(headers["retry-after-ms"]) / 1000, 0.0)
        value = headers.get("retry-after")
    except (TypeError, ValueError):
        return None
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:  # an HTTP date
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)
