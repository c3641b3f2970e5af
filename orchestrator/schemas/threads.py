"""Threads in the HTTP API: a conversation's creation, its turns, a turn's submission."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agents.core.messages import RunStatus, Usage
from orchestrator.schemas.runs import (
    NUMBER_ONLY,
    Metadata,
    RunLinks,
    RunRequest,
    metadata_field,
    run_links,
)
from orchestrator.store import StoredRun

if TYPE_CHECKING:  # the store's module loads SQLAlchemy: the API's schemas do without it
    from orchestrator.store.threads import StoredThread

__all__ = [
    "ThreadCreate",
    "ThreadLinks",
    "ThreadPageView",
    "ThreadRunSubmission",
    "ThreadStatePatch",
    "ThreadView",
    "TurnView",
    "thread_view",
]


class ThreadRunSubmission(RunRequest):
    """The body of `POST /v1/threads/{id}/runs`: a run, and what to do if one is under way."""

    agent: str | None = Field(
        default=None,
        description="The entry agent: an agent, `auto` (routed by capabilities) or `last` (the "
        "agent that answered the thread's last turn); unset: the thread's `agent`, else the "
        "team's entry agent.",
    )
    multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"] = Field(
        default="reject",
        description="If a run of the thread is under way: `reject` (409), `enqueue` (this one "
        "starts when it ends), `interrupt` (it is cancelled, recorded so, and this one sees what "
        "it made) or `rollback` (it is cancelled and removed).",
    )


class ThreadCreate(BaseModel):
    """The body of `POST /v1/threads`."""

    model_config = ConfigDict(extra="forbid")

    metadata: Metadata = metadata_field("the thread (a user id, say)")
    agent: str | None = Field(
        default=None,
        description="The entry agent of its turns that name none: an agent, `auto`, or `last` "
        "(the agent that answered the last turn goes on, as ADK keeps the agent that had the "
        "conversation); unset: the team's entry agent.",
    )


class ThreadStatePatch(BaseModel):
    """The body of `PATCH /v1/threads/{id}/state`: keys to set, on the version read."""

    model_config = ConfigDict(extra="forbid")

    values: dict[str, Any] = Field(
        description="Each key set to its value (replaced, whatever its reducer; null removes "
        "it), checked against the team's state schema."
    )
    version: Annotated[int, Field(ge=0), NUMBER_ONLY] = Field(
        description="The `state_version` read: another change since is a `409`."
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
    entry_agent: str | None = Field(description="The agent the turn entered at.")
    answered_by: str | None = Field(
        description="The agent whose answer the turn's is (the entry, or the one it handed the "
        "conversation over to); None until it ends."
    )
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
    agent: str | None = Field(
        description="The entry agent of turns that name none (`last`: the last to answer)."
    )
    state: dict[str, Any] | None = Field(
        default=None,
        description="Its shared state, which its next turn begins with (read alone; not in a "
        "list of threads).",
    )
    state_version: int = Field(
        default=0, description="Counts its state's changes: a `PATCH` of it names the one it read."
    )
    turn_count: int = Field(description="How many runs it has had.")
    last_turn_at: float | None = Field(description="When its last run was submitted (Unix s).")
    title: str | None = Field(description="Its first run's task (up to 200 characters).")
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


def thread_view(thread: StoredThread, turns: list[StoredRun] | None = None) -> ThreadView:
    """A thread as the API answers it; with its turns when they are given."""
    base = f"/v1/threads/{thread.id}"
    return ThreadView(
        id=thread.id,
        created_at=thread.created_at,
        metadata=thread.metadata,
        agent=thread.agent,
        state=None if turns is None else (thread.state or {}),
        state_version=thread.state_version,
        turn_count=thread.turn_count if turns is None else len(turns),
        last_turn_at=thread.last_turn_at if not turns else turns[-1].created_at,
        title=thread.first_task if not turns else turns[0].task[:200],
        turns=None
        if turns is None
        else [
            TurnView(
                run_id=run.id,
                task=run.task,
                status=run.status,
                entry_agent=run.entry_agent,
                answered_by=run.answered_by,
                output=run.output,
                error=run.error,
                usage=run.usage,
                created_at=run.created_at,
                finished_at=run.finished_at,
                links=run_links(run),
            )
            for run in turns
        ],
        links=ThreadLinks(self=base, runs=f"{base}/runs"),
    )
