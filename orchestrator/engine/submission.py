"""What the run service is asked to run: its own input type, whatever door it came through."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

__all__ = ["Lineage", "Origin", "Submission", "Turns"]


@dataclass(frozen=True)
class Origin:
    """Another agent system's delegation that this run carries on (A2A).

    Attributes:
        trace_context: the caller's W3C trace context: the run's root span is its child, so
            one request is one trace across both systems.
        chain: the delegation chain so far, each name qualified by its system (`A/coordinator`):
            the run's depth counts it.
        systems: the agent systems (config names) the chain went through, in order; a system
            on it refuses the delegation (a cycle across systems).
        context_id: the A2A conversation the caller put the task in.
        message_id: the A2A message that asked for it (the task's history keeps its id).
    """

    trace_context: dict[str, str] = field(default_factory=dict)
    chain: tuple[str, ...] = ()
    systems: tuple[str, ...] = ()
    context_id: str | None = None
    message_id: str | None = None


@dataclass(frozen=True)
class Turns:
    """The thread a run is a turn of, and the turns before it, as the entry agent sees them.

    Attributes:
        thread: the thread's id (its spans' `gen_ai.conversation.id`).
        history: the earlier turns as chat messages: each user message and final answer,
            oldest first (the agent's context policy fits them to its model's window).
        memories: the earlier exchanges of each agent with `memory: thread` (its tasks and
            answers in the earlier turns), as chat messages, oldest first.
    """

    thread: str
    history: tuple[dict[str, str], ...] = ()
    memories: dict[str, list[dict[str, str]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Submission:
    """A task to run, and how (validated by the door it came through: HTTP, CLI, MCP)."""

    task: str
    agent: str | None = None
    token_budget: int | None = None
    deadline_s: float | None = None
    stream: bool = False  # models stream their output: `model_delta` events
    origin: Origin | None = None  # asked by another agent system (A2A)
    thread: str | None = None  # a turn of this thread: its entry agent sees the earlier turns
    # A replay of a turn (the original run's id): its entry agent sees the turns before that
    # one, as the original did, and it is not a turn of the thread itself.
    history_of: str | None = None
    # A turn submitted while others were under way (`enqueue`): it starts once they have ended.
    waits_for_turns: bool = True
    # Whose run it is and who submitted it (set by the service from the caller, after the
    # request's fingerprint: what is asked, not who asks): its spending counts as theirs.
    tenant: str = "default"
    submitted_by: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.origin, dict):  # read back from the store
            origin = Origin(**self.origin)
            origin = replace(origin, chain=tuple(origin.chain), systems=tuple(origin.systems))
            object.__setattr__(self, "origin", origin)

    @property
    def conversation(self) -> str | None:
        """The thread the run belongs to: its own, or the A2A context it came in."""
        if self.thread is not None:
            return self.thread
        return self.origin.context_id if self.origin is not None else None

    def fingerprint(self) -> str:
        """Identifies the submission, for idempotent retries.

        Its trace context says where it is recorded, not what is asked: a retry carries a new one.
        """
        asked = asdict(self)
        if asked["origin"] is not None:
            del asked["origin"]["trace_context"]
        del asked["waits_for_turns"]  # how it was queued, not what is asked
        del asked["tenant"], asked["submitted_by"]  # who asks (the key is theirs already)
        body = json.dumps(asked, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(body.encode()).hexdigest()

    def options(self) -> dict[str, Any]:
        """Everything but the task that was set, as the store keeps it."""
        return {
            k: v
            for k, v in asdict(self).items()
            if k != "task" and v is not None and v is not False
        }


@dataclass(frozen=True)
class Lineage:
    """Where a run's steps come from besides its own execution (see `agents.core.steps`).

    Attributes:
        epoch: 0 for a new run; 1, 2, ... when it resumes for the 1st, 2nd... time (its
            agents take their finished steps from its step log).
        replay_of: the run whose step log this new run executes again: no model call and no
            tool call (a step the log lacks fails) ...
        fork: ... unless a fork: it goes on live from the first step the log lacks or whose
            request differs (the config changed since).
        fork_from: a fork from a chosen step (an invocation and the step's key): live from
            there (`agents.core.steps.kept_by_fork` says what is kept).
    """

    epoch: int = 0
    replay_of: str | None = None
    fork: bool = False
    fork_from: tuple[str, str] | None = None

    @property
    def replay_only(self) -> bool:
        """Whether nothing may run live (a replay that is not a fork)."""
        return self.replay_of is not None and not self.fork
