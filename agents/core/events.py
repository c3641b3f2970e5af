"""Progress events: one pydantic model per kind, a discriminated union on `type`.

The runtime emits them, the ledger carries them, the store keeps them, the SSE route streams them
(so the OpenAPI document lists every kind), and the CLI and the live trace read them. Each kind
says how a terminal shows it (`describe`) and what it tells about the span it refers to in a
trace rebuilt from events (`apply`), so a new kind is added here and nowhere else.

Each event carries the invocation that emitted it and a per-invocation sequence number: events
of one invocation are in causal order whatever order batches arrive in.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AliasChoices, BaseModel, Field, TypeAdapter
from typing_extensions import override

from agents.core.limits import SpendCap
from agents.core.messages import RunStatus, Usage
from agents.core.waits import Resolution, WaitKind
from tracing import SpanRecord
from tracing import attributes as attr

__all__ = [
    "EVENTS",
    "AgentFinished",
    "AgentStarted",
    "ApprovalDecided",
    "ApprovalRequested",
    "DelegationRefusedEvent",
    "Event",
    "EventBase",
    "HostRestarted",
    "InputProvided",
    "InputRequested",
    "ModelDelta",
    "ModelFinished",
    "ModelStarted",
    "RemoteUpdate",
    "RunFinished",
    "RunStarted",
    "SpendWarning",
    "StateChanged",
    "Steered",
    "ToolFinished",
    "ToolStarted",
    "WaitOpened",
    "WaitResolved",
    "model_attributes",
]

# Spans rebuilt from events, by span id (see `apply`).
LiveSpans = dict[str, SpanRecord]


class EventBase(BaseModel):
    """What every event has: when, which agent and chain, which invocation, which span."""

    type: str
    ts: float = Field(default_factory=time.time, description="Unix seconds.")
    agent: str = Field(
        default="", description="The agent it is about (the entry agent for run events)."
    )
    chain: list[str] = Field(default_factory=list, description="The delegation chain, entry first.")
    invocation: str | None = Field(
        default=None, description="The invocation that emitted it (None: the run itself)."
    )
    seq: int = Field(default=0, description="Its place among its invocation's events, from 1.")
    trace_id: str | None = None
    span_id: str | None = Field(default=None, description="The span it belongs to (hex).")
    parent_span_id: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None

    # "progress": shown by `baton run` by default; "detail": with --verbose only.
    level: ClassVar[Literal["progress", "detail"]] = "detail"
    # False: streamed to followers as it happens, never numbered nor stored.
    stored: ClassVar[bool] = True

    def describe(self) -> str:
        """One line for a terminal (rich markup)."""
        return f"[dim]·[/] {self.agent} {self.type}"

    def apply(self, spans: LiveSpans, trace_id: str) -> None:
        """Update `spans`, a trace rebuilt from events, with what this event says.

        Events that say nothing about spans (the default) leave it as it is.
        """

    def _open(self, spans: LiveSpans, trace_id: str, name: str, **attributes: Any) -> None:
        if not self.span_id:
            return
        attributes = {attr.GEN_AI_AGENT_NAME: self.agent, **attributes}
        if self.chain:
            attributes[attr.BATON_DELEGATION_CHAIN] = list(self.chain)
        spans[self.span_id] = {
            "trace_id": self.trace_id or trace_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "name": name,
            "kind": "INTERNAL",
            "start_ns": int(self.start_ns or self.ts * 1e9),
            "end_ns": self.end_ns,
            "status": "UNSET",
            "status_message": None,
            "attributes": {k: v for k, v in attributes.items() if v is not None},
            "events": [],
            "resource": {},
        }

    def _close(
        self, spans: LiveSpans, error_type: str | None = None, message: str | None = None
    ) -> SpanRecord | None:
        record = spans.get(self.span_id or "")
        if record is None:
            return None
        record["end_ns"] = self.end_ns or int(self.ts * 1e9)
        if error_type is not None:
            record["status"] = "ERROR"
            record["status_message"] = message
            record["attributes"][attr.ERROR_TYPE] = error_type
        return record


class RunStarted(EventBase):
    """The run began: its entry agent, and how it was chosen."""

    type: Literal["run_started"] = "run_started"
    routing: dict[str, Any] | None = None
    tenant: str = Field(default="default", description="Whose run it is.")
    submitted_by: str | None = Field(
        default=None,
        description="Who submitted it (an API key's name).",
        validation_alias=AliasChoices("submitted_by", "who"),  # (`who` in stored events)
    )
    epoch: int = Field(
        default=0,
        description="0 when the run first starts; 1, 2, ... each time it resumes (its earlier "
        "work is taken from its step log).",
    )
    token_budget: int | None = Field(
        default=None, description="The tokens it may spend (None: no budget)."
    )
    caps: list[SpendCap] = Field(
        default_factory=list,
        description="The spending caps it is held to: its tenant's and key's per day, its own.",
    )

    @override
    def describe(self) -> str:
        if self.epoch:
            return f"[yellow]↻[/] resumed (time {self.epoch}): finished steps come from the record"
        return super().describe()

    @override
    def apply(self, spans: LiveSpans, trace_id: str) -> None:
        self._open(spans, trace_id, attr.WORKFLOW_SPAN)


class AgentStarted(EventBase):
    """An agent took a delegation (or the task)."""

    type: Literal["agent_started"] = "agent_started"
    call_id: str | None = None
    caller: str | None = None
    level: ClassVar[Literal["progress", "detail"]] = "progress"

    @override
    def describe(self) -> str:
        return f"[cyan]→[/] {self.agent}" + (f" (from {self.caller})" if self.caller else "")

    @override
    def apply(self, spans: LiveSpans, trace_id: str) -> None:
        self._open(spans, trace_id, attr.agent_span_name(self.agent))


class ModelStarted(EventBase):
    """An agent asked its model for the next step."""

    type: Literal["model_started"] = "model_started"
    model: str
    step: int

    @override
    def describe(self) -> str:
        return f"[dim]…[/] {self.agent} asks {self.model} (step {self.step})"

    @override
    def apply(self, spans: LiveSpans, trace_id: str) -> None:
        model = model_attributes(self.model)
        self._open(spans, trace_id, attr.chat_span_name(model[attr.GEN_AI_REQUEST_MODEL]), **model)


class ModelDelta(EventBase):
    """Text a streaming model produced since the last delta (runs submitted with `stream`).

    Coalesced (at most one per invocation every 50 ms) and not stored: the record keeps the
    whole message. Carries no id on the SSE stream: a reconnecting client gets none again.
    """

    type: Literal["model_delta"] = "model_delta"
    step: int
    text: str
    stored: ClassVar[bool] = False


class ModelFinished(EventBase):
    """The model answered: with tool calls, or with the final answer."""

    type: Literal["model_finished"] = "model_finished"
    model: str
    step: int
    tool_calls: int
    tokens: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None = Field(
        default=None, description="Its price by litellm's map (None: the model is not priced)."
    )
    answered_by: str | None = Field(
        default=None,
        description="The fallback model that answered, when `model` (the one asked) did not.",
    )
    gate_wait_s: float = Field(
        default=0.0, description="Seconds the call waited at provider gates (`gates:`)."
    )

    @override
    def describe(self) -> str:
        fallback = f" (answered by {self.answered_by})" if self.answered_by else ""
        return (
            f"[dim]…[/] {self.agent} step {self.step}: {self.tool_calls} tool calls, "
            f"{self.tokens} tokens{fallback}"
        )

    @override
    def apply(self, spans: LiveSpans, trace_id: str) -> None:
        model = model_attributes(self.model)
        if self.span_id not in spans:  # its start was not seen: the span is whole here
            self._open(spans, trace_id, attr.chat_span_name(model[attr.GEN_AI_REQUEST_MODEL]))
        record = self._close(spans)
        if record is not None:
            record["attributes"] = {
                **model,
                attr.GEN_AI_USAGE_INPUT_TOKENS: self.input_tokens,
                attr.GEN_AI_USAGE_OUTPUT_TOKENS: self.output_tokens,
            }


class ToolStarted(EventBase):
    """An agent called a tool (a delegation names its `target`)."""

    type: Literal["tool_started"] = "tool_started"
    tool: str
    call_id: str
    target: str | None = None

    @override
    def apply(self, spans: LiveSpans, trace_id: str) -> None:
        self._open(
            spans,
            trace_id,
            attr.tool_span_name(self.tool),
            **{
                attr.GEN_AI_TOOL_NAME: self.tool,
                attr.GEN_AI_TOOL_CALL_ID: self.call_id,
                attr.BATON_DELEGATION_TARGET: self.target,
            },
        )


class ToolFinished(EventBase):
    """A tool call ended (`error`: its result is an error the model reads)."""

    type: Literal["tool_finished"] = "tool_finished"
    tool: str
    call_id: str
    error: bool = False

    @override
    def apply(self, spans: LiveSpans, trace_id: str) -> None:
        self._close(spans, "tool_error" if self.error else None)


class DelegationRefusedEvent(EventBase):
    """The guard refused a delegation before it was dispatched."""

    type: Literal["delegation_refused"] = "delegation_refused"
    target: str
    reason: str
    message: str
    call_id: str | None = None
    level: ClassVar[Literal["progress", "detail"]] = "progress"

    @override
    def describe(self) -> str:
        return f"[yellow]⊘[/] {self.agent} -> {self.target}: {self.message}"

    @override
    def apply(self, spans: LiveSpans, trace_id: str) -> None:
        record = spans.get(self.span_id or "")
        if record is not None:
            record["events"].append(
                {
                    "name": attr.EVENT_DELEGATION_REFUSED,
                    "time_ns": int(self.ts * 1e9),
                    "attributes": {attr.BATON_REFUSAL_REASON: self.reason, "message": self.message},
                }
            )


class AgentFinished(EventBase):
    """An invocation ended: how, how long, and what it spent."""

    type: Literal["agent_finished"] = "agent_finished"
    call_id: str | None = None
    status: RunStatus
    duration_s: float
    steps: int
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    handed_back_to: str | None = None  # its turn ended handing control back up to this agent
    level: ClassVar[Literal["progress", "detail"]] = "progress"

    @override
    def describe(self) -> str:
        said = f"handed back to {self.handed_back_to}" if self.handed_back_to else None
        return (
            f"[cyan]←[/] {self.agent} {said or self.status.value} in "
            f"{self.duration_s * 1000:.0f} ms"
        )

    @override
    def apply(self, spans: LiveSpans, trace_id: str) -> None:
        failed = self.status != RunStatus.SUCCEEDED
        record = self._close(spans, self.status.value if failed else None, self.error)
        if record is not None:
            record["attributes"][attr.GEN_AI_USAGE_INPUT_TOKENS] = self.input_tokens
            record["attributes"][attr.GEN_AI_USAGE_OUTPUT_TOKENS] = self.output_tokens


class RemoteUpdate(EventBase):
    """An agent of another system (A2A) reported how its task goes."""

    type: Literal["remote_update"] = "remote_update"
    url: str = Field(description="The remote agent's service.")
    task_id: str = Field(description="Its task there (a run, for a Baton service).")
    state: str = Field(description="The task's A2A state: working, completed, failed...")
    text: str = ""
    level: ClassVar[Literal["progress", "detail"]] = "progress"

    @override
    def describe(self) -> str:
        return f"[magenta]⇢[/] {self.agent} {self.state}" + (f": {self.text}" if self.text else "")


class HostRestarted(EventBase):
    """An agent's host died during (or before) a delegation and is back; it is tried again.

    Created again by Baton's supervisor (`restarts` counts those) or restarted by Ray.
    """

    type: Literal["host_restarted"] = "host_restarted"
    actor: str = Field(description="The host replica (Ray actor name).")
    cause: str | None = Field(default=None, description="Why it died, as Ray said.")
    restarts: int = Field(default=0, description="Its restarts by Baton since the service began.")
    waited_s: float = Field(description="How long the delegation waited for it.")
    level: ClassVar[Literal["progress", "detail"]] = "progress"

    @override
    def describe(self) -> str:
        return (
            f"[yellow]↻[/] {self.agent}'s host {self.actor} died and is back "
            f"after {self.waited_s:.1f} s: retrying"
        )


class WaitOpened(EventBase):
    """A run waits for a person (the common part of every kind of wait: `agents.core.waits`)."""

    call_id: str
    expires_at: float = Field(description="When the wait ends without a person's word.")
    record_key: str | None = Field(
        default=None, description="Where the person's word is kept in the run's step log."
    )
    kind: ClassVar[WaitKind]
    level: ClassVar[Literal["progress", "detail"]] = "progress"

    def resolved(self, wait_id: str, resolution: Resolution) -> WaitResolved:
        """The event that says how this wait ended."""
        raise NotImplementedError


class WaitResolved(EventBase):
    """A wait ended: a person's word came, or the wait expired."""

    call_id: str
    by: Literal["person", "expiry"]
    who: str = Field(default="", description="Who ended it (an API key's name, a door).")
    level: ClassVar[Literal["progress", "detail"]] = "progress"


