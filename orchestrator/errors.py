"""What the run service refuses, and why: each error knows its HTTP status and a stable code.

These stay in the service process (they never cross Ray), so they need no pickling support.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agents.core.errors import BatonError
from agents.core.waits import WaitKind

__all__ = [
    "AgentLeftDown",
    "AmbiguousRunId",
    "ExperimentNotFound",
    "IdempotencyConflict",
    "InvalidArguments",
    "InvalidInput",
    "InvalidMemory",
    "InvalidState",
    "MemoryItemNotFound",
    "NotReady",
    "NotReplayable",
    "NotResumable",
    "NothingToCompare",
    "Overloaded",
    "RunNotFound",
    "ServiceError",
    "SpendingCapReached",
    "StateConflict",
    "ThreadBusy",
    "ThreadFull",
    "ThreadNotFound",
    "UnknownTenant",
    "VersionNotRunning",
    "VersionRefused",
    "WaitClosed",
    "WaitNotFound",
]


class ServiceError(BatonError):
    """A request the service cannot honour; `status` and `code` go to the client."""

    status = 400
    code = "bad_request"
    headers: ClassVar[dict[str, str]] = {}  # sent with the answer

    def __init__(self, message: str, **details: Any) -> None:
        self.message = message
        self.details = details
        super().__init__(message)


class RunNotFound(ServiceError):
    """No run has this id."""

    status = 404
    code = "run_not_found"

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run {run_id!r}", run_id=run_id)


class ExperimentNotFound(ServiceError):
    """No experiment has this id (or another tenant's has: no existence leak)."""

    status = 404
    code = "experiment_not_found"

    def __init__(self, experiment_id: str) -> None:
        super().__init__(f"no experiment {experiment_id!r}", experiment_id=experiment_id)


class UnknownTenant(ServiceError):
    """No tenant of this name is the caller's to see."""

    status = 404
    code = "tenant_not_found"

    def __init__(self, tenant: str) -> None:
        super().__init__(f"no tenant {tenant!r}", tenant=tenant)


class ThreadNotFound(ServiceError):
    """No thread has this id (or it was deleted)."""

    status = 404
    code = "thread_not_found"

    def __init__(self, thread_id: str) -> None:
        super().__init__(f"no thread {thread_id!r}", thread_id=thread_id)


class ThreadBusy(ServiceError):
    """A run of the thread is under way, and the submission's strategy is `reject`."""

    status = 409
    code = "thread_busy"
    headers: ClassVar[dict[str, str]] = {"Multitask-Strategy": "reject"}  # what refused it

    def __init__(self, thread_id: str, running: str) -> None:
        super().__init__(
            f"thread {thread_id!r} has a run under way ({running}); wait for it, or submit with "
            "multitask_strategy enqueue, interrupt or rollback",
            thread_id=thread_id,
            running=running,
            multitask_strategies=["enqueue", "interrupt", "rollback"],
        )


class ThreadFull(ServiceError):
    """The thread has taken as many turns as a thread may (`BATON_THREAD_MAX_TURNS`)."""

    status = 409
    code = "thread_full"

    def __init__(self, thread_id: str, turns: int, max_turns: int) -> None:
        super().__init__(
            f"thread {thread_id!r} has {turns} turns, and a thread takes {max_turns} at most "
            "(BATON_THREAD_MAX_TURNS): start a new thread",
            thread_id=thread_id,
            turns=turns,
            max_turns=max_turns,
        )


class StateConflict(ServiceError):
    """A change of a thread's state that names a version it no longer has."""

    status = 409
    code = "state_conflict"

    def __init__(self, thread_id: str, version: int, current: int) -> None:
        super().__init__(
            f"thread {thread_id!r}: its state changed since version {version} (it is at "
            f"{current}); read it again and apply your change to that",
            thread_id=thread_id,
            version=version,
            current_version=current,
        )


class InvalidState(ServiceError):
    """A change of a thread's state that the team's state schema refuses."""

    status = 422
    code = "invalid_state"

    def __init__(self, thread_id: str, problem: str) -> None:
        super().__init__(f"thread {thread_id!r}: {problem}", thread_id=thread_id)


class MemoryItemNotFound(ServiceError):
    """No memory item of the caller's tenant has this namespace and key."""

    status = 404
    code = "memory_item_not_found"

    def __init__(self, namespace: str, key: str) -> None:
        super().__init__(
            f"nothing is remembered as {key!r} in {namespace!r}", namespace=namespace, key=key
        )


class InvalidMemory(ServiceError):
    """A memory item memory does not take (a value too long, say)."""

    status = 422
    code = "invalid_memory"


class AmbiguousRunId(ServiceError):
    """A short run id (a prefix) that names more than one run."""

    status = 400
    code = "ambiguous_run_id"

    def __init__(self, prefix: str, candidates: list[str]) -> None:
        super().__init__(
            f"run id {prefix!r} is ambiguous: it begins {', '.join(candidates)}"
            f"{' and more' if len(candidates) > 2 else ''}; give more of it",
            run_id=prefix,
            candidates=candidates,
        )


class IdempotencyConflict(ServiceError):
    """An Idempotency-Key was reused with a different request."""

    status = 409
    code = "idempotency_conflict"


class Overloaded(ServiceError):
    """Too many runs in flight and queued; try again after `retry_after_s`."""

    status = 429
    code = "overloaded"

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message, retry_after_s=retry_after_s)
        self.retry_after_s = retry_after_s


