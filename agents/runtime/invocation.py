"""One delegation being worked on by an agent: its steps, usage, children and events so far."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents.core.messages import AgentResult, Delegation, Refusal, RunContext, Usage
from agents.core.state import State, StateChange, apply_changes
from agents.runtime.guardrails import Tripped
from agents.runtime.replay import RecordedSteps

__all__ = ["DELEGATION_GRACE_S", "Invocation"]

# A child gets this long past the run deadline to report its own limit before its caller stops
# waiting for it.
DELEGATION_GRACE_S = 2.0


@dataclass
class Invocation:
    """One delegation being worked on: its steps, usage, children and events so far."""

    delegation: Delegation
    max_steps: int
    started_at: float = field(default_factory=time.time)
    clock: float = field(default_factory=time.perf_counter)
    usage: Usage = field(default_factory=Usage)
    steps: int = 0
    children: list[AgentResult] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    # Given by the delegation (derived from the caller's step); else random. Not uuid4: its
    # `os.urandom` is a system call, and every invocation would pay it under the GIL.
    id: str = field(default_factory=lambda: f"{random.getrandbits(64):016x}")
    seq: int = 0  # events emitted so far
    trace_id: int = 0  # the run's trace (0 until the invocation's span has started)
    recorded: RecordedSteps = field(default_factory=RecordedSteps)  # steps of an earlier execution
    tools_called: list[str] = field(default_factory=list)  # names, in order (step rules, hooks)
    history: list[dict[str, Any]] = field(default_factory=list)  # the conversation, for hand-offs
    # Its tool calls and results before its answer (kept for a `memory: thread` agent).
    exchange: list[dict[str, Any]] = field(default_factory=list)
    visits: dict[str, set[int]] = field(default_factory=dict)  # steps handing work to each agent
    state: dict[str, Any] = field(default_factory=dict)  # the shared state as it sees it
    changes: list[StateChange] = field(default_factory=list)  # what it applied to it, in order

    def __post_init__(self) -> None:
        self.state = dict(self.delegation.state)

    blocked: Tripped | None = None  # an output guardrail stopped the model's answer
    unanswered: str | None = None  # a question to the person that the deadline cut off

    @property
    def ctx(self) -> RunContext:
        """The run context the delegation carries."""
        return self.delegation.context

    def apply(self, changes: list[StateChange]) -> None:
        """Apply writes to the shared state (by their keys' reducers), kept to pass up.

        Raises:
            StateError: one the state's schema or a reducer refuses.
        """
        if changes:
            self.state = apply_changes(self.state, changes, self.ctx.state_spec)
            self.changes.extend(changes)

    def state_view(self, by: str, on_write: Callable[[StateChange], None] | None = None) -> State:
        """The state as a tool call, hook or workflow of `by` sees it now.

        Its writes are kept on it; `on_write` is told of each as it is made.
        """
        return State(self.state, self.ctx.state_spec, by, on_write)
