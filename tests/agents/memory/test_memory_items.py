"""Long-term memory items in a real run store (SQLite and PostgreSQL): written, replaced,
searched by text within a namespace and those under it, kept apart per tenant, pruned."""

from __future__ import annotations

import time

import pytest

from agents.memory import MAX_VALUE_CHARS, MemoryRefused
from orchestrator.store import RunStore

pytestmark = pytest.mark.anyio


async def test_items_are_replaced_searched_under_their_namespace_and_kept_per_tenant(
    store_url: str,
) -> None:
    store = await RunStore.open(store_url)
    memory = store.memory
    try:
        item, new = await memory.put("acme", "users.alice", "city", "Lisbon", "run:r1")
        assert new and item.value == "Lisbon" and item.written_by == "run:r1"
        again, new = await memory.put("acme", "users.alice", "city", {"name": "Porto"}, "ops")
        assert not new and again.created_at == item.created_at and again.written_by == "ops"
        await memory.put("acme", "users.alice", "food", "grilled sardines in Porto")
        await memory.put("acme", "users.bob", "city", "Oslo")
        await memory.put("acme", "usersx", "city", "Porto")  # not under `users`
        await memory.put("globex", "users.alice", "city", "Porto")  # another tenant's

        got = await memory.get("acme", "users.alice", "city")
        assert got is not None and got.value == {"name": "Porto"}
        assert await memory.get("globex", "users.bob", "city") is None
        # The words of the query: the item with both first, then the newest of those with one;
        # only this tenant's, under `users`.
        found = await memory.search("acme", "users", "which city is Porto?", 10)
        assert [(i.namespace, i.key, i.score) for i in found] == [
            ("users.alice", "city", 2),
            ("users.bob", "city", 1),
            ("users.alice", "food", 1),
        ]
        # One namespace only; no query: the newest first; a limit.
        newest = await memory.search("acme", "users.alice", "", 1)
        assert [(i.key, i.score) for i in newest] == [("food", None)]
        assert await memory.search("acme", "users", "zebra", 10) == []
        # A query is plain text (`_` stands for no other character).
        assert await memory.search("acme", "users", "sardine_", 10) == []

        assert await memory.delete("acme", "users.bob", "city")
        assert not await memory.delete("acme", "users.bob", "city")
        assert await memory.count("acme") == 3 and await memory.count("globex") == 1
        # What is not written for a while goes; what was written since stays.
        assert await memory.prune(time.time() - 3600) == 0
        assert await memory.prune(time.time() + 1) == 4
    finally:
        await store.close()


async def test_names_and_values_memory_does_not_take_are_refused_saying_why(
    store_url: str,
) -> None:
    store = await RunStore.open(store_url)
    try:
        with pytest.raises(MemoryRefused, match="namespace 'users/alice'"):
            await store.memory.put("acme", "users/alice", "city", "Lisbon")
        with pytest.raises(MemoryRefused, match="key 'my city'"):
            await store.memory.put("acme", "users", "my city", "Lisbon")
        with pytest.raises(MemoryRefused, match=f"at most {MAX_VALUE_CHARS}"):
            await store.memory.put("acme", "users", "essay", "x" * MAX_VALUE_CHARS)
        with pytest.raises(MemoryRefused, match="is not JSON"):
            await store.memory.put("acme", "users", "nan", float("nan"))
        assert await store.memory.count("acme") == 0
    finally:
        await store.close()
