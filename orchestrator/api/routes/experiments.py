"""`/v1/experiments`: `baton eval`'s experiments, kept where their runs are, for the UI."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from orchestrator.api.deps import Caller, Service
from orchestrator.errors import ExperimentNotFound
from orchestrator.schemas import ErrorBody
from orchestrator.schemas.experiments import (
    CaseRun,
    ExperimentIn,
    ExperimentPageView,
    ExperimentSummary,
    ExperimentView,
)

__all__ = ["router"]

router = APIRouter(tags=["experiments"])


def _summary(experiment: Any) -> dict[str, Any]:
    from orchestrator.evals.experiment import summary  # (the evaluations' stack, only here)

    figures = summary(experiment.results)
    return {
        "id": experiment.id,
        "dataset": experiment.dataset,
        "config": experiment.config,
        "config_digest": experiment.config_digest,
        "created_at": experiment.created_at,
        "passed": figures.passed,
        "total": figures.total,
        "pass_rate": figures.pass_rate,
        "cost_usd": figures.cost_usd,
        "p50_s": figures.p50_s,
        "p95_s": figures.p95_s,
    }


@router.get("/experiments")
async def list_experiments(
    service: Service,
    caller: Caller,
    dataset: Annotated[
        str | None, Query(max_length=255, description="Only this dataset's.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> ExperimentPageView:
    """The experiments `baton eval` kept here (the caller's tenant's), newest first."""
    found = await service.store.experiments.latest(dataset, caller.tenant_filter, limit)
    return ExperimentPageView(experiments=[ExperimentSummary(**_summary(e)) for e in found])


@router.get(
    "/experiments/{experiment_id}",
    responses={404: {"model": ErrorBody, "description": "No such experiment."}},
)
async def get_experiment(service: Service, caller: Caller, experiment_id: str) -> ExperimentView:
    """An experiment (by its id, or a prefix naming one): each case's run and verdicts."""
    found = await service.store.experiments.get(experiment_id, caller.tenant_filter)
    if found is None:
        raise ExperimentNotFound(experiment_id)
    return ExperimentView(
        **_summary(found),
        dataset_digest=found.dataset_digest,
        results=[CaseRun.model_validate(r) for r in found.results],
    )


@router.post("/experiments", status_code=201)
async def add_experiment(
    service: Service, caller: Caller, experiment: ExperimentIn
) -> ExperimentView:
    """Keep an experiment of runs made here (`baton eval --server` sends its results)."""
    kept = await service.store.experiments.add(
        experiment.dataset,
        experiment.dataset_digest,
        experiment.config,
        experiment.config_digest,
        [r.model_dump() for r in experiment.results],
        caller.tenant,
    )
    return ExperimentView(
        **_summary(kept), dataset_digest=kept.dataset_digest, results=experiment.results
    )