class SpendingCapReached(Overloaded):
    """The run's tenant or key has spent its daily cap: no run until the next UTC day."""

    code = "spending_cap_reached"

    def __init__(self, reached: str, retry_after_s: float) -> None:
        super().__init__(
            f"{reached}; runs start again at the next UTC day (or when the cap is raised)",
            int(retry_after_s) + 1,
        )


class ProviderGateClosed(Overloaded):
    """The entry agent's model is held at its provider gate past the run's deadline.

    So is each of its fallbacks: the run could not make its first call in time.
    """

    code = "provider_gate_closed"

    def __init__(self, why: str, retry_after_s: float) -> None:
        super().__init__(why, int(retry_after_s) + 1)


class NotReady(ServiceError):
    """The service cannot take this now (starting, or stopping)."""

    status = 503
    code = "not_ready"


class AgentLeftDown(ServiceError):
    """The run's entry agent cannot be called: its host is left down after a crash loop."""

    status = 503
    code = "agent_left_down"

    def __init__(self, agent: str, cause: str) -> None:
        super().__init__(
            f"agent {agent!r} cannot take runs: its host is left down ({cause}); restarting the "
            "service (or a new version of the team) starts it again",
            agent=agent,
        )


class WaitNotFound(ServiceError):
    """No wait of this kind with this id is in the run (no such call, no such question)."""

    status = 404
    codes: ClassVar[dict[WaitKind, str]] = {
        "approval": "approval_not_found",
        "question": "question_not_found",
    }
    code = "wait_not_found"

    def __init__(self, kind: WaitKind, run_id: str, wait_id: str) -> None:
        self.code = self.codes[kind]
        what = "call waiting for approval" if kind == "approval" else "question"
        super().__init__(
            f"run {run_id!r} has no {what} {wait_id!r}",
            run_id=run_id,
            **{"call_id" if kind == "approval" else "question_id": wait_id},
        )


class WaitClosed(ServiceError):
    """Nothing of this kind waits for the word given.

    Decided or answered already (by someone else, or by expiry), the run is over, or it asks
    several questions and none was named.
    """

    status = 409
    codes: ClassVar[dict[WaitKind, str]] = {
        "approval": "approval_conflict",
        "question": "not_waiting_for_input",
    }
    code = "wait_closed"

    def __init__(self, kind: WaitKind, message: str, **details: Any) -> None:
        self.code = self.codes[kind]
        super().__init__(message, **details)


class InvalidArguments(ServiceError):
    """A person's edit of a call's arguments does not fit the tool's schema (the call waits on)."""

    status = 422
    code = "invalid_arguments"

    def __init__(self, call_id: str, tool: str, problems: list[str]) -> None:
        super().__init__(
            f"the edited arguments do not fit tool {tool!r}: {'; '.join(problems)}",
            call_id=call_id,
            problems=problems,
        )


class InvalidInput(ServiceError):
    """A run's structured input does not fit its entry agent's `input_schema`."""

    status = 422
    code = "invalid_input"

    def __init__(self, agent: str, problems: list[str]) -> None:
        super().__init__(
            f"the input does not fit {agent}: {'; '.join(problems)}",
            agent=agent,
            problems=problems,
        )


class NotResumable(ServiceError):
    """The run cannot resume: it is not interrupted or failed, or runs keep no step log."""

    status = 409
    code = "not_resumable"


class NotReplayable(ServiceError):
    """The run cannot be replayed: it has not ended, or runs keep no step log."""

    status = 409
    code = "not_replayable"


class NothingToCompare(ServiceError):
    """A run compared with no other: it replays or forks none, and none was named."""

    status = 409
    code = "nothing_to_compare"


class VersionNotRunning(ServiceError):
    """A version of the team asked for (a fork's) that does not run here."""

    status = 409
    code = "version_not_running"

    def __init__(self, version: str, running: list[str]) -> None:
        super().__init__(
            f"version {version!r} does not run here (running: {', '.join(running)})",
            version=version,
            running=running,
        )


class VersionRefused(ServiceError):
    """A new version of the team that was not started: the current one still serves.

    Its config is invalid (`issues` lists each problem where it is), names another team, or
    its agents did not start; or this service takes no new version.
    """

    status = 422
    code = "version_refused"
