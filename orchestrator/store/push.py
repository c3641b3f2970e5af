"""The webhooks clients register to hear of a run's A2A task updates (push notifications)."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from orchestrator.store.tables import PushConfigRow

__all__ = ["PushConfigs"]


class PushConfigs:
    """A run's push configs, each kept as its client gave it, readable by its owner only."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def put(self, run_id: str, config_id: str, owner: str, config: dict[str, Any]) -> None:
        """Keep a config (a config of the same id for the run is replaced)."""
        async with self._sessions.begin() as session:
            await session.execute(
                delete(PushConfigRow).where(
                    PushConfigRow.run_id == run_id, PushConfigRow.id == config_id
                )
            )
            session.add(
                PushConfigRow(
                    run_id=run_id,
                    id=config_id,
                    owner=owner,
                    config=config,
                    created_at=time.time(),
                )
            )

    async def of(self, run_id: str, owner: str | None = None) -> list[dict[str, Any]]:
        """A run's configs, oldest first (`owner`: only theirs; None: everyone's)."""
        query = select(PushConfigRow).where(PushConfigRow.run_id == run_id)
        if owner is not None:
            query = query.where(PushConfigRow.owner == owner)
        async with self._sessions() as session:
            rows = await session.scalars(query.order_by(PushConfigRow.created_at))
            return [row.config for row in rows]

    async def remove(self, run_id: str, owner: str, config_id: str | None = None) -> int:
        """Forget a config of the owner's (None: all of them); how many there were."""
        query = delete(PushConfigRow).where(
            PushConfigRow.run_id == run_id, PushConfigRow.owner == owner
        )
        if config_id is not None:
            query = query.where(PushConfigRow.id == config_id)
        async with self._sessions.begin() as session:
            done = await session.execute(query)
            return int(done.rowcount)  # type: ignore[attr-defined]
