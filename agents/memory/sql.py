"""Memory items in the run store's `memory` table (SQLite or PostgreSQL), over SQLAlchemy.

Used by the ledger (the agents' tools reach the store through it, so that SQLite sees the
writers it already has) and by the service's routes. The table is the run store's
(`orchestrator.store.tables`, created by its migrations); this module names its columns only.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import JSON, Float, String, Text, column, delete, func, or_, select, table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from agents.memory.items import (
    MemoryItem,
    check_key,
    check_namespace,
    rank,
    search_words,
    searchable,
)

__all__ = ["MemoryItems"]

_MEMORY = table(
    "memory",
    column("tenant", String),
    column("namespace", String),
    column("key", String),
    column("value", JSON),
    column("text", Text),
    column("created_at", Float),
    column("updated_at", Float),
    column("written_by", String),
)
_ITEM = [c for c in _MEMORY.columns if c.name not in ("tenant", "text")]
# Items a search reads before ranking (those with a query word, newest first).
_CANDIDATES = 500


class MemoryItems:
    """One store's memory items: written, read, searched and removed per tenant."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def put(
        self, tenant: str, namespace: str, key: str, value: Any, written_by: str | None = None
    ) -> tuple[MemoryItem, bool]:
        """Write an item (replacing the key's value); it, and whether it is new."""
        text = searchable(check_key(key), value)
        check_namespace(namespace)
        now = time.time()
        dialect: Any = postgresql if self._engine.dialect.name == "postgresql" else sqlite
        changed = {"value": value, "text": text, "updated_at": now, "written_by": written_by}
        row = {"tenant": tenant, "namespace": namespace, "key": key, "created_at": now, **changed}
        insert = dialect.insert(_MEMORY).values(**row)
        upsert = insert.on_conflict_do_update(
            index_elements=["tenant", "namespace", "key"],
            set_=changed,
        ).returning(_MEMORY.c.created_at)
        async with self._engine.begin() as connection:
            created = float((await connection.execute(upsert)).scalar_one())
        item = MemoryItem(namespace=namespace, key=key, value=value, created_at=created,
                          updated_at=now, written_by=written_by)  # fmt: skip
        return item, created == now

    async def get(self, tenant: str, namespace: str, key: str) -> MemoryItem | None:
        """An item, or None."""
        query = select(*_ITEM).where(*self._at(tenant, namespace, key))
        async with self._engine.connect() as connection:
            row = (await connection.execute(query)).first()
        return MemoryItem.model_validate(row._mapping) if row is not None else None

    async def delete(self, tenant: str, namespace: str, key: str) -> bool:
        """Remove an item; whether there was one."""
        async with self._engine.begin() as connection:
            done = await connection.execute(
                delete(_MEMORY).where(*self._at(tenant, namespace, key))
            )
        return bool(done.rowcount)

    async def search(
        self, tenant: str, namespace: str, query: str = "", limit: int = 10
    ) -> list[MemoryItem]:
        """Items of a namespace and those under it: with the most of the query's words first.

        Without a query (or one with no word), the newest first.
        """
        check_namespace(namespace)
        inside = or_(
            _MEMORY.c.namespace == namespace,
            _MEMORY.c.namespace.startswith(f"{namespace}.", autoescape=True),
        )
        words = search_words(query)
        found = select(*_ITEM, _MEMORY.c.text).where(_MEMORY.c.tenant == tenant, inside)
        if words:
            found = found.where(or_(*(_MEMORY.c.text.contains(w, autoescape=True) for w in words)))
        found = found.order_by(_MEMORY.c.updated_at.desc()).limit(max(limit, _CANDIDATES))
        async with self._engine.connect() as connection:
            rows = (await connection.execute(found)).all()
        items = [(MemoryItem.model_validate(r._mapping), str(r.text)) for r in rows]
        return rank(items, words, limit)

    async def count(self, tenant: str) -> int:
        """How many items a tenant has."""
        query = select(func.count()).select_from(_MEMORY).where(_MEMORY.c.tenant == tenant)
        async with self._engine.connect() as connection:
            return int((await connection.execute(query)).scalar_one())

    async def prune(self, older_than: float) -> int:
        """Remove the items not written since `older_than` (Unix seconds); how many."""
        async with self._engine.begin() as connection:
            done = await connection.execute(
                delete(_MEMORY).where(_MEMORY.c.updated_at < older_than)
            )
        return int(done.rowcount or 0)

    @staticmethod
    def _at(tenant: str, namespace: str, key: str) -> tuple[Any, ...]:
        return (
            _MEMORY.c.tenant == tenant,
            _MEMORY.c.namespace == namespace,
            _MEMORY.c.key == key,
        )
