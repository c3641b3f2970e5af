"""Runs in the HTTP API: what a submission takes, and a run as it is answered.

Its view, a page of runs, its trace, its diagram, a comparison, a fork's request.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from agents.core.messages import Refusal, RunStatus, Usage
from agents.core.storable import nul_refusal
from orchestrator.engine.submission import Submission
from orchestrator.store import ForkPoint, RunPage, StoredRun
from tracing import SpanRecord
from tracing.tree import SpanTree
from tracing.tree import span_forest as forest

__all__ = [
    "MAX_DEADLINE_S",
    "MAX_TASK_CHARS",
    "NUMBER_ONLY",
    "ComparisonView",
    "DelegationNode",
    "DiagramView",
    "ForkRequest",
    "Metadata",
    "RunLinks",
    "RunPageView",
    "RunRequest",
    "RunSubmission",
    "RunView",
    "SpanNode",
    "TraceView",
    "metadata_field",
    "run_links",
    "run_page_view",
    "run_view",
    "span_forest",
]


MAX_TASK_CHARS = 100_000


MAX_DEADLINE_S = 86_400.0


def _number_only(value: Any) -> Any:
    # JSON Schema's `integer` and `number` admit 5.0 but not `true` or "5", which pydantic's
    # lax mode would turn into numbers.
    if isinstance(value, bool | str):
        raise ValueError("must be a JSON number")
    return value


# (The bounds go before the validator: after it, pydantic leaves them out of the JSON schema.)
NUMBER_ONLY = BeforeValidator(_number_only)


# Metadata values: what every store keeps as JSON as it was given (no NUL, no NaN).
_META_KEY = r"^[A-Za-z0-9_.:-]+$"
_MetaKey = Annotated[str, Field(min_length=1, max_length=64, pattern=_META_KEY)]
# (Strict: a string past its length is refused, not read as the number it spells.)
_MetaValue = (
    Annotated[str, Field(strict=True, max_length=1000, pattern=r"^[^\u0000]*$")]
    | Annotated[int, Field(strict=True, ge=-(2**53), le=2**53)]
    | Annotated[float, Field(strict=True, allow_inf_nan=False)]
    | Annotated[bool, Field(strict=True)]
    | None
)
Metadata = dict[_MetaKey, _MetaValue]


def metadata_field(of: str) -> Any:
    """Up to 32 named values kept with `of`, as given."""
    return Field(
        default_factory=dict,
        max_length=32,
        description=f"Up to 32 values to keep with {of}.",
        # Said in the schema as the validation does it: names of that shape, no others.
        json_schema_extra={
            "propertyNames": {"minLength": 1, "maxLength": 64, "pattern": _META_KEY},
            "additionalProperties": False,
        },
    )


class RunRequest(BaseModel):
    """A task to run, and how."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(
        min_length=1,
        max_length=MAX_TASK_CHARS,
        pattern=r"\S",
        description="What the team should do (not blank; no U+0000).",
        # The document says both rules (the NUL one is checked below, with its place); the
        # one character that is not blank is not NUL either (`\S` alone would admit one).
        json_schema_extra={"pattern": "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"},
    )
    agent: str | None = Field(
        default=None,
        description="The entry agent; `auto` routes by capabilities; unset: the config's entry.",
    )

    @field_validator("task")
    @classmethod
    def _no_nul(cls, task: str) -> str:
        if refusal := nul_refusal(task, "the task"):
            raise ValueError(refusal)
        return task

    token_budget: Annotated[int, Field(ge=1, le=10**9), NUMBER_ONLY] | None = Field(
        default=None, description="Tokens the whole delegation tree may spend."
    )
    deadline_s: Annotated[float, Field(gt=0, le=MAX_DEADLINE_S), NUMBER_ONLY] | None = Field(
        default=None, description="Wall-clock limit of the run, in seconds."
    )
    stream: Annotated[bool, Field(strict=True)] = Field(
        default=False,
        description="Models stream their output: the events carry `model_delta` text as it is "
        "produced (not stored; the record keeps whole messages).",
    )
    input: Any = Field(
        default=None,
        description="Structured input for the entry agent (JSON), beside the task: checked "
        "against its `input_schema` (422 naming the field).",
    )
    metadata: Metadata = metadata_field("the run (who it is for, a ticket number...)")

    def submission(self) -> Submission:
        """The request as the run service takes it (its fields are the request's own)."""
        return Submission(**self.model_dump(include=set(RunRequest.model_fields)))


class RunSubmission(RunRequest):
    """The body of `POST /v1/runs` (the OpenAPI document lists the system's agents)."""


