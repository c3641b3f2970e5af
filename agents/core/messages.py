"""Messages that travel between the orchestrator and agent actors."""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agents.core.errors import DelegationRefused, RefusalReason
from agents.core.limits import Limits
from agents.core.state import StateChange, StateSpec

__all__ = [
    "AgentResult",
    "Delegation",
    "Refusal",
    "RunContext",
    "RunStatus",
    "Usage",
    "handoff_note",
    "latest_request",
]

_HANDED_OVER = " handed this conversation over to you"


def handoff_note(caller: str, note: str | None) -> str:
    """The user message a hand-off adds to the conversation it hands over."""
    return f"({caller}{_HANDED_OVER}{': ' + note if note else ''}.)"


def latest_request(messages: list[dict[str, Any]]) -> str:
    """What the person asked last: the latest user message that is no hand-off's note.

    In a thread's turn, the conversation holds the earlier turns' requests before it.
    """
    for message in reversed(messages):
        if message.get("role") == "user":
            content = str(message.get("content") or "")
            if not (content.startswith("(") and _HANDED_OVER in content):
                return content
    return ""


class RunStatus(StrEnum):
    """Where a run stands, or how it (or one agent invocation) ended.

    An invocation ends with one of the outcomes (`succeeded` to `guardrail_tripped`); a run also
    waits (`queued`, `running`, `waiting_for_approval`, `input_required`: an agent asked the person
    a question) and can be cut off (`interrupted`: the service that ran it stopped).
    """

    QUEUED = "queued"
    RUNNING = "running"
    WAITING_FOR_APPROVAL = "waiting_for_approval"
    INPUT_REQUIRED = "input_required"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LIMIT_EXCEEDED = "limit_exceeded"
    BUDGET_EXCEEDED = "budget_exceeded"
    GUARDRAIL_TRIPPED = "guardrail_tripped"
    INTERRUPTED = "interrupted"

    @property
    def finished(self) -> bool:
        """Whether the run is over (nothing will change it any more)."""
        return self not in _UNFINISHED

    @classmethod
    def unfinished(cls) -> tuple[RunStatus, ...]:
        """The statuses of runs still in flight."""
        return _UNFINISHED


_UNFINISHED = (
    RunStatus.QUEUED,
    RunStatus.RUNNING,
    RunStatus.WAITING_FOR_APPROVAL,
    RunStatus.INPUT_REQUIRED,
)


class Usage(BaseModel):
    """Token counts and cost of model calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    cost_usd: float = Field(
        default=0.0,
        description="From litellm's local price tables, of the calls it has a price for.",
    )
    unpriced_calls: int = Field(
        default=0,
        description="Model calls litellm has no price for: their cost is unknown (not in "
        "`cost_usd`). Baton's built-in models are free, so priced.",
    )

    @property
    def total_tokens(self) -> int:
        """Input and output tokens together."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            model_calls=self.model_calls + other.model_calls,
            cost_usd=self.cost_usd + other.cost_usd,
            unpriced_calls=self.unpriced_calls + other.unpriced_calls,
        )


class RunContext(BaseModel):
    """What every delegation carries: who called whom, and what is left to spend."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    chain: tuple[str, ...] = ()
    systems: tuple[str, ...] = Field(
        default=(),
        description="The agent systems the chain went through (A2A), this one last.",
    )
    deadline: float = Field(description="Wall-clock epoch seconds at which the run must stop.")
    limits: Limits = Field(default_factory=Limits)
    trace_context: dict[str, str] = Field(default_factory=dict)
    attempts: tuple[str, ...] = Field(
        default=(),
        description="One id per delegation attempt on the chain, innermost last: the tools "
        "that must run at most once are recorded under each, so that a retry can tell.",
    )
    step_log: bool = Field(
        default=False,
        description="Each step is recorded in the run's step log (durable runs: see "
        "`agents.core.steps`).",
    )
    stream: bool = Field(
        default=False,
        description="Models stream their output: followers see `model_delta` events.",
    )
    replay_only: bool = Field(
        default=False,
        description="The run replays another run's step log: nothing is done live (no model "
        "call, no tool call); a step missing from the record fails.",
    )
    fork_from: tuple[str, str] | None = Field(
        default=None,
        description="A fork from a chosen step: the invocation and the step's key. That step "
        "runs live, and what follows it; a delegation there runs live all the way down.",
    )
    thread_id: str | None = Field(
        default=None,
        description="The thread the run is a turn of (its spans' `gen_ai.conversation.id`).",
    )
    tenant: str = Field(
        default="default",
        description="Whose run it is: its long-term memory items are that tenant's.",
    )
    capped: bool = Field(
        default=False,
        description="Spending caps hold the run (its own in dollars, its tenant's or key's per "
        "day): each model call asks the ledger first.",
    )
    memories: dict[str, list[dict[str, Any]]] = Field(
        default_factory=dict,
        description="In a thread, the earlier exchanges of each agent with `memory: thread` "
        "(its tasks, tool calls with their results, and answers, as chat messages, oldest "
        "first).",
    )
    epoch: int = Field(
        default=0,
        description="How many times the run was resumed; the ledger refuses effects asked for "
        "under an older epoch (work of a run's previous life still going somewhere).",
    )
    state_spec: StateSpec | None = Field(
        default=None,
        description="How the team's shared state is typed and merged (its `state:`), if it says.",
    )

    @property
    def depth(self) -> int:
        """How many agents are on the chain (the entry agent is depth 1)."""
        return len(self.chain)

    @property
    def attempt(self) -> str:
        """This delegation's attempt id (the innermost), or "" if none was made."""
        return self.attempts[-1] if self.attempts else ""

    def time_left(self) -> float:
        """Seconds until the run's deadline (negative once it has passed)."""
        return self.deadline - time.time()

    @property
    def started_at(self) -> float:
        """When the run's clock started (Unix seconds): its deadline less its limit."""
        return self.deadline - self.limits.deadline_s

    def enter(self, agent: str, trace_context: dict[str, str] | None = None) -> RunContext:
        """The context as seen by `agent` once it is called from this one."""
        return self.model_copy(
            update={
                "chain": (*self.chain, agent),
                "trace_context": trace_context if trace_context is not None else self.trace_context,
            }
        )