class ApprovalRequested(WaitOpened):
    """A call waits for a person's decision."""

    type: Literal["approval_requested"] = "approval_requested"
    call_id: str = Field(description="Approve or deny it at .../approvals/{call_id}.")
    tool_call_id: str = Field(description="The model's id for the call.")
    tool: str
    arguments: str = Field(
        description="The call's arguments as a JSON object (redacted; long strings cut)."
    )
    parameters: dict[str, Any] | None = Field(
        default=None,
        description="The JSON Schema of the tool's arguments: an approval's edit must fit it.",
    )
    expires_at: float = Field(description="When it is denied without a decision.")
    record_key: str | None = Field(
        default=None, description="Where the decision is kept in the run's step log."
    )
    kind: ClassVar[WaitKind] = "approval"

    @override
    def describe(self) -> str:
        return f"[yellow]?[/] {self.agent} waits for approval of {self.tool}"

    @override
    def resolved(self, wait_id: str, resolution: Resolution) -> ApprovalDecided:
        edited = resolution.arguments if resolution.approved else None
        return ApprovalDecided(
            agent=self.agent,
            chain=self.chain,
            invocation=self.invocation,
            call_id=wait_id,
            tool=self.tool,
            approved=bool(resolution.approved),
            message=resolution.message,
            by=resolution.by,
            who=resolution.who,
            arguments=json.dumps(edited) if edited is not None else None,
        )


