"""What the HTTP API accepts and answers, and what `baton show` and `baton run --json` print.

These models make the OpenAPI document.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from agents.core.events import InputRequested
from agents.core.messages import Refusal, RunStatus, Usage
from agents.core.storable import nul_refusal
from orchestrator.engine.submission import Submission
from orchestrator.store import ForkPoint, RunPage, StoredRun
from tracing import SpanRecord
from tracing.tree import SpanTree
from tracing.tree import span_forest as forest

__all__ = [
    "AgentView",
    "AgentsView",
    "ComparisonView",
    "DelegationNode",
    "DiagramView",
    "ErrorBody",
    "ErrorDetail",
    "ForkRequest",
    "Health",
    "InputAnswer",
    "InputResult",
    "PendingQuestion",
    "Readiness",
    "ReplicaView",
    "RunLinks",
    "RunPageView",
    "RunRequest",
    "RunSubmission",
    "RunView",
    "ServiceView",
    "SpanNode",
    "ThreadCreate",
    "ThreadLinks",
    "ThreadPageView",
    "ThreadRunSubmission",
    "ThreadView",
    "TopologyView",
    "TraceView",
    "TurnView",
    "run_links",
    "run_page_view",
    "run_view",
    "span_forest",
    "thread_view",
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
_NUMBER_ONLY = BeforeValidator(_number_only)


class RunRequest(BaseModel):
    """A task to run, and how."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(
        min_length=1,
        max_length=MAX_TASK_CHARS,
        pattern=r"\S",
        description="What the team should do (not blank; no U+0000).",
        # The document says both rules (the NUL one is checked below, with its place).
        json_schema_extra={"pattern": "^[^\\u0000]*\\S[^\\u0000]*$"},
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

    token_budget: Annotated[int, Field(ge=1, le=10**9), _NUMBER_ONLY] | None = Field(
        default=None, description="Tokens the whole delegation tree may spend."
    )
    deadline_s: Annotated[float, Field(gt=0, le=MAX_DEADLINE_S), _NUMBER_ONLY] | None = Field(
        default=None, description="Wall-clock limit of the run, in seconds."
    )
    stream: Annotated[bool, Field(strict=True)] = Field(
        default=False,
        description="Models stream their output: the events carry `model_delta` text as it is "
        "produced (not stored; the record keeps whole messages).",
    )

    def submission(self) -> Submission:
        """The request as the run service takes it."""
        return Submission(
            task=self.task,
            agent=self.agent,
            token_budget=self.token_budget,
            deadline_s=self.deadline_s,
            stream=self.stream,
        )


class RunSubmission(RunRequest):
    """The body of `POST /v1/runs` (the OpenAPI document lists the system's agents)."""


class ThreadRunSubmission(RunRequest):
    """The body of `POST /v1/threads/{id}/runs`: a run, and what to do if one is under way."""

    multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"] = Field(
        default="reject",
        description="If a run of the thread is under way: `reject` (409), `enqueue` (this one "
        "starts when it ends), `interrupt` (it is cancelled, recorded so, and this one sees what "
        "it made) or `rollback` (it is cancelled and removed).",
    )


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


class ThreadCreate(BaseModel):
    """The body of `POST /v1/threads`."""

    model_config = ConfigDict(extra="forbid")

    metadata: dict[_MetaKey, _MetaValue] = Field(
        default_factory=dict,
        max_length=32,
        description="Up to 32 values to keep with the thread (a user id, say).",
        # Said in the schema as the validation does it: names of that shape, no others.
        json_schema_extra={
            "propertyNames": {"minLength": 1, "maxLength": 64, "pattern": _META_KEY},
            "additionalProperties": False,
        },
    )


class ThreadLinks(BaseModel):
    """Where to read a thread and submit its next turn."""

    self: str
    runs: str


class TurnView(BaseModel):
    """One turn of a thread: a run, what was asked and answered."""

    run_id: str
    task: str
    status: RunStatus
    output: str | None
    error: str | None
    usage: Usage
    created_at: float = Field(description="Unix seconds.")
    finished_at: float | None
    links: RunLinks


class ThreadView(BaseModel):
    """A thread (conversation) and, when read alone, its turns in order."""

    id: str
    created_at: float = Field(description="Unix seconds.")
    metadata: dict[str, Any]
    turns: list[TurnView] | None = Field(
        default=None, description="Its runs, oldest first (not in a list of threads)."
    )
    links: ThreadLinks