class RunLinks(BaseModel):
    """Where to follow, trace and draw a run, and what may be done with it as it stands."""

    self: str
    events: str
    trace: str
    diagram: str
    cancel: str | None = Field(description="While the run goes on (null once it ended).")
    resume: str | None = Field(
        description="Once it was interrupted or failed (null otherwise: nothing to resume)."
    )


class DelegationNode(BaseModel):
    """One agent invocation of a run, with the invocations it delegated to."""

    agent: str
    status: RunStatus
    output: str | None = None
    error: str | None = None
    usage: Usage = Field(default_factory=Usage, description="This invocation's own model calls.")
    steps: int = Field(default=0, description="Model steps it took.")
    started_at: float = Field(default=0.0, description="Unix seconds.")
    duration_s: float = 0.0
    call_id: str | None = Field(
        default=None, description="The caller's tool call that delegated it (None: the entry)."
    )
    actor: str | None = Field(default=None, description="The Ray actor (host replica) it ran in.")
    lost: bool = Field(
        default=False, description="Its actor died and took its record: its caller made this node."
    )
    answered_by: str | None = Field(
        default=None, description="The agent that took the conversation over and answered."
    )
    refusals: list[Refusal] = Field(
        default_factory=list, description="Delegations the guard refused it (depth, cycle, ...)."
    )
    children: list[DelegationNode] = Field(default_factory=list)


class RunView(BaseModel):
    """A run: what was asked, where it stands, and how it ended."""

    id: str
    status: RunStatus
    task: str
    requested_agent: str | None
    entry_agent: str | None
    routing: dict[str, Any] | None
    output: str | None
    output_json: Any = Field(default=None, description="The answer parsed (`output_schema`).")
    error: str | None
    usage: Usage
    created_at: float = Field(description="Unix seconds.")
    started_at: float | None
    finished_at: float | None
    duration_s: float | None
    cancel_requested: bool
    resumes: int = Field(
        default=0,
        description="How many times the run resumed from its step log after an interruption.",
    )
    replay_of: str | None = Field(
        default=None,
        description="The run whose step log this run replays (no model calls) or, for a fork, "
        "follows until its requests differ (the config changed) and then goes on live.",
    )
    fork: bool = False
    fork_from: ForkPoint | None = Field(
        default=None,
        description="For a fork from a chosen step: that step (everything before it was taken "
        "from the original's record, and the fork went on live from it).",
    )
    tree: DelegationNode | None = Field(description="The delegation tree, once the run ended.")
    state: dict[str, Any] | None = Field(
        default=None,
        description="The shared state it ended with (its agents' writes; None: it has none).",
    )
    thread_id: str | None = Field(
        default=None, description="The thread (conversation) the run is a turn of."
    )
    tenant: str = Field(default="default", description="Whose run it is (its keys see it).")
    submitted_by: str | None = Field(
        default=None, description="Who submitted it: an API key's name (or `ip:` address)."
    )
    cancelled_by: str | None = Field(
        default=None, description="Who asked it to stop, when someone did (a key's name)."
    )
    version: str | None = Field(
        default=None,
        description="The version of the team it runs on (that finished it): the config's "
        "`release` label and digest (`v2+3f9a0c1d2e`), or the digest alone. A run resumed "
        "after a new version rolled in goes on with that one.",
    )
    began_on: str | None = Field(
        default=None,
        description="The version of the team it began on (another than `version` only for a "
        "run resumed on a newer version).",
    )
    input: Any = Field(default=None, description="Its structured input, as submitted.")
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="The values kept with it, as submitted."
    )
    links: RunLinks


class RunPageView(BaseModel):
    """A page of runs, newest first."""

    runs: list[RunView]
    total: int
    limit: int
    offset: int
    usage: Usage = Field(
        default_factory=Usage, description="Tokens, model calls and cost of every matching run."
    )


class SpanNode(BaseModel):
    """A span and the spans under it."""

    span_id: str
    parent_span_id: str | None
    name: str
    kind: str
    start_ns: int
    end_ns: int | None = Field(description="None while the span is open (the run goes on).")
    duration_ms: float | None
    status: str
    status_message: str | None
    attributes: dict[str, Any]
    events: list[dict[str, Any]]
    resource: dict[str, Any]
    children: list[SpanNode]


class DiagramView(BaseModel):
    """A run's sequence diagram (one page of it), and the span behind each numbered arrow."""

    run_id: str
    status: RunStatus
    detail: Literal["agents", "tools", "full"]
    mermaid: str = Field(description="Mermaid sequence diagram text.")
    arrows: list[str] = Field(description="Span id of arrow n at index n - 1.")
    page: int
    pages: int
    folded: list[str] = Field(description="What the diagram drew once for many, or paged.")