class Delegation(BaseModel):
    """A task handed to an agent."""

    task: str = Field(min_length=1)
    input: Any = Field(
        default=None,
        description="Structured input beside the task (JSON), checked against the agent's "
        "`input_schema` on arrival.",
    )
    context: RunContext
    caller: str | None = None
    call_id: str | None = None
    invocation: str | None = Field(
        default=None,
        description="The id the invocation takes (the same on every attempt and after a "
        "resume, so that its recorded steps are found); None: a fresh one.",
    )
    replay: bool = Field(
        default=False,
        description="The invocation may have run before (a resumed run, a retried call): it "
        "reads its recorded steps first.",
    )
    input_tripped: dict[str, str] | None = Field(
        default=None,
        description="An input guardrail of this agent tripped on the task before the run was "
        "recorded (`guardrail`, `reason`): the task is what may be kept of it, and the "
        "invocation ends as that guardrail would have ended it.",
    )
    state: dict[str, Any] = Field(
        default_factory=dict,
        description="The run's shared state as the caller had it when it made the call.",
    )
    history: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The conversation so far, then the task: a hand-off's (the receiver "
        "continues it), a thread's earlier turns for the entry agent, an agent's own earlier "
        "exchanges in the thread for one with `memory: thread`.",
    )


class Refusal(BaseModel):
    """A delegation the guard refused, as recorded in the caller's result."""

    reason: RefusalReason
    message: str
    caller: str | None
    target: str
    chain: tuple[str, ...]
    limit: float | None = None
    call_id: str | None = None

    @classmethod
    def of(cls, error: DelegationRefused, call_id: str | None) -> Refusal:
        """The refusal as the caller's result records it."""
        return cls(
            reason=error.reason,
            message=error.message,
            caller=error.caller,
            target=error.target,
            chain=error.chain,
            limit=error.limit,
            call_id=call_id,
        )


class AgentResult(BaseModel):
    """The outcome of one agent invocation, with the invocations it delegated to."""

    agent: str
    status: RunStatus
    output: str | None = None
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)
    steps: int = 0
    started_at: float = 0.0
    duration_s: float = 0.0
    call_id: str | None = None
    actor: str | None = None
    lost: bool = Field(
        default=False, description="Made by the caller: the actor died and took its record."
    )
    children: list[AgentResult] = Field(default_factory=list)
    answered_by: str | None = Field(
        default=None, description="The agent that took the conversation over and answered."
    )
    stops_run: bool = Field(
        default=False, description="A hook ended the whole run here: callers end too."
    )
    # Both cross processes with the result (pickled), not into its JSON: the run's stored tree
    # would repeat each write at every level above it, and the state is the run's `state`.
    state_changes: list[StateChange] = Field(
        default_factory=list,
        exclude=True,
        description="What it and the invocations under it wrote to the shared state, in the "
        "order applied: its caller applies them to its own state.",
    )
    state: dict[str, Any] | None = Field(
        default=None,
        exclude=True,
        description="The shared state it ended with: the run's entry invocation's only (the "
        "run's state), None elsewhere.",
    )
    handed_back_to: str | None = Field(
        default=None,
        description="The agent up the chain this turn handed control back to (its output is "
        "the message for it); the agents between end their turns too.",
    )
    input_kept: str | None = Field(
        default=None,
        description="The task with what an input guardrail blocked taken out (None: the task "
        "was not blocked): what may be recorded of it anywhere.",
    )
    refusals: list[Refusal] = Field(default_factory=list)
    task: str | None = Field(
        default=None,
        description="The task it was given, kept for an agent with `memory: thread` only (its "
        "later runs in the thread see it).",
    )
    exchange: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Its tool calls and their results between the task and the answer, as chat "
        "messages, kept for an agent with `memory: thread` only (its later runs in the thread "
        "see them, within its context policy).",
    )

    def total_usage(self) -> Usage:
        """This invocation's usage plus that of every invocation under it."""
        total = self.usage
        for child in self.children:
            total = total + child.total_usage()
        return total

    def walk(self) -> list[AgentResult]:
        """This node and all its descendants, depth first."""
        nodes = [self]
        for child in self.children:
            nodes.extend(child.walk())
        return nodes
