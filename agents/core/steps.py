"""The step log: what each agent invocation did, recorded so that a run can resume or replay.

Each invocation records its model replies, the start of its calls that must run at most once,
its tool results and its approval decisions, under keys that are the same on every execution
of the same run (`model_key`, `tool_key`, ...), and under invocation ids that are too
(`entry_invocation`, `child_invocation`). A resumed invocation reads its steps back and reuses
them instead of calling the model or the tool again (`agents.runtime.replay`).

The trace stays the view of a run; the step log is its record.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

__all__ = [
    "STATE_IN_KEY",
    "Step",
    "StepKind",
    "StepLog",
    "answer_key",
    "approval_key",
    "call_key",
    "child_invocation",
    "entry_invocation",
    "kept_by_fork",
    "model_key",
    "question_key",
    "request_fingerprint",
    "started_key",
    "step_number",
    "tool_key",
]

# model: a model's reply; tool_started: a call that must run at most once is about to be made;
# tool_result: a tool's result; approval: a person's (or the expiry's) decision on a call;
# question: an agent's question to the person, asked (`ask_user`); answer: the person's answer;
# call: what a workflow called at a place in its order of calls (a resumed one must call the same);
# state: the shared state a run's entry invocation began with (a resumed, replayed or forked run
# begins with the same, whatever its thread's state is by then).
StepKind = Literal[
    "model", "tool_started", "tool_result", "approval", "question", "answer", "call", "state"
]
# The key of the entry invocation's `state` step.
STATE_IN_KEY = "state:in"


class Step(BaseModel):
    """One recorded step of an agent invocation."""

    invocation: str
    key: str
    kind: StepKind
    data: dict[str, Any] = Field(default_factory=dict)
    epoch: int = 0
    at: float = Field(default_factory=time.time)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def entry_invocation(run_id: str) -> str:
    """The entry invocation's id: the same whenever the run is executed again."""
    return _digest(f"{run_id}/entry")


def child_invocation(parent: str, key: str) -> str:
    """The id of the invocation a tool call (`key`) of invocation `parent` delegates to."""
    return _digest(f"{parent}/{key}")


def model_key(step: int) -> str:
    """The key of an invocation's `step`-th model reply."""
    return f"model:{step}"


def tool_key(step: int, call_id: str) -> str:
    """The key of a tool call's result (calls are numbered by model step: ids may repeat)."""
    return f"tool:{step}:{call_id}"


def started_key(step: int, call_id: str) -> str:
    """The key of the start of a call that must run at most once."""
    return f"{tool_key(step, call_id)}:started"


def call_key(place: int) -> str:
    """The key of a workflow's `place`-th call (its calls are numbered in the order made)."""
    return f"call:{place}"


def approval_key(step: int, call_id: str) -> str:
    """The key of the decision on a call that waited for approval."""
    return f"approval:{step}:{call_id}"


def question_key(step: int, call_id: str) -> str:
    """The key of a question asked by a call (`ask_user`): asked once, even across a resume."""
    return f"{tool_key(step, call_id)}:question"


def answer_key(step: int, call_id: str) -> str:
    """The key of the person's answer to a question."""
    return f"{tool_key(step, call_id)}:answer"


def step_number(key: str) -> int:
    """The model step a key belongs to (`model:3`, `tool:3:call_1`, ... -> 3; 0 if none)."""
    part = key.split(":")[1] if ":" in key else ""
    return int(part) if part.isdigit() else 0


def kept_by_fork(key: str, fork_at: str) -> bool:
    """Whether a fork from the step `fork_at` of an invocation keeps its recorded step `key`.

    A fork keeps what happened before its step and goes live from it. From a model step
    (`model:3`): the steps before it. From a tool call (`tool:3:call_1`): the model reply that
    asked for it and the other calls of that step (they did not wait for it), not the call
    itself (its result, its start, its approval) nor anything after.
    """
    number, at = step_number(key), step_number(fork_at)
    if not fork_at.startswith("tool:") or number != at:
        return number < at
    call = fork_at.split(":", 2)[2]
    return not key.endswith(f":{call}") and not key.startswith(f"{fork_at}:")


def request_fingerprint(model: str, messages: list[dict[str, Any]], tools: list[Any]) -> str:
    """A digest of a model request: a recorded reply is reused only for the same request.

    A resumed run whose config changed (an instruction, a model, a tool) asks its model again
    from the first step that differs.
    """
    return _digest(json.dumps([model, messages, tools], sort_keys=True, default=str))


class StepLog(Protocol):
    """Where an invocation records its steps and reads them back."""

    def record(self, run_id: str, step: Step) -> None:
        """Queue a step; it is written with the next batch (a lost one is asked again)."""

    async def commit(self, run_id: str, step: Step) -> bool:
        """Write a step and everything queued before it, and wait until it is stored.

        Returns False when the run has moved on to a newer epoch (it was resumed elsewhere):
        the caller must not go ahead with the effect the step announces.
        """

    async def recorded(self, run_id: str, invocation: str) -> dict[str, Step]:
        """An invocation's recorded steps, by key (empty for a new one)."""