class ApprovalDecided(WaitResolved):
    """A pending call was approved or denied (by a person, or by expiry)."""

    type: Literal["approval_decided"] = "approval_decided"
    tool: str | None = None
    approved: bool
    message: str = ""
    who: str = Field(default="", description="Who decided (an API key's name, a door).")
    arguments: str | None = Field(
        default=None, description="The arguments the person approved instead (JSON), if edited."
    )

    @override
    def describe(self) -> str:
        verdict = "approved" if self.approved else "denied"
        edited = " with edited arguments" if self.arguments is not None else ""
        return f"[yellow]![/] {self.tool} {verdict}{edited} ({self.who or self.by})"


class InputRequested(WaitOpened):
    """An agent asks the person a question (its `ask_user` tool); the run waits for the answer."""

    type: Literal["input_requested"] = "input_requested"
    call_id: str = Field(description="Answer it at .../input (with this id as `question_id`).")
    question: str
    choices: list[str] = Field(default_factory=list, description="Answers it suggests, if any.")
    expires_at: float = Field(description="When the run stops waiting (its deadline).")
    record_key: str | None = Field(
        default=None, description="Where the answer is kept in the run's step log."
    )
    kind: ClassVar[WaitKind] = "question"

    @override
    def describe(self) -> str:
        return f"[yellow]?[/] {self.agent} asks: {self.question}"

    @override
    def resolved(self, wait_id: str, resolution: Resolution) -> InputProvided:
        return InputProvided(
            agent=self.agent,
            chain=self.chain,
            invocation=self.invocation,
            call_id=wait_id,
            answer=resolution.answer or "",
            by=resolution.by,
            who=resolution.who,
        )


