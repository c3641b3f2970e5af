"""`recall`, `remember` and `forget`: an agent's long-term memory tools (`long_term_memory:`).

Items are the run's tenant's, in the namespace the agent's config names; its `{state.key}`
placeholders are filled from the shared state at each call (`users.{state.user_id}`), so one
agent keeps each user's items apart. Each call is a span (`baton.memory remember`, ...) under
the tool's; what the store refuses, and a namespace that cannot be filled, are the tool's
error, which the model reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agents.core.ports import Memory
from agents.core.spec import LongTermMemorySpec
from agents.core.state import State, StateError, fill_instructions
from agents.memory import MemoryItem, MemoryRefused, check_key, check_namespace, searchable
from agents.tools.base import ToolCallContext, ToolOutput
from tracing import attributes as attr
from tracing import memory_span

__all__ = ["MEMORY_TOOL_NAMES", "memory_tools"]

MEMORY_TOOL_NAMES = ("recall", "remember", "forget")


def memory_tools(spec: LongTermMemorySpec, memory: Memory | None) -> list[Any]:
    """The memory tools of an agent (`recall`; and `remember`, `forget` unless read-only)."""
    where = _Where(spec, memory)
    tools: list[Any] = [RecallTool(where, spec.recall_limit)]
    if not spec.read_only:
        tools += [RememberTool(where), ForgetTool(where)]
    return tools


@dataclass(frozen=True)
class _Where:
    """The agent's namespace, and the memory its items are in."""

    spec: LongTermMemorySpec
    memory: Memory | None

    def open(self, ctx: ToolCallContext) -> tuple[Memory, str]:
        """The memory and the namespace for this call (`MemoryRefused` if there is none)."""
        if self.memory is None:
            raise MemoryRefused(
                "long-term memory is kept in the service's run store, which this runtime lacks"
            )
        state = ctx.state or State({}, ctx.run.state_spec, ctx.caller)
        try:
            filled = fill_instructions(
                self.spec.namespace, state.as_dict(), ctx.run.state_spec, "the memory namespace"
            )
        except StateError as exc:
            raise MemoryRefused(str(exc)) from None
        return self.memory, check_namespace(filled)


def _item(item: MemoryItem) -> dict[str, Any]:
    return {"key": item.key, "value": item.value, "namespace": item.namespace}


@dataclass(frozen=True)
class RecallTool:
    """Search long-term memory."""

    where: _Where
    limit: int
    idempotent: bool = True  # it only reads

    @property
    def name(self) -> str:
        """`recall`."""
        return "recall"

    @property
    def description(self) -> str:
        """When to use it, for the model."""
        return (
            "Search your long-term memory (facts kept from earlier conversations) by words; "
            "returns the best-matching items, each with its key and value. An empty query "
            "returns the newest."
        )

    @property
    def parameters(self) -> dict[str, Any]:
        """The words to look for."""
        return {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words the items should contain."}
            },
            "required": ["query"],
            "additionalProperties": False,
        }

    async def call(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolOutput:
        """The items that best match the query, as JSON."""
        query = str(arguments.get("query") or "")
        try:
            memory, namespace = self.where.open(ctx)
            with memory_span("recall", ctx.run.tenant, namespace, query=query) as span:
                found = await memory.recall(ctx.run.tenant, namespace, query, self.limit)
                span.set_attribute(attr.BATON_MEMORY_FOUND, len(found))
        except MemoryRefused as exc:
            return ToolOutput(f"error: {exc}", is_error=True)
        if not found:
            return ToolOutput("nothing remembered matches")
        return ToolOutput(json.dumps([_item(i) for i in found], ensure_ascii=False))


@dataclass(frozen=True)
class RememberTool:
    """Write an item of long-term memory."""

    where: _Where
    idempotent: bool = True  # the same value under the same key again changes nothing

    @property
    def name(self) -> str:
        """`remember`."""
        return "remember"

    @property
    def description(self) -> str:
        """When to use it, for the model."""
        return (
            "Keep a fact in your long-term memory for later conversations, under a short key "
            "(a key you used before is replaced: keep one fact per key)."
        )

    @property
    def parameters(self) -> dict[str, Any]:
        """A key and a value."""
        return {
            "type": "object",
            "properties": {
                "key": {
                    "type": "string",
                    "pattern": "^[A-Za-z0-9_.@:-]{1,200}$",
                    "description": "A short name for the fact, such as `favourite_city`.",
                },
                "value": {"description": "The fact: text, or any JSON value."},
            },
            "required": ["key", "value"],
            "additionalProperties": False,
        }

    async def call(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolOutput:
        """Write it; say where."""
        key, value = str(arguments.get("key") or ""), arguments.get("value")
        try:
            searchable(check_key(key), value)  # refused here, with why, before the trip
            memory, namespace = self.where.open(ctx)
            with memory_span("remember", ctx.run.tenant, namespace, key):
                await memory.remember(
                    ctx.run.tenant, namespace, key, value, f"run:{ctx.run.run_id}"
                )
        except MemoryRefused as exc:
            return ToolOutput(f"error: {exc}", is_error=True)
        return ToolOutput(f"remembered {key!r}")


@dataclass(frozen=True)
class ForgetTool:
    """Remove an item of long-term memory."""

    where: _Where
    idempotent: bool = True  # removing what is gone changes nothing

    @property
    def name(self) -> str:
        """`forget`."""
        return "forget"

    @property
    def description(self) -> str:
        """When to use it, for the model."""
        return "Remove a fact from your long-term memory by its key (when it is no longer true)."

    @property
    def parameters(self) -> dict[str, Any]:
        """The key."""
        return {
            "type": "object",
            "properties": {"key": {"type": "string", "description": "The fact's key."}},
            "required": ["key"],
            "additionalProperties": False,
        }

    async def call(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolOutput:
        """Remove it; say whether it was there."""
        key = str(arguments.get("key") or "")
        try:
            check_key(key)
            memory, namespace = self.where.open(ctx)
            with memory_span("forget", ctx.run.tenant, namespace, key) as span:
                gone = await memory.forget(ctx.run.tenant, namespace, key)
                span.set_attribute(attr.BATON_MEMORY_FOUND, gone)
        except MemoryRefused as exc:
            return ToolOutput(f"error: {exc}", is_error=True)
        return ToolOutput(f"forgot {key!r}" if gone else f"nothing was remembered as {key!r}")
