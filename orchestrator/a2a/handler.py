"""A2A's methods over the run service: a message starts a run, a task is that run.

The a2a-sdk's JSON-RPC dispatcher parses requests and frames answers (and SSE streams); this
handler answers each method from Baton's own run service, store and event feed, so a task has
the run's id, lives in the run store, and its updates are the run's events.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncGenerator, Awaitable, Callable

from a2a.helpers.proto_helpers import get_message_text
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event as A2AEvent
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    ExtendedAgentCardNotConfiguredError,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    PushNotificationNotSupportedError,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    UnsupportedOperationError,
)

from agents.core.a2a_meta import META_AGENT
from agents.core.events import RunFinished
from agents.core.messages import RunStatus
from agents.ray.ledger_actor import SETTLE_WAIT_S
from orchestrator.a2a.tasks import (
    origin_of,
    run_state,
    stored_task,
    task_update,
)
from orchestrator.engine.submission import Submission
from orchestrator.errors import RunNotFound, ServiceError
from orchestrator.schemas import MAX_DEADLINE_S
from orchestrator.service import RunService
from orchestrator.store import StoredRun
from orchestrator.system.config import AgentSystem
from orchestrator.system.routing import AUTO

__all__ = ["BatonRequestHandler"]

# How long a cancelled task's answer waits for the run to end: it usually takes milliseconds,
# but a run whose agent was stopped before it began waits (bounded) for its last events and
# spans (`SETTLE_WAIT_S`). Past this the task is answered as it stands, its cancellation under
# way.
_CANCEL_WAIT_S = SETTLE_WAIT_S + 2.0
_PAGE = 50
# The statuses a `status` filter of ListTasks can name (one per A2A state).
_LISTED = (
    RunStatus.QUEUED,
    RunStatus.RUNNING,
    RunStatus.SUCCEEDED,
    RunStatus.FAILED,
    RunStatus.CANCELLED,
)


class BatonRequestHandler(RequestHandler):
    """Answers A2A's methods for one agent system, from the service `current` returns."""

    def __init__(self, system: AgentSystem, current: Callable[[], Awaitable[RunService]]) -> None:
        self._system = system
        self._current = current

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        """Start a run; answer its task once it ends (or at once with `return_immediately`)."""
        service = await self._current()
        run = await self._submit(service, params, context, stream=False)
        if not params.configuration.return_immediately:
            async for _ in self._updates(service, run):
                pass
        return await self._task(service, run.id, params.configuration.history_length or None)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[A2AEvent]:
        """Start a run whose models stream; its task, then its updates to the final state."""
        service = await self._current()
        run = await self._submit(service, params, context, stream=True)
        yield stored_task(run)
        async for update in self._updates(service, run):
            yield update

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        """The task a run is now."""
        history = params.history_length if params.HasField("history_length") else None
        return await self._task(await self._current(), params.id, history)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        """Runs, newest first, as tasks (`page_token`: where the page starts)."""
        service = await self._current()
        size = min(params.page_size or _PAGE, 100)
        offset = int(params.page_token) if params.page_token.isdigit() else 0
        wanted = [s for s in _LISTED if params.status and run_state(s) == params.status]
        status = wanted[0].value if wanted else None
        page = await service.list_runs(status=status, limit=size, offset=offset)
        history = params.history_length if params.HasField("history_length") else None
        after = offset + len(page.runs)
        return ListTasksResponse(
            tasks=[stored_task(run, history) for run in page.runs],
            next_page_token=str(after) if after < page.total else "",
            page_size=size,
            total_size=page.total,
        )

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        """Cancel the run (wherever it runs); answer its task once it has stopped."""
        service = await self._current()
        run = await self._run(service, params.id)
        if run.finished:
            raise TaskNotCancelableError(f"task {run.id} has ended ({run.status.value})")
        await service.cancel(run.id)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_CANCEL_WAIT_S):
                async for _ in self._updates(service, run):
                    pass
        return await self._task(service, run.id, None)

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[A2AEvent]:
        """The task now, then its updates to the final state (its whole story, from the start)."""
        service = await self._current()
        run = await self._run(service, params.id)
        yield stored_task(run)
        if not run.finished:
            async for update in self._updates(service, run):
                yield update

    async def _submit(
        self,
        service: RunService,
        params: SendMessageRequest,
        context: ServerCallContext,
        stream: bool,
    ) -> StoredRun:
        message = params.message
        if message.task_id:
            raise UnsupportedOperationError(
                "a Baton task takes one message: send a new message (without task_id)"
            )
        text = get_message_text(message).strip()
        if not text:
            raise InvalidParamsError("the message has no text part: a Baton task is text")
        headers = {k.lower(): v for k, v in context.state.get("headers", {}).items()}
        origin, agent, deadline_s = origin_of(message, headers)
        name = self._system.config.name
        if name in origin.systems:
            route = " -> ".join([*origin.systems, name])
            raise InvalidRequestError(
                f"delegation cycle across agent systems: {route} ({name} is already on the chain)",
                data={"reason": "cycle", "systems": [*origin.systems, name]},
            )
        if agent is not None and agent != AUTO and agent not in self._system.topology.graph:
            raise InvalidParamsError(f"unknown agent {agent!r} (metadata {META_AGENT!r})")
        if deadline_s is not None:
            deadline_s = min(max(deadline_s, 0.001), MAX_DEADLINE_S)
        request = Submission(
            task=text, agent=agent, deadline_s=deadline_s, stream=stream, origin=origin
        )
        caller = hashlib.sha256(headers.get("authorization", "").encode()).hexdigest()[:16]
        try:
            run, _ = await service.submit(
                request, idempotency_key=f"a2a:{message.message_id}", principal=f"a2a:{caller}"
            )
        except ServiceError as exc:
            raise InternalError(f"{exc.code}: {exc.message}") from None
        return run

    async def _updates(self, service: RunService, run: StoredRun) -> AsyncGenerator[A2AEvent]:
        """The run's updates to its end; the answer artifact whole just before the final state."""
        depth = len(((run.options or {}).get("origin") or {}).get("chain") or ()) + 1
        context_id = stored_task(run, 0).context_id
        async for item in service.events.follow(run):
            if item is None:
                continue
            event = item[1]
            if isinstance(event, RunFinished) and event.output is not None:
                answer = stored_task(
                    run.model_copy(update={"output": event.output, "status": event.status}), 0
                )
                if answer.artifacts:
                    yield TaskArtifactUpdateEvent(
                        task_id=run.id, context_id=context_id, artifact=answer.artifacts[0],
                        append=False, last_chunk=True,
                    )  # fmt: skip
            update = task_update(event, run.id, context_id, depth)
            if update is not None:
                yield update
            if isinstance(event, RunFinished):
                return

    async def _task(self, service: RunService, run_id: str, history: int | None) -> Task:
        return stored_task(await self._run(service, run_id), history)

    @staticmethod
    async def _run(service: RunService, run_id: str) -> StoredRun:
        try:
            return await service.get(run_id)
        except RunNotFound:
            raise TaskNotFoundError(f"no task {run_id!r}") from None

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """No push notifications: follow a task's stream instead."""
        raise PushNotificationNotSupportedError("follow a task with SendStreamingMessage")

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """No push notifications: follow a task's stream instead."""
        raise PushNotificationNotSupportedError("follow a task with SendStreamingMessage")

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        """No push notifications: follow a task's stream instead."""
        raise PushNotificationNotSupportedError("follow a task with SendStreamingMessage")

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        """No push notifications: follow a task's stream instead."""
        raise PushNotificationNotSupportedError("follow a task with SendStreamingMessage")

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        """No extended card: the public one says it all."""
        raise ExtendedAgentCardNotConfiguredError("the public card is all there is")