class InputProvided(WaitResolved):
    """The person answered a question (or the run stopped waiting: `by` expiry)."""

    type: Literal["input_provided"] = "input_provided"
    answer: str = ""
    who: str = Field(default="", description="Who answered (an API key's name, a door).")

    @override
    def describe(self) -> str:
        if self.by == "expiry":
            return "[yellow]![/] no answer came"
        return f"[yellow]![/] answered: {self.answer[:200]}"


class SpendWarning(EventBase):
    """The run's spending (or its tenant's or key's today) reached the warning share of a cap."""

    type: Literal["spend_warning"] = "spend_warning"
    scope: str = Field(description="`run`, `tenant:<name>` or `key:<name>`.")
    message: str
    level: ClassVar[Literal["progress", "detail"]] = "progress"

    @override
    def describe(self) -> str:
        return f"[yellow]$[/] {self.message}"


class StateChanged(EventBase):
    """Tools, a hook or an answer (`save_as`) of this agent wrote the run's shared state."""

    type: Literal["state_changed"] = "state_changed"
    keys: list[str] = Field(description="The keys written, in order.")
    state: dict[str, Any] = Field(description="The values the written keys hold now.")
    step: int = Field(description="The agent's model step after which it was written.")
    level: ClassVar[Literal["progress", "detail"]] = "progress"

    @override
    def describe(self) -> str:
        return f"[blue]✎[/] {self.agent}: state {', '.join(self.keys)}"


