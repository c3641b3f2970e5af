"""Baton runs as A2A tasks: a task is a run (same id), its events are status and artifact updates.

A2A's types are protocol buffers (a2a-sdk 1.x); this module only builds and reads them.
"""

from __future__ import annotations

import time

from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict
from google.protobuf.timestamp_pb2 import Timestamp

from agents.core.a2a_meta import (
    META_AGENT,
    META_CHAIN,
    META_DEADLINE,
    META_STATUS,
    META_SYSTEMS,
    META_USAGE,
    TRACE_KEYS,
    struct,
)
from agents.core.events import (
    AgentFinished,
    AgentStarted,
    ApprovalRequested,
    DelegationRefused,
    Event,
    ModelDelta,
    RunFinished,
)
from agents.core.messages import RunStatus
from orchestrator.engine.submission import Origin
from orchestrator.store import StoredRun

__all__ = [
    "ANSWER",
    "FINAL_STATES",
    "origin_of",
    "run_state",
    "stored_task",
    "task_update",
]

# The artifact that holds a run's answer.
ANSWER = "answer"

_STATES = {
    RunStatus.QUEUED: TaskState.TASK_STATE_SUBMITTED,
    RunStatus.RUNNING: TaskState.TASK_STATE_WORKING,
    # A person decides on the Baton side (its API or UI), not the A2A caller: still working.
    RunStatus.WAITING_FOR_APPROVAL: TaskState.TASK_STATE_WORKING,
    RunStatus.SUCCEEDED: TaskState.TASK_STATE_COMPLETED,
    RunStatus.FAILED: TaskState.TASK_STATE_FAILED,
    RunStatus.CANCELLED: TaskState.TASK_STATE_CANCELED,
    RunStatus.LIMIT_EXCEEDED: TaskState.TASK_STATE_FAILED,
    RunStatus.BUDGET_EXCEEDED: TaskState.TASK_STATE_FAILED,
    RunStatus.GUARDRAIL_TRIPPED: TaskState.TASK_STATE_REJECTED,
    RunStatus.INTERRUPTED: TaskState.TASK_STATE_FAILED,
}
FINAL_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)


def run_state(status: RunStatus) -> TaskState:
    """The A2A task state of a run status."""
    return _STATES[status]


def _text(text: str, role: Role = Role.ROLE_AGENT, **ids: str) -> Message:
    return Message(message_id=f"m-{time.time_ns()}", role=role, parts=[Part(text=text)], **ids)


def _status(state: TaskState, text: str | None, run_id: str, context_id: str) -> TaskStatus:
    stamp = Timestamp()
    stamp.GetCurrentTime()
    message = _text(text, task_id=run_id, context_id=context_id) if text else None
    return TaskStatus(state=state, message=message, timestamp=stamp)


def _answer(run_id: str, text: str) -> Artifact:
    return Artifact(artifact_id=f"{run_id}-{ANSWER}", name=ANSWER, parts=[Part(text=text)])


def _context_id(run: StoredRun) -> str:
    origin = (run.options or {}).get("origin") or {}
    return str(origin.get("context_id") or run.id)


def stored_task(run: StoredRun, history_length: int | None = None) -> Task:
    """The task a stored run is: its state, the task as the user's message, the answer."""
    context_id = _context_id(run)
    ended = run.output if run.status == RunStatus.SUCCEEDED else run.error
    task = Task(
        id=run.id,
        context_id=context_id,
        status=_status(run_state(run.status), ended, run.id, context_id),
        metadata=struct({META_STATUS: run.status.value, "baton.entry_agent": run.entry_agent}),
    )
    if run.status == RunStatus.SUCCEEDED and run.output is not None:
        task.artifacts.append(_answer(run.id, run.output))
    history = [_text(run.task, Role.ROLE_USER, task_id=run.id, context_id=context_id)]
    if history_length != 0:
        task.history.extend(history[-history_length:] if history_length else history)
    return task


def task_update(
    event: Event, run_id: str, context_id: str, entry_depth: int
) -> TaskStatusUpdateEvent | TaskArtifactUpdateEvent | None:
    """What an A2A client sees of a run's event (None: nothing).

    The entry agent's streamed text grows the answer artifact; agents starting and ending,
    refusals and approvals are `working` updates that say so; the run's end is the final state
    (with the answer).
    """
    ids = {"task_id": run_id, "context_id": context_id}
    if isinstance(event, ModelDelta):
        if len(event.chain) != entry_depth:
            return None
        return TaskArtifactUpdateEvent(
            **ids, artifact=_answer(run_id, event.text), append=True, last_chunk=False
        )
    if isinstance(event, RunFinished):
        ended = event.output if event.status == RunStatus.SUCCEEDED else event.error
        spent = struct(
            {
                META_USAGE: event.usage.model_dump() if event.usage else None,
                META_STATUS: event.status.value,
            }
        )
        return TaskStatusUpdateEvent(
            **ids,
            status=_status(run_state(event.status), ended, run_id, context_id),
            metadata=spent,
        )
    if isinstance(event, AgentStarted | AgentFinished | DelegationRefused | ApprovalRequested):
        working = _status(TaskState.TASK_STATE_WORKING, _plain(event), run_id, context_id)
        meta = struct({"baton.event": event.type, "baton.agent": event.agent})
        return TaskStatusUpdateEvent(**ids, status=working, metadata=meta)
    return None


def _plain(event: Event) -> str:
    if isinstance(event, AgentStarted):
        return f"{event.agent} started" + (f" (from {event.caller})" if event.caller else "")
    if isinstance(event, AgentFinished):
        return f"{event.agent} {event.status.value}"
    if isinstance(event, DelegationRefused):
        return f"{event.agent} -> {event.target} refused: {event.message}"
    if isinstance(event, ApprovalRequested):
        return f"{event.agent} waits for approval of {event.tool}"
    return event.type


def origin_of(message: Message, headers: dict[str, str]) -> tuple[Origin, str | None, float | None]:
    """The delegation a message carries, its entry agent and the seconds its caller still has.

    None: the system's entry agent, no limit given. The trace context comes from the message's
    metadata, else from the request's headers.
    """
    meta = MessageToDict(message.metadata) if message.HasField("metadata") else {}
    carrier = {k: str(meta[k]) for k in TRACE_KEYS if meta.get(k)}
    if not carrier:
        carrier = {k: headers[k] for k in TRACE_KEYS if headers.get(k)}
    origin = Origin(
        trace_context=carrier,
        chain=tuple(str(c) for c in meta.get(META_CHAIN) or ()),
        systems=tuple(str(s) for s in meta.get(META_SYSTEMS) or ()),
        context_id=message.context_id or None,
    )
    agent, deadline = meta.get(META_AGENT), meta.get(META_DEADLINE)
    deadline_s = float(deadline) if isinstance(deadline, int | float) else None
    return origin, str(agent) if agent else None, deadline_s
