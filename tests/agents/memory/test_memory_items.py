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


def test_baton_check_holds_a_memory_namespace_to_its_form_and_the_states_schema() -> None:
    from agents.core.errors import ConfigError
    from orchestrator.system.config import parse_config

    team = """
state:
  schema: {type: object, additionalProperties: false, properties: {user: {type: string}}}
agents:
  - name: keeper
    long_term_memory: {namespace: "users/{state.user}.{state.team}"}
    tools: [configs.tools:calculate]
"""
    with pytest.raises(ConfigError) as info:
        parse_config(team, "team.yaml")
    errors = [str(i) for i in info.value.issues if i.severity == "error"]
    assert len(errors) == 2 and all("long_term_memory.namespace" in e for e in errors), errors
    assert "namespace 'users/x.x'" in errors[0]
    assert "{state.team}: the state's schema has no key 'team'" in errors[1]
    # A tool of its own named as a memory tool collides with it; another agent may have one.
    fine = team.replace("users/{state.user}.{state.team}", "users.{state.user}")
    with pytest.raises(ConfigError, match="collides with the built-in memory tools"):
        parse_config(fine.replace("configs.tools:calculate", "tests.testkit:recall"), "team.yaml")
    other = "  - {name: helper, tools: [tests.testkit:recall]}\n"
    assert parse_config(fine + other, "team.yaml").config.agents[1].name == "helper"
    [warning] = [str(i) for i in parse_config(fine, "team.yaml").warnings]
    assert "{state.user} has no default in the state's schema" in warning
