"""Baton runs as A2A tasks: a task is a run (same id), its events are status and artifact updates.

A2A's types are protocol buffers (a2a-sdk 1.x); this module only builds and reads them.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Collection, Sequence
from typing import Any

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
    DelegationRefusedEvent,
    Event,
    InputProvided,
    InputRequested,
    ModelDelta,
    RunFinished,
)
from agents.core.messages import RunStatus
from orchestrator.engine.submission import Origin
from orchestrator.store import StoredRun

__all__ = [
    "ANSWER",
    "EXCHANGED",
    "FINAL_STATES",
    "changed_at",
    "context_of",
    "context_thread",
    "origin_of",
    "run_state",
    "run_updates",
    "stored_task",
    "task_update",
]

# Where the threads of A2A contexts are named (`context_thread`).
_CONTEXTS = uuid.UUID("6f1c4f5e-0b1a-4c53-9a55-b4a2c0a2a5e1")

# The artifact that holds a run's answer.
ANSWER = "answer"

_STATES = {
    RunStatus.QUEUED: TaskState.TASK_STATE_SUBMITTED,
    RunStatus.RUNNING: TaskState.TASK_STATE_WORKING,
    # A person decides on the Baton side (its API or UI), not the A2A caller: still working.
    RunStatus.WAITING_FOR_APPROVAL: TaskState.TASK_STATE_WORKING,
    # An agent asked the person a question: the A2A caller answers with a message on the task.
    RunStatus.INPUT_REQUIRED: TaskState.TASK_STATE_INPUT_REQUIRED,
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


def _text(text: str, message_id: str, role: Role = Role.ROLE_AGENT, **ids: str) -> Message:
    return Message(message_id=message_id, role=role, parts=[Part(text=text)], **ids)


def _status(
    state: TaskState, text: str | None, at: float, message_id: str, run_id: str, context_id: str
) -> TaskStatus:
    """A task's status: `at` is when it changed (so every read of it says the same)."""
    stamp = Timestamp()
    stamp.FromNanoseconds(round(at * 1e9))
    message = _text(text, message_id, task_id=run_id, context_id=context_id) if text else None
    return TaskStatus(state=state, message=message, timestamp=stamp)


def _answer(run_id: str, text: str) -> Artifact:
    return Artifact(artifact_id=f"{run_id}-{ANSWER}", name=ANSWER, parts=[Part(text=text)])


def _origin(run: StoredRun) -> dict[str, Any]:
    return (run.options or {}).get("origin") or {}


def context_of(run: StoredRun) -> str:
    """The task's context: the client's, else its thread's id, else its own id.

    (A task with none is a conversation of its own.)
    """
    return str(_origin(run).get("context_id") or run.thread_id or run.id)


def context_thread(context_id: str, tenant: str) -> str:
    """The thread of a tenant's A2A context.

    Contexts are the caller's words, one namespace per tenant: another tenant's same contextId
    is another conversation.
    """
    return uuid.uuid5(_CONTEXTS, f"{tenant}\x00{context_id}").hex


def changed_at(run: StoredRun) -> float:
    """When the run's state last changed."""
    return run.finished_at or run.started_at or run.created_at


# The events that are messages of a task's history besides its first: questions and answers.
EXCHANGED = (
    InputRequested.model_fields["type"].default,
    InputProvided.model_fields["type"].default,
)


def stored_task(
    run: StoredRun,
    history_length: int | None = None,
    artifacts: bool = True,
    exchanged: Sequence[tuple[int, Event]] = (),
) -> Task:
    """The task a stored run is: its state, the task as the user's message, the answer.

    Args:
        run: the run as stored.
        history_length: the last this many messages of its history (None: all of it).
        artifacts: with the answer artifact (ListTasks leaves it out unless asked).
        exchanged: the run's questions and answers (`EXCHANGED` events, numbered): messages of
            its history, the last question its status message while it waits.
    """
    context_id = context_of(run)
    ended = run.output if run.status == RunStatus.SUCCEEDED else run.error
    state = run_state(run.status)
    asking = [e for _, e in exchanged if isinstance(e, InputRequested)]
    if run.status == RunStatus.INPUT_REQUIRED and asking:
        ended = asking[-1].question
    task = Task(
        id=run.id,
        context_id=context_id,
        status=_status(
            state, ended, changed_at(run), f"{run.id}-{run.status.value}", run.id, context_id
        ),
        metadata=struct({META_STATUS: run.status.value, "baton.entry_agent": run.entry_agent}),
    )
    if artifacts and run.status == RunStatus.SUCCEEDED and run.output is not None:
        task.artifacts.append(_answer(run.id, run.output))
    # The user's message as it was sent (its id is the client's).
    asked = str(_origin(run).get("message_id") or f"{run.id}-task")
    history = [_text(run.task, asked, Role.ROLE_USER, task_id=run.id, context_id=context_id)]
    for seq, event in exchanged:
        if isinstance(event, InputRequested):
            said, role = event.question, Role.ROLE_AGENT
        elif isinstance(event, InputProvided) and event.by == "person":
            said, role = event.answer, Role.ROLE_USER
        else:
            continue
        ids = {"task_id": run.id, "context_id": context_id}
        history.append(_text(said, f"{run.id}-{seq}", role, **ids))
    if history_length != 0:
        task.history.extend(history[-history_length:] if history_length else history)
    return task


