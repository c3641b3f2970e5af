"""Experiments over HTTP: `baton eval`'s results of a dataset, kept where their runs are."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.schemas.runs import NUMBER_ONLY

__all__ = [
    "CaseRun",
    "CaseVerdict",
    "ExperimentIn",
    "ExperimentPageView",
    "ExperimentSummary",
    "ExperimentView",
]

# No NUL character: PostgreSQL's JSON refuses it.
_Name = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\u0000]*$")]
_Text = Annotated[str, Field(max_length=4000, pattern=r"^[^\u0000]*$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# A boolean is one (not 1, not "true"), as JSON Schema says.
_Bool = Annotated[bool, Field(strict=True)]


class CaseVerdict(_Strict):
    """One expectation of a case, checked against its run."""

    name: _Name
    passed: _Bool
    detail: _Text = ""
    error: _Bool = Field(default=False, description="It could not be checked (a check raised).")


class CaseRun(_Strict):
    """One run of a case (`repeat`: which of its repeats) and its verdicts."""

    case: _Name
    repeat: Annotated[int, Field(ge=0, le=1000), NUMBER_ONLY] = 0
    outcome: str = Field(pattern="^(pass|fail|error)$")
    error: _Text | None = None
    run_id: str | None = Field(default=None, pattern="^[0-9a-f]{32}$")
    # Bounded so that an experiment's sums stay numbers.
    cost_usd: Annotated[float, Field(ge=0, le=1e9), NUMBER_ONLY] | None = None
    duration_s: Annotated[float, Field(ge=0, le=1e9), NUMBER_ONLY] | None = None
    tokens: Annotated[int, Field(ge=0, le=10**15), NUMBER_ONLY] | None = None
    live_calls: list[_Name] = Field(
        default_factory=list,
        max_length=1000,
        description="The agents of the model calls made live (a replayed case's others came "
        "from its record).",
    )
    verdicts: list[CaseVerdict] = Field(default_factory=list, max_length=1000)


class ExperimentIn(_Strict):
    """An experiment as `baton eval --server` sends it."""

    dataset: _Name
    dataset_digest: str = Field(pattern="^[0-9a-f]{64}$")
    config: _Name
    config_digest: str = Field(min_length=1, max_length=64)
    # (As many as fit the request body's limit, each at its smallest.)
    results: list[CaseRun] = Field(min_length=1, max_length=2000)


class ExperimentSummary(BaseModel):
    """An experiment in figures."""

    id: str
    dataset: str
    config: str
    config_digest: str
    created_at: float = Field(description="Unix seconds.")
    passed: int
    total: int
    pass_rate: float
    cost_usd: float
    p50_s: float = Field(description="The median latency of its runs.")
    p95_s: float


class ExperimentView(ExperimentSummary):
    """An experiment, each case's run and verdicts."""

    dataset_digest: str
    results: list[CaseRun]


class ExperimentPageView(BaseModel):
    """Experiments, newest first."""

    experiments: list[ExperimentSummary]
