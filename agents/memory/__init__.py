"""Long-term memory: items kept across runs and threads, per tenant and namespace.

As LangGraph's Store and ADK's memory service: an item is a JSON value under a key in a
namespace (`users.alice.prefs`: dots make a hierarchy), of one tenant, searchable by text.
Agents reach it with the built-in `remember`, `recall` and `forget` tools
(`agents.tools.memory`), people and programs over HTTP (`/v1/memory`). The items live in the run
store's `memory` table (`agents.memory.sql`, imported where used: it brings SQLAlchemy).
"""

from agents.memory.items import (
    KEY_PATTERN,
    MAX_VALUE_CHARS,
    NAMESPACE_PATTERN,
    MemoryItem,
    MemoryRefused,
    check_key,
    check_namespace,
    rank,
    search_words,
    searchable,
)

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