def task_update(
    event: Event, seq: int, run_id: str, context_id: str, entry_depth: int, streamed: bool
) -> TaskStatusUpdateEvent | TaskArtifactUpdateEvent | None:
    """What an A2A client sees of a run's event number `seq` (None: nothing).

    The entry agent's streamed text grows the answer artifact (`streamed`: a piece of it was
    sent already, so this one appends); agents starting and ending, refusals and approvals are
    `working` updates that say so; the run's end is the final state (with the answer).
    """
    ids = {"task_id": run_id, "context_id": context_id}
    if isinstance(event, ModelDelta):
        if len(event.chain) != entry_depth:
            return None
        return TaskArtifactUpdateEvent(
            **ids, artifact=_answer(run_id, event.text), append=streamed, last_chunk=False
        )
    message_id = f"{run_id}-{seq}"
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
            status=_status(
                run_state(event.status), ended, event.ts, message_id, run_id, context_id
            ),
            metadata=spent,
        )
    if isinstance(event, InputRequested):
        asking = _status(
            TaskState.TASK_STATE_INPUT_REQUIRED, event.question, event.ts, message_id, run_id,
            context_id,
        )  # fmt: skip
        meta = struct(
            {"baton.event": event.type, "baton.agent": event.agent, "baton.choices": event.choices}
        )
        return TaskStatusUpdateEvent(**ids, status=asking, metadata=meta)
    if isinstance(
        event,
        AgentStarted | AgentFinished | DelegationRefusedEvent | ApprovalRequested | InputProvided,
    ):
        working = _status(
            TaskState.TASK_STATE_WORKING, _plain(event), event.ts, message_id, run_id, context_id
        )
        meta = struct({"baton.event": event.type, "baton.agent": event.agent})
        return TaskStatusUpdateEvent(**ids, status=working, metadata=meta)
    return None


def _plain(event: Event) -> str:
    if isinstance(event, AgentStarted):
        return f"{event.agent} started" + (f" (from {event.caller})" if event.caller else "")
    if isinstance(event, AgentFinished):
        return f"{event.agent} {event.status.value}"
    if isinstance(event, DelegationRefusedEvent):
        return f"{event.agent} -> {event.target} refused: {event.message}"
    if isinstance(event, ApprovalRequested):
        return f"{event.agent} waits for approval of {event.tool}"
    if isinstance(event, InputProvided):
        return "answered" if event.by == "person" else "no answer came before the deadline"
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
        message_id=message.message_id or None,
        context_id=message.context_id or None,
    )
    agent, deadline = meta.get(META_AGENT), meta.get(META_DEADLINE)
    deadline_s = float(deadline) if isinstance(deadline, int | float) else None
    return origin, str(agent) if agent else None, deadline_s


async def run_updates(
    run: StoredRun,
    items: AsyncIterator[tuple[int, Event] | None],
    until_input: bool = False,
    answered: Collection[str] = (),
) -> AsyncGenerator[TaskStatusUpdateEvent | TaskArtifactUpdateEvent]:
    """A run's updates to its end, the answer artifact whole just before the final state.

    `items`: its events as followed (None: a heartbeat), for a stream, a cancel or a webhook.
    `until_input`: stop at a question to the caller too (`input-required`), as a blocking send
    and a stream do: the caller's answer on the task goes on from there (`answered`: the
    question it answered; what came before it, it has seen).
    """
    depth = len(_origin(run).get("chain") or ()) + 1
    context_id = context_of(run)
    streamed = False
    skipping = bool(answered)
    async for item in items:
        if item is None:
            continue
        seq, event = item
        if skipping:
            skipping = not (isinstance(event, InputRequested) and event.call_id in answered)
            continue
        if isinstance(event, RunFinished) and event.output is not None:
            answer = stored_task(
                run.model_copy(update={"output": event.output, "status": event.status}), 0
            )
            if answer.artifacts:
                # The whole answer replaces the pieces streamed so far (`append` false).
                yield TaskArtifactUpdateEvent(
                    task_id=run.id, context_id=context_id, artifact=answer.artifacts[0],
                    append=False, last_chunk=True,
                )  # fmt: skip
        update = task_update(event, seq, run.id, context_id, depth, streamed)
        if isinstance(update, TaskArtifactUpdateEvent):
            streamed = True
        if update is not None:
            yield update
        if isinstance(event, RunFinished):
            return
        if until_input and isinstance(event, InputRequested):
            return