class ThreadPageView(BaseModel):
    """A page of threads, newest first."""

    threads: list[ThreadView]
    total: int
    limit: int
    offset: int


class ErrorDetail(BaseModel):
    """What went wrong, for programs (`code`) and people (`message`)."""

    code: str = Field(description="Stable, machine-readable: `unknown_agent`, `overloaded`...")
    message: str = Field(description="What is wrong, for people.")
    details: list[dict[str, Any]] | dict[str, Any] | None = Field(
        default=None, description="Per-field problems (`field`, `message`), or context."
    )


class ErrorBody(BaseModel):
    """Every error response has this shape."""

    error: ErrorDetail


class RunLinks(BaseModel):
    """Where to follow, trace, draw and cancel a run."""

    self: str
    events: str
    trace: str
    diagram: str
    cancel: str
    resume: str


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
    thread_id: str | None = Field(
        default=None, description="The thread (conversation) the run is a turn of."
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


class _Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message: str = Field(
        default="",
        max_length=2000,
        description="Told to the model with a denial (and recorded either way).",
    )


class Approval(_Decision):
    """A person approves a call waiting in a run, as the model asked it or with edits."""

    approve: Literal[True] = Field(description="true runs the call.")
    arguments: dict[str, Any] | None = Field(
        default=None,
        description="Make the call with these arguments instead of the model's (the edit is "
        "recorded, with who made it).",
    )

    @field_validator("arguments")
    @classmethod
    def _edits_fit(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and len(json.dumps(value)) > 100_000:
            raise ValueError("edited arguments are over 100,000 characters of JSON")
        return value


class Denial(_Decision):
    """A person denies a call waiting in a run (it is not made; the model is told)."""

    approve: Literal[False] = Field(description="false denies the call.")


# A person's answer to a call waiting for approval: `approve` says which (edited arguments come
# only with an approval, so the schema itself says so). A plain union (`anyOf`): schemathesis
# cannot generate for an OpenAPI discriminator on a boolean.
ApprovalDecision = Approval | Denial


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


class PendingApproval(BaseModel):
    """A call waiting for a person's decision."""

    call_id: str = Field(description="Approve or deny it at .../approvals/{call_id}.")
    agent: str
    tool: str
    arguments: str = Field(description="The call's arguments as JSON (redacted, cut).")
    chain: list[str]
    ts: float = Field(description="When it was asked (Unix seconds).")
    expires_at: float = Field(description="When it is denied without a decision.")


class ApprovalResult(BaseModel):
    """The decision taken."""

    call_id: str
    approved: bool
    message: str
    by: Literal["person", "expiry"]
    who: str = Field(default="", description="Who decided (an API key's name, or the address).")
    arguments: dict[str, Any] | None = Field(
        default=None, description="The arguments approved instead of the model's, if edited."
    )


class PendingQuestion(BaseModel):
    """A question an agent asks the person (`ask_user`); the run waits for the answer."""

    question_id: str = Field(description="Answer it with POST .../input (this id, or none).")
    agent: str
    question: str
    choices: list[str] = Field(description="Answers it suggests (any answer is taken).")
    chain: list[str]
    ts: float = Field(description="When it was asked (Unix seconds).")
    expires_at: float = Field(description="When the run stops waiting (its deadline).")

    @classmethod
    def of(cls, event: InputRequested) -> PendingQuestion:
        """The question as its `input_requested` event tells it."""
        return cls(
            question_id=event.call_id,
            agent=event.agent,
            question=event.question,
            choices=event.choices,
            chain=event.chain,
            ts=event.ts,
            expires_at=event.expires_at,
        )


class InputAnswer(BaseModel):
    """The person's answer to a run's question."""

    model_config = ConfigDict(extra="forbid")

    answer: str = Field(max_length=20_000, description="What the agent is told.")
    question_id: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.:-]{1,128}$",
        description="The question answered (needed only when the run asks several at once).",
    )


class InputResult(BaseModel):
    """The answer taken."""

    question_id: str
    answer: str
    by: Literal["person", "expiry"]
    who: str = Field(default="", description="Who answered (an API key's name, or the address).")


