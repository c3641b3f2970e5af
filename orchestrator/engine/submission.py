"""What a run is asked to do, and how one life of it executes.

`Submission` is the run request, the same from every door (HTTP, CLI, A2A, MCP) to the engine;
`Execution` is what the service decides beside it for one life of the run (its id, where its
steps come from, the thread's earlier turns, the caps its spending counts against).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from pydantic import BaseModel, Field

from agents.core.limits import SpendCap

__all__ = ["LAST", "Execution", "ForkPoint", "Lineage", "Origin", "Submission", "Turns"]

# A turn's entry agent that is whichever agent answered its thread's last turn.
LAST = "last"


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
        message_id: the A2A message that asked for it (the task's history keeps its id).
        context_id: the A2A context the caller put it in, in the caller's words (its thread is
            the caller's tenant's: `thread_id`).
    """

    trace_context: dict[str, str] = field(default_factory=dict)
    chain: tuple[str, ...] = ()
    systems: tuple[str, ...] = ()
    message_id: str | None = None
    context_id: str | None = None

    @classmethod
    def stored(cls, values: dict[str, Any]) -> Origin:
        """An origin as the store keeps it (lists for tuples; keys of older releases ignored)."""
        known = {f.name for f in fields(cls)}
        kept = {k: v for k, v in values.items() if k in known}
        chain, systems = tuple(kept.pop("chain", ())), tuple(kept.pop("systems", ()))
        return cls(**kept, chain=chain, systems=systems)


@dataclass(frozen=True)
class Submission:
    """A run request: the task and how to run it (validated by the door it came through).

    Attributes:
        task: what the team should do.
        agent: the entry agent asked for: a name, `auto` (routed by capabilities), `LAST` (a
            thread's turn: the agent that answered the last turn), or None (the config's entry).
        token_budget: tokens the whole delegation tree may spend (None: the config's).
        deadline_s: the run's wall-clock limit (None: the config's).
        stream: models stream their output (`model_delta` events for followers).
        origin: another agent system's delegation this run carries on (A2A).
        thread_id: the thread the run is a turn of: its entry agent sees the earlier turns.
        history_of: a replay of a turn (the original run's id): its entry agent sees the turns
            before that one, as the original did, and it is not a turn of the thread itself.
        waits_for_turns: a turn starts once the thread's earlier turns have ended (False: it
            was submitted knowing none is under way, or its door runs turns side by side).
        tenant: whose run it is (set by the service from the caller): its spending counts
            as the tenant's.
        submitted_by: who submitted it (an API key's name), likewise.
        input_tripped: an input guardrail of the entry agent tripped on the task at the door
            (`guardrail`, `reason`; set by the service): `task` is what it kept, and the run
            ends as that guardrail ends it. Nothing it blocked was recorded anywhere.
        input: structured input for the entry agent (JSON), beside the task.
        metadata: named values kept with the run, as given (who it is for, ...).
    """

    task: str
    agent: str | None = None
    token_budget: int | None = None
    deadline_s: float | None = None
    stream: bool = False
    origin: Origin | None = None
    thread_id: str | None = None
    history_of: str | None = None
    waits_for_turns: bool = True
    tenant: str = "default"
    submitted_by: str | None = None
    input_tripped: dict[str, str] | None = None
    input: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def stored(cls, task: str, options: dict[str, Any] | None, **whose: Any) -> Submission:
        """The request of a stored run: its task and `options` (as `options()` made them).

        `whose`: its `tenant` and `submitted_by`, which the store keeps in columns of their own.
        Options of older releases are read in today's names.
        """
        values = dict(options or {})
        if "thread" in values:  # (its name in older releases)
            values["thread_id"] = values.pop("thread")
        origin = values.pop("origin", None)
        known = {f.name for f in fields(cls)}
        kept = {k: v for k, v in {**values, **whose}.items() if k in known}
        return cls(task=task, origin=Origin.stored(origin) if origin else None, **kept)

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
        """Everything but the task and whose it is that was set, as the store keeps it."""
        return {
            k: v
            for k, v in asdict(self).items()
            if k not in ("task", "tenant", "submitted_by")
            and v is not None
            and v is not False
            and v != {}
        }


@dataclass(frozen=True)
class Turns:
    """The thread a run is a turn of, and the turns before it, as the entry agent sees them.

    Attributes:
        thread_id: the thread (its spans' `gen_ai.conversation.id`).
        history: the earlier turns as chat messages: each user message and final answer (with
            the tool calls and results between them, for an entry agent with `memory:
            thread`), oldest first (the agent's context policy fits them to its window).
        memories: the earlier exchanges of each agent with `memory: thread` (its tasks, tool
            calls with their results, and answers in the earlier turns), as chat messages,
            oldest first.
        state: the thread's shared state, which the turn begins with.
        answered_last: the agent that answered the last turn that ended (the entry of a turn
            that asks for `LAST`).
    """

    thread_id: str
    history: tuple[dict[str, Any], ...] = ()
    memories: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    answered_last: str | None = None


class ForkPoint(BaseModel):
    """The step a fork went on live from: everything before it was taken from the record."""

    span_id: str = Field(description="Its span in the original run.")
    step: str = Field(description="Its place in the original's step log: `<invocation>/<key>`.")
    label: str = Field(description='The step in words: "writer, step 2: called word_count".')

    @property
    def place(self) -> tuple[str, str]:
        """The step as the ledger takes it: its invocation and its key."""
        invocation, _, key = self.step.partition("/")
        return invocation, key


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
        fork_from: a fork from a chosen step: live from there (`agents.core.steps.kept_by_fork`
            says what is kept).
    """

    epoch: int = 0
    replay_of: str | None = None
    fork: bool = False
    fork_from: ForkPoint | None = None

    @property
    def replay_only(self) -> bool:
        """Whether nothing may run live (a replay that is not a fork)."""
        return self.replay_of is not None and not self.fork

    @property
    def has_past(self) -> bool:
        """Whether the run's steps load from a record (resumed, replayed or forked)."""
        return bool(self.epoch or self.replay_of or self.fork_from)


@dataclass(frozen=True)
class Execution:
    """One life of a run, as the service decided it beside the request.

    Attributes:
        run_id: the run.
        lineage: where its steps come from besides its own execution (a new run: none).
        turns: the thread it is a turn of, with the turns before it (None: not a turn).
        caps: its tenant's and key's daily spending caps (the run's own `cost_budget_usd`
            is the config's or the request's, added by the engine).
    """

    run_id: str
    lineage: Lineage = field(default_factory=Lineage)
    turns: Turns | None = None
    caps: tuple[SpendCap, ...] = ()
