"""What a memory item is, which names it may have, and how a text search ranks items."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, Field

__all__ = [
    "KEY_PATTERN",
    "MAX_VALUE_CHARS",
    "NAMESPACE_PATTERN",
    "MemoryItem",
    "MemoryRefused",
    "check_key",
    "check_namespace",
    "rank",
    "search_words",
    "searchable",
]

# Safe in a URL's path as they are; dots in a namespace make its levels.
NAMESPACE_PATTERN = r"^[A-Za-z0-9_@:-]{1,64}(\.[A-Za-z0-9_@:-]{1,64}){0,7}$"
KEY_PATTERN = r"^[A-Za-z0-9_.@:-]{1,200}$"
MAX_VALUE_CHARS = 65_536  # an item's value, as JSON
_NAMESPACE = re.compile(NAMESPACE_PATTERN)
_KEY = re.compile(KEY_PATTERN)
_WORD = re.compile(r"\w{2,}")


class MemoryRefused(ValueError):
    """A namespace, key or value memory does not take (the message names which and why)."""


class MemoryItem(BaseModel):
    """One remembered value."""

    namespace: str = Field(description="Its namespace (dots make levels: `users.alice`).")
    key: str
    value: Any = Field(description="Any JSON value.")
    created_at: float = Field(description="When it was first written (Unix seconds).")
    updated_at: float = Field(description="When it was last written (Unix seconds).")
    written_by: str | None = Field(
        default=None, description="Who wrote it last: `run:ID` (an agent), or a key's name."
    )
    score: int | None = Field(
        default=None, description="In a search: how many of the query's words it has."
    )


def check_namespace(namespace: str) -> str:
    """The namespace, if memory takes it (else `MemoryRefused`, saying what it takes)."""
    if not _NAMESPACE.match(namespace):
        raise MemoryRefused(
            f"namespace {namespace!r}: up to 8 levels joined by dots, each 1 to 64 of A-Z, a-z, "
            "0-9, _ @ : -"
        )
    return namespace


def check_key(key: str) -> str:
    """The key, if memory takes it (else `MemoryRefused`)."""
    if not _KEY.match(key):
        raise MemoryRefused(f"key {key!r}: 1 to 200 of A-Z, a-z, 0-9, _ . @ : -")
    return key


def searchable(key: str, value: Any) -> str:
    """What a search looks in: the key and the value's JSON, lower-case.

    Raises `MemoryRefused` for a value that is not JSON, or longer than `MAX_VALUE_CHARS`.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise MemoryRefused(f"the value of {key!r} is not JSON: {exc}") from None
    if len(text) > MAX_VALUE_CHARS:
        raise MemoryRefused(
            f"the value of {key!r} is {len(text)} characters as JSON; at most {MAX_VALUE_CHARS}"
        )
    return f"{key} {text}".lower()


def search_words(query: str) -> list[str]:
    """The words of a query a search matches (lower-case, two characters or more, each once)."""
    return list(dict.fromkeys(_WORD.findall(query.lower())))


def rank(found: list[tuple[MemoryItem, str]], words: list[str], limit: int) -> list[MemoryItem]:
    """The best `limit` of items with their searchable text: most words first, then newest."""
    scored = []
    for item, text in found:
        score = sum(1 for w in words if w in text)
        if score or not words:
            scored.append(item.model_copy(update={"score": score if words else None}))
    scored.sort(key=lambda i: (-(i.score or 0), -i.updated_at))
    return scored[:limit]