class ReplicaView(BaseModel):
    """One replica of an agent, as it answered just now."""

    actor: str
    state: str = Field(
        description='"alive"; "restarting: <why it died>" while Baton starts its host again; '
        '"crash_loop: <why>" for a host left down after dying too often; or "unavailable: <why>".'
    )
    node_id: str | None = None
    node_ip: str | None = None
    pid: int | None = None
    shares_with: list[str] = Field(
        default_factory=list,
        description="The other agents running in the same actor process (its host).",
    )
    inflight: int | None = Field(default=None, description="Delegations it is working on.")
    invocations: int | None = Field(default=None, description="Delegations it has taken.")
    restarted: bool | None = Field(default=None, description="Ray restarted it after a failure.")
    restarts: int | None = Field(
        default=None, description="Times Baton started its host again after it died (a service's)."
    )
    tool_problems: list[str] = Field(
        default_factory=list,
        description="MCP servers it could not use, and tools it disabled or skipped.",
    )


class AgentView(BaseModel):
    """One configured agent and its replicas."""

    name: str
    description: str
    capabilities: list[str]
    model: str = Field(description="Its model; for a remote agent, `a2a URL`.")
    tools: list[str]
    delegates: list[str]
    handoffs: list[str] = Field(
        default_factory=list, description="Agents it may hand the conversation over to."
    )
    guardrails: list[str] = Field(
        default_factory=list,
        description='Its checks (the system\'s first), each as "stage: name": "input: no cards", '
        '"output: ...", "tool calculate arguments: ...".',
    )
    output_schema: dict[str, Any] | str | None = Field(
        default=None, description="The shape of its final answer (JSON Schema or a model path)."
    )
    own_actors: str | None = Field(
        description="Why the agent runs in actors of its own (the `ray:` options it sets); "
        "null: it shares one actor process, the team's host, with the other agents like it."
    )
    replicas: list[ReplicaView]


class TopologyView(BaseModel):
    """Who may delegate to whom."""

    entry: str
    edges: list[tuple[str, str]]
    handoffs: list[tuple[str, str]] = Field(
        default_factory=list, description="The edges along which an agent hands over."
    )
    cycles: list[list[str]]
    max_static_depth: int | None = Field(description="None when a cycle is reachable.")
    max_depth: int


class AgentsView(BaseModel):
    """The agent system: its agents and topology."""

    system: str
    agents: list[AgentView]
    topology: TopologyView


class ServiceView(BaseModel):
    """What this service is: its team, its Baton, and where its runs' traces go."""

    system: str = Field(description="The agent system it serves (its config's `name`).")
    version: str = Field(description="Baton's version.")
    instance: str = Field(description="Names this service instance in the run store.")
    trace_export: str | None = Field(
        description="Where it exports each run's spans over OTLP/HTTP (null: it does not)."
    )
    step_log: bool = Field(
        description="Whether its runs keep a step log (they resume, replay and fork; not with "
        "an in-memory store)."
    )


class Health(BaseModel):
    """The process is up."""

    status: Literal["ok"]


class Readiness(BaseModel):
    """Whether the service can run tasks, part by part."""

    status: Literal["ready", "not_ready"]
    checks: dict[str, str] = Field(
        description='Each part ("ray", "store", "tools"): "ok" or why not. Ray and the store '
        'decide readiness; "tools" reports MCP servers the agents could not use.'
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
        requested_agent=run.requested_agent,
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
        thread_id=run.context_id,
        links=run_links(run.id, prefix),
    )


def run_links(run_id: str, prefix: str = "/v1") -> RunLinks:
    """Where to follow, trace, draw, cancel and resume a run."""
    base = f"{prefix}/runs/{run_id}"
    return RunLinks(
        self=base,
        events=f"{base}/events",
        trace=f"{base}/trace",
        diagram=f"{base}/diagram",
        cancel=f"{base}/cancel",
        resume=f"{base}/resume",
    )


def thread_view(
    thread_id: str,
    created_at: float,
    metadata: dict[str, Any],
    turns: list[StoredRun] | None = None,
) -> ThreadView:
    """A thread as the API answers it; with its turns when they are given."""
    base = f"/v1/threads/{thread_id}"
    return ThreadView(
        id=thread_id,
        created_at=created_at,
        metadata=metadata,
        turns=None
        if turns is None
        else [
            TurnView(
                run_id=run.id,
                task=run.task,
                status=run.status,
                output=run.output,
                error=run.error,
                usage=run.usage,
                created_at=run.created_at,
                finished_at=run.finished_at,
                links=run_links(run.id),
            )
            for run in turns
        ],
        links=ThreadLinks(self=base, runs=f"{base}/runs"),
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
