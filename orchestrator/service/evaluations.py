"""Evaluations: `baton eval`'s verdicts on the traces of the runs they judged, and experiments.

Verdicts are kept with the run's spans in the store (so the run's trace page shows them) and
sent to the OTLP backend like the run's own spans were. An experiment is a dataset's cases run
once, each case's run with its verdicts, kept for comparison with others.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrator.access import LOCAL, Access
from orchestrator.errors import ExperimentNotFound, RunNotFound
from orchestrator.service.versions import Versions
from orchestrator.store import RunStore
from orchestrator.store.experiments import Experiment
from tracing import attributes as attr
from tracing.evaluations import EvaluationResult, evaluation_spans

__all__ = ["Experiments", "RunEvaluations"]


class RunEvaluations:
    """Adds evaluations to finished runs' traces."""

    def __init__(self, versions: Versions, store: RunStore) -> None:
        self._versions = versions
        self._store = store

    async def record(
        self,
        run_id: str,
        *,
        dataset: str,
        case: str,
        outcome: str,
        results: Sequence[EvaluationResult],
    ) -> str | None:
        """Add one evaluation of the run (seen by its caller) to its trace.

        Returns the evaluation span's id; None when the run has no trace (its tracing is off).
        """
        spans = await self._store.spans(run_id)
        roots = [s for s in spans if s["name"] == attr.WORKFLOW_SPAN]
        if not roots:
            return None
        engine = self._versions.engine
        made = evaluation_spans(
            roots[0],
            dataset=dataset,
            case=case,
            outcome=outcome,
            results=results,
            redact=engine.redactor,
            explain=engine.system.config.tracing.capture_content,
        )
        await self._store.add_spans(run_id, made)
        await engine.export_spans(made)
        return made[0]["span_id"]


class Experiments:
    """The experiments kept here, each its tenant's."""

    def __init__(self, store: RunStore) -> None:
        self._store = store

    async def latest(
        self, dataset: str | None = None, viewer: Access = LOCAL, limit: int = 20
    ) -> list[Experiment]:
        """The viewer's experiments (of `dataset`, if given), newest first."""
        return await self._store.experiments.latest(dataset, viewer.tenant_filter, limit)

    async def get(self, experiment_id: str, viewer: Access = LOCAL) -> Experiment:
        """An experiment by its id or a prefix naming one, if the viewer may see it.

        Raises:
            ExperimentNotFound: none (or another tenant's), or the prefix names several.
        """
        found = await self._store.experiments.get(experiment_id, viewer.tenant_filter)
        if found is None:
            raise ExperimentNotFound(experiment_id)
        return found

    async def add(
        self,
        dataset: str,
        dataset_digest: str,
        config: str,
        config_digest: str,
        results: list[dict[str, Any]],
        caller: Access = LOCAL,
    ) -> Experiment:
        """Keep an experiment of the caller's tenant; each case's run must be one it may see.

        Raises:
            RunNotFound: a result names a run the caller may not see (or none).
        """
        for result in results:
            run_id = result.get("run_id")
            if run_id is None:
                continue
            run = await self._store.get(run_id)
            if run is None or not caller.sees(run.tenant):
                raise RunNotFound(run_id)
        return await self._store.experiments.add(
            dataset, dataset_digest, config, config_digest, results, caller.tenant
        )
