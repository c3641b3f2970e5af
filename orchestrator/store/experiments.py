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
    tenant: str = "default"

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
            row.tenant,
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
        tenant: str = "default",
    ) -> Experiment:
        """Keep an experiment (of `tenant`); it gets a new id."""
        experiment = Experiment(
            uuid.uuid4().hex,
            dataset,
            dataset_digest,
            config,
            config_digest,
            time.time(),
            results,
            tenant,
        )
        async with self._sessions.begin() as session:
            session.add(ExperimentRow(**vars(experiment)))
        return experiment

    async def get(self, id_or_prefix: str, tenant: str | None = None) -> Experiment | None:
        """An experiment by its id or a prefix naming one (None: none, or several).

        With `tenant`, only that tenant's.
        """
        query = select(ExperimentRow).where(
            ExperimentRow.id >= id_or_prefix, ExperimentRow.id < id_or_prefix + "~"
        )
        if tenant is not None:
            query = query.where(ExperimentRow.tenant == tenant)
        async with self._sessions() as session:
            rows = list(await session.scalars(query.limit(2)))
        return Experiment.of(rows[0]) if len(rows) == 1 else None

    async def latest(
        self, dataset: str | None = None, tenant: str | None = None, limit: int = 20
    ) -> list[Experiment]:
        """Experiments (of a dataset, of a tenant, if given), newest first."""
        query = select(ExperimentRow).order_by(ExperimentRow.created_at.desc()).limit(limit)
        if dataset is not None:
            query = query.where(ExperimentRow.dataset == dataset)
        if tenant is not None:
            query = query.where(ExperimentRow.tenant == tenant)
        async with self._sessions() as session:
            return [Experiment.of(row) for row in await session.scalars(query)]
