"""`/v1/experiments`: `baton eval`'s experiments, kept where their runs are, for the UI.

And `/v1/runs/{id}/evaluations`: a case's verdicts on one run, added to the run's trace.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from orchestrator.api.deps import Caller, Run, Service
from orchestrator.schemas import ErrorBody
from orchestrator.schemas.experiments import (
    CaseRun,
    EvaluationIn,
    EvaluationRecorded,
    ExperimentIn,
    ExperimentPageView,
    ExperimentSummary,
    ExperimentView,
)
from tracing.evaluations import EvaluationResult, JudgeCall

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
    found = await service.experiments.latest(dataset, caller, limit)
    return ExperimentPageView(experiments=[ExperimentSummary(**_summary(e)) for e in found])


@router.get(
    "/experiments/{experiment_id}",
    responses={404: {"model": ErrorBody, "description": "No such experiment."}},
)
async def get_experiment(service: Service, caller: Caller, experiment_id: str) -> ExperimentView:
    """An experiment (by its id, or a prefix naming one): each case's run and verdicts."""
    found = await service.experiments.get(experiment_id, caller)
    return ExperimentView(
        **_summary(found),
        dataset_digest=found.dataset_digest,
        results=[CaseRun.model_validate(r) for r in found.results],
    )


@router.post(
    "/experiments",
    status_code=201,
    responses={
        404: {"model": ErrorBody, "description": "A result names a run the caller cannot see."}
    },
)
async def add_experiment(
    service: Service, caller: Caller, experiment: ExperimentIn
) -> ExperimentView:
    """Keep an experiment of runs made here (`baton eval --server` sends its results).

    Each result's run must be one of the caller's tenant's.
    """
    kept = await service.experiments.add(
        experiment.dataset,
        experiment.dataset_digest,
        experiment.config,
        experiment.config_digest,
        [r.model_dump() for r in experiment.results],
        caller,
    )
    return ExperimentView(
        **_summary(kept), dataset_digest=kept.dataset_digest, results=experiment.results
    )


@router.post(
    "/runs/{run_id}/evaluations",
    status_code=201,
    responses={404: {"model": ErrorBody, "description": "No such run."}},
)
async def add_evaluation(
    service: Service, run: Run, evaluation: EvaluationIn
) -> EvaluationRecorded:
    """Record a case's verdicts on the run in its trace (`baton eval --server` sends them).

    One `evaluation {case}` span under the run's root span, a `gen_ai.evaluation.result` event
    per expectation, and a `chat` span per judge model's call; exported like the run's spans.
    """
    results = [
        EvaluationResult(
            name=r.name,
            label=r.label,
            score=r.score,
            explanation=r.explanation,
            judge=JudgeCall(**r.judge.model_dump()) if r.judge is not None else None,
        )
        for r in evaluation.results
    ]
    span_id = await service.evaluations.record(
        run.id,
        dataset=evaluation.dataset,
        case=evaluation.case,
        outcome=evaluation.outcome,
        results=results,
    )
    return EvaluationRecorded(run_id=run.id, span_id=span_id)