class Steered(EventBase):
    """A hook or step rule changed the agent's course: what it changed, and why it could.

    A forced or changed model call, a vetoed tool call, a replaced tool result, a stopped run.
    """

    type: Literal["steered"] = "steered"
    by: str = Field(description="The hook's class, or `step_rules` (then the rules' names).")
    change: str = Field(description="What it changed, in words.")
    step: int = Field(description="The agent's model step it changed (0: before any).")
    level: ClassVar[Literal["progress", "detail"]] = "progress"

    @override
    def describe(self) -> str:
        return f"[magenta]↪[/] {self.agent}: {self.by} {self.change}"


class RunFinished(EventBase):
    """The run ended: its status, answer or error, usage and duration. Always the last event."""

    type: Literal["run_finished"] = "run_finished"
    status: RunStatus
    output: str | None = None
    error: str | None = None
    usage: Usage | None = None
    duration_s: float | None = None
    cancelled_by: str | None = Field(
        default=None, description="Who cancelled the run (a key's name), when it was cancelled."
    )

    @override
    def apply(self, spans: LiveSpans, trace_id: str) -> None:
        failed = self.status != RunStatus.SUCCEEDED
        self._close(spans, self.status.value if failed else None, self.error)


Event = Annotated[
    RunStarted
    | AgentStarted
    | ModelStarted
    | ModelDelta
    | ModelFinished
    | ToolStarted
    | ToolFinished
    | DelegationRefusedEvent
    | AgentFinished
    | RemoteUpdate
    | HostRestarted
    | ApprovalRequested
    | ApprovalDecided
    | InputRequested
    | InputProvided
    | SpendWarning
    | Steered
    | StateChanged
    | RunFinished,
    Field(discriminator="type"),
]
# Parses stored or received events (`EVENTS.validate_python(data)`).
EVENTS: TypeAdapter[Event] = TypeAdapter(Event)


def model_attributes(model: str) -> dict[str, str]:
    """A configured `provider/model` as a live model call's span names it (`tracing.chat_span`)."""
    provider, sep, name = model.partition("/")
    if not sep:
        return {attr.GEN_AI_REQUEST_MODEL: model}
    return {attr.GEN_AI_REQUEST_MODEL: name, attr.GEN_AI_PROVIDER_NAME: provider}
