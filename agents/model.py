"""The model client: one `litellm.acompletion` call, normalized to what the tool loop needs."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

# litellm fetches a price list from the internet at import unless told otherwise.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm

from agents.spec import ModelSpec

__all__ = [
    "LiteLLMClient",
    "ModelClient",
    "ModelReply",
    "RemoteModelsForbidden",
    "ToolCall",
    "configure_litellm",
    "forbid_remote_models",
]

_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
_remote_models_allowed = True


class RemoteModelsForbidden(RuntimeError):
    """A model call would have left this machine while remote models are forbidden."""


def forbid_remote_models() -> None:
    """Refuse every model call except Baton's built-in models and servers on loopback.

    Test suites call this in every process (Ray's `worker_process_setup_hook` included), so that
    no test can reach a real provider by accident.
    """
    global _remote_models_allowed
    _remote_models_allowed = False


def _is_local(spec: ModelSpec) -> bool:
    if spec.name.startswith("baton/"):
        return True
    base = str(spec.params.get("api_base") or spec.params.get("base_url") or "")
    host = base.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0] if base else ""
    return host in _LOOPBACK_HOSTS or base.split("://", 1)[-1].startswith("[::1]")


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass
class ModelReply:
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None  # None: litellm has no price for this model
    finish_reason: str | None = None


class ModelClient:
    """Anything that answers a chat with text or tool calls."""

    model: str

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelReply:
        raise NotImplementedError


_configured = False


def configure_litellm() -> None:
    """Register Baton's built-in models and trim litellm's per-call work (once per process)."""
    global _configured
    if _configured:
        return
    from agents.providers import register_builtin_models

    register_builtin_models()
    litellm.suppress_debug_info = True
    litellm.telemetry = False
    litellm.drop_params = False
    litellm.turn_off_message_logging = True  # contents are recorded only where Baton opts in
    _configured = True


@dataclass
class LiteLLMClient(ModelClient):
    spec: ModelSpec

    def __post_init__(self) -> None:
        configure_litellm()
        self.model = self.spec.name

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelReply:
        if not _remote_models_allowed and not _is_local(self.spec):
            raise RemoteModelsForbidden(f"model {self.spec.name!r} would call a remote provider")
        kwargs: dict[str, Any] = dict(self.spec.params)
        if tools:
            kwargs["tools"] = tools
        response = await litellm.acompletion(model=self.spec.name, messages=messages, **kwargs)
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
            content=message.content,
            tool_calls=calls,
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=float(cost) if isinstance(cost, int | float) else None,
            finish_reason=response.choices[0].finish_reason,
        )
