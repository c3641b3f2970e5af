"""Context that fits: a long conversation made to fit the model's window before each call.

The agent's own record of the conversation is never changed (its step log, spans and events keep
every message); what is sent is a fitted copy. `drop_oldest_tool_results` replaces the oldest
tool results with a placeholder; `summarize` replaces the oldest messages with a summary written
by the model (a call of its own, with its span and its tokens).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agents.core.spec import ContextSpec
from agents.models.base import ModelClient

__all__ = ["DROPPED", "Fitted", "fit"]

DROPPED = "[tool result dropped to fit the context window]"
_SUMMARY = "Summary of the conversation so far (older messages were summarized): "

# Writes a summary of messages (the runtime's model call, traced and counted).
Summarize = Callable[[list[dict[str, Any]]], Awaitable[str]]


@dataclass(frozen=True)
class Fitted:
    """What was sent, and what was replaced to get there."""

    messages: list[dict[str, Any]]
    dropped: int = 0  # tool results replaced
    summarized: int = 0  # messages replaced by a summary
    tokens: int = 0  # of what is sent


def _head(messages: list[dict[str, Any]]) -> int:
    """Messages never replaced at the start: the system message and the first user message."""
    head = 0
    while head < len(messages) and messages[head].get("role") == "system":
        head += 1
    return min(head + 1, len(messages))


async def fit(
    messages: list[dict[str, Any]],
    spec: ContextSpec,
    model: ModelClient,
    summarize: Summarize,
) -> Fitted:
    """The conversation as it can be sent within `spec.max_tokens` (or the model's window)."""
    if spec.strategy == "none":
        return Fitted(messages)
    limit = spec.max_tokens or model.context_window()
    tokens = model.count_tokens(messages)
    if limit is None or tokens <= limit:
        return Fitted(messages, tokens=tokens)
    head, tail = _head(messages), max(len(messages) - spec.keep_last, 0)
    if spec.strategy == "drop_oldest_tool_results":
        fitted, dropped = list(messages), 0
        for i in range(head, tail):
            if fitted[i].get("role") == "tool" and fitted[i].get("content") != DROPPED:
                fitted[i] = {**fitted[i], "content": DROPPED}
                dropped += 1
                tokens = model.count_tokens(fitted)
                if tokens <= limit:
                    break
        return Fitted(fitted, dropped=dropped, tokens=tokens)
    # Summarize from after the head up to a message a reply may follow (never between a tool
    # call and its results), keeping the latest messages as they are.
    cut = tail
    while cut > head and messages[cut].get("role") == "tool":
        cut -= 1
    if cut <= head:
        return Fitted(messages, tokens=tokens)
    summary = await summarize(messages[head:cut])
    fitted = [*messages[:head], {"role": "user", "content": _SUMMARY + summary}, *messages[cut:]]
    return Fitted(fitted, summarized=cut - head, tokens=model.count_tokens(fitted))
