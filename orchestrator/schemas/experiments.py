"""Experiments over HTTP: `baton eval`'s results of a dataset, kept where their runs are."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.schemas.runs import NUMBER_ONLY

__all__ = [
    "CaseRun",
    "CaseVerdict",
    "EvaluationIn",
    "EvaluationRecorded",
    "EvaluationResultIn",
    "ExperimentIn",
    "ExperimentPageView",
    "ExperimentSummary",
    "ExperimentView",
    "JudgeCallIn",
]

# No NUL character: PostgreSQL's JSON refuses it.
_Name = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\u0000]*$")]
_Text = Annotated[str, Field(max_length=4000, pattern=r"^[^\u0000]*$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# A boolean is one (not 1, not "true"), as JSON Schema says.
_Bool = Annotated[bool, Field(strict=True)]


_Score = Annotated[float, Field(ge=0, le=1), NUMBER_ONLY]
_Tokens = Annotated[int, Field(ge=0, le=10**12), NUMBER_ONLY]
# (Up to 2096: a round bound, which JSON written from a float states exactly.)
_Nanos = Annotated[int, Field(ge=0, le=4 * 10**18), NUMBER_ONLY]


class JudgeCallIn(_Strict):
    """A judge model's call for a rubric (times in Unix nanoseconds)."""

    model: _Name
    input_tokens: _Tokens = 0
    output_tokens: _Tokens = 0
    cost_usd: Annotated[float, Field(ge=0, le=1e9), NUMBER_ONLY] | None = None
    started_ns: _Nanos
    ended_ns: _Nanos


class CaseVerdict(_Strict):
    """One expectation of a case, checked against its run."""

    name: _Name
    passed: _Bool
    detail: _Text = ""
    error: _Bool = Field(default=False, description="It could not be checked (a check raised).")
    score: _Score | None = Field(default=None, description="A judge's score, from 0 to 1.")
    judge: JudgeCallIn | None = None


_Label = Annotated[str, Field(pattern="^(pass|fail|error)$")]


class EvaluationResultIn(_Strict):
    """One expectation's outcome, as the GenAI conventions' evaluation result names it."""

    name: _Name
    label: _Label
    score: _Score
    explanation: _Text = ""
    judge: JudgeCallIn | None = None


class EvaluationIn(_Strict):
    """A case's verdicts on a run, to record on the run's trace."""

    dataset: _Name
    case: _Name
    outcome: _Label
    results: list[EvaluationResultIn] = Field(min_length=1, max_length=200)


class EvaluationRecorded(BaseModel):
    """Where an evaluation went: its span in the run's trace (None: the run has no trace)."""

    run_id: str
    span_id: str | None


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
