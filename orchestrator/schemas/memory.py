"""The bodies of `/v1/memory`: long-term memory items (`agents.memory`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agents.memory import MemoryItem

__all__ = ["MemoryItem", "MemorySearchView", "MemoryWrite"]


class MemoryWrite(BaseModel):
    """The body of `PUT /v1/memory/{namespace}/{key}`."""

    model_config = ConfigDict(extra="forbid")

    value: Any = Field(description="Any JSON value (at most 64 KiB as JSON).")


class MemorySearchView(BaseModel):
    """The items of a namespace and those under it, best matches first."""

    namespace: str
    query: str = Field(description="The words searched for (empty: the newest items).")
    items: list[MemoryItem]