class ComparisonView(BaseModel):
    """Where a run's steps differ from another's (a fork from its original, say), in words."""

    run_id: str
    other: str = Field(description="The run compared with: its steps are the ones before.")
    same: bool = Field(description="Both took the same steps (timings and tokens aside).")
    differences: list[str] = Field(
        description='One sentence a difference: "writer, step 1: called word_count, now '
        'answers directly".'
    )


class TraceView(BaseModel):
    """A run's spans as trees."""

    run_id: str
    trace_id: str | None
    span_count: int
    spans: list[SpanNode] = Field(description="Root spans, each with its subtree.")


class ForkRequest(BaseModel):
    """Where a fork goes on live (without one: from the first step whose request differs)."""

    model_config = ConfigDict(extra="forbid")

    from_span: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{16}$",
        description="A span of the run (a model call, a tool call, an agent; as in its trace "
        "or a diagram arrow's `span_id`): the fork goes on live from that step, and what it "
        "delegates from there on runs live too.",
    )
    version: str | None = Field(
        default=None,
        max_length=200,
        description="The version of the team the fork runs on, one running here (`GET "
        "/v1/service` lists them); without one, the newest.",
    )


def _structured(run: StoredRun) -> Any:
    """The answer as JSON, if the agent that gave it (as the run's config had it) declares one."""
    agents = {a.get("name"): a for a in (run.config or {}).get("agents") or []}
    answered = (run.tree or {}).get("answered_by") or run.entry_agent  # after hand-offs
    declared = agents.get(answered, {}).get("output_schema")
    if run.status != RunStatus.SUCCEEDED or not declared or run.output is None:
        return None
    try:
        return json.loads(run.output)
    except json.JSONDecodeError:  # an answer from before the schema was declared
        return None


def run_view(run: StoredRun, prefix: str = "/v1") -> RunView:
    """A stored run as the API answers it, with links under `prefix`."""
    return RunView(
        id=run.id,
        status=run.status,
        task=run.task,
        requested_agent=run.agent,
        entry_agent=run.entry_agent,
        routing=run.routing,
        output=run.output,
        output_json=_structured(run),
        error=run.error,
        usage=run.usage,
        created_at=run.created_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        duration_s=run.duration_s,
        cancel_requested=run.cancel_requested,
        resumes=run.resumes,
        replay_of=run.replay_of,
        fork=run.fork,
        fork_from=run.fork_from,
        tree=DelegationNode.model_validate(run.tree) if run.tree else None,
        state=run.state,
        thread_id=run.thread_id,
        tenant=run.tenant,
        submitted_by=run.submitted_by,
        cancelled_by=run.cancelled_by,
        version=run.version,
        began_on=run.began_on,
        input=(run.options or {}).get("input"),
        metadata=(run.options or {}).get("metadata") or {},
        links=run_links(run, prefix),
    )


# The runs that resume (`POST .../resume`): cut off, or ended by a failure.
_RESUMABLE = frozenset({RunStatus.INTERRUPTED, RunStatus.FAILED})


def run_links(run: StoredRun, prefix: str = "/v1") -> RunLinks:
    """Where to follow, trace and draw a run; to cancel or resume it, when it may be."""
    base = f"{prefix}/runs/{run.id}"
    return RunLinks(
        self=base,
        events=f"{base}/events",
        trace=f"{base}/trace",
        diagram=f"{base}/diagram",
        cancel=None if run.finished else f"{base}/cancel",
        resume=f"{base}/resume" if run.status in _RESUMABLE else None,
    )


def run_page_view(page: RunPage, limit: int, offset: int) -> RunPageView:
    """A page of stored runs as the API answers it."""
    return RunPageView(
        runs=[run_view(r) for r in page.runs],
        total=page.total,
        limit=limit,
        offset=offset,
        usage=page.usage,
    )


def span_forest(spans: list[SpanRecord]) -> list[SpanNode]:
    """Spans nested by parentage (a span whose parent is missing becomes a root), in start order."""

    def node(tree: SpanTree) -> SpanNode:
        record: dict[str, Any] = dict(tree.span)
        fields = {k: record[k] for k in SpanNode.model_fields if k in record}
        fields.pop("children", None)
        return SpanNode(
            **fields,
            duration_ms=tree.duration_ms,
            children=[node(child) for child in tree.children],
        )

    return [node(root) for root in forest(spans)]
