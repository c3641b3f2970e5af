"""`baton eval`'s experiments: a dataset run through a config, each case's run and verdicts."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from orchestrator.store.tables import ExperimentRow

__all__ = ["Experiment", "Experiments"]


@dataclass(frozen=True)
class Experiment:
    """One evaluation of a dataset, as kept."""

    id: str
    dataset: str
    dataset_digest: str
    config: str
    config_digest: str
    created_at: float
    results: list[dict[str, Any]]

    @classmethod
    def of(cls, row: ExperimentRow) -> Experiment:
        """The experiment a row keeps."""
        return cls(
            row.id,
            row.dataset,
            row.dataset_digest,
            row.config,
            row.config_digest,
            row.created_at,
            row.results,
        )


class Experiments:
    """The store's experiments: kept whole, found by id or by a prefix of it."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def add(
        self,
        dataset: str,
        dataset_digest: str,
        config: str,
        config_digest: str,
        results: list[dict[str, Any]],
    ) -> Experiment:
        """Keep an experiment; it gets a new id."""
        experiment = Experiment(
            uuid.uuid4().hex, dataset, dataset_digest, config, config_digest, time.time(), results
        )
        async with self._sessions.begin() as session:
            session.add(ExperimentRow(**vars(experiment)))
        return experiment

    async def get(self, id_or_prefix: str) -> Experiment | None:
        """An experiment by its id or a prefix naming one (None: none, or several)."""
        query = select(ExperimentRow).where(
            ExperimentRow.id >= id_or_prefix, ExperimentRow.id < id_or_prefix + "~"
        )
        async with self._sessions() as session:
            rows = list(await session.scalars(query.limit(2)))
        return Experiment.of(rows[0]) if len(rows) == 1 else None

    async def latest(self, dataset: str, limit: int = 20) -> list[Experiment]:
        """A dataset's experiments, newest first."""
        query = (
            select(ExperimentRow)
            .where(ExperimentRow.dataset == dataset)
            .order_by(ExperimentRow.created_at.desc())
            .limit(limit)
        )
        async with self._sessions() as session:
            return [Experiment.of(row) for row in await session.scalars(query)]
