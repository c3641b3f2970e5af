"""A2A's methods over the run service: a message starts a run, a task is that run.

The a2a-sdk's JSON-RPC dispatcher parses requests and frames answers (and SSE streams); this
handler answers each method from Baton's own run service, store and event feed, so a task has
the run's id, lives in the run store, and its updates are the run's events.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, TypeVar, cast

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
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatusUpdateEvent,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict
from sqlalchemy.exc import DBAPIError

from agents.core.a2a_meta import META_AGENT
from agents.core.messages import RunStatus
from agents.core.storable import nul_refusal
from agents.core.store_faults import store_unavailable
from agents.core.waits import Resolution
from agents.ray.ledger_actor import SETTLE_WAIT_S
from orchestrator.a2a.push import PushConfigStore, Pusher
from orchestrator.a2a.tasks import (
    EXCHANGED,
    context_of,
    context_thread,
    origin_of,
    run_state,
    run_updates,
    stored_task,
)
from orchestrator.access import Access
from orchestrator.access import Role as KeyRole
from orchestrator.engine.submission import Submission
from orchestrator.errors import (
    IdempotencyConflict,
    InvalidInput,
    RunNotFound,
    ServiceError,
    ThreadNotFound,
    WaitClosed,
)
from orchestrator.schemas import MAX_DEADLINE_S
from orchestrator.service import RunService
from orchestrator.store import StoredRun
from orchestrator.system.routing import AUTO

__all__ = ["BatonRequestHandler"]

logger = logging.getLogger(__name__)

_Method = TypeVar("_Method", bound=Callable[..., Awaitable[Any]])
_Stream = TypeVar("_Stream", bound=Callable[..., AsyncGenerator[Any]])

# How long a cancelled task's answer waits for the run to end: it usually takes milliseconds,
# but a run whose agent was stopped before it began waits (bounded) for its last events and
# spans (`SETTLE_WAIT_S`). Past this the task is answered as it stands, its cancellation under
# way.
_CANCEL_WAIT_S = SETTLE_WAIT_S + 2.0
_PAGE = 50
_MAX_PAGE = 100


def _store_error(exc: DBAPIError) -> InternalError:
    """A store's error as a client is told it: its kind, never the statement it quotes."""
    if store_unavailable(exc):
        return InternalError(message="the run store is unavailable: retry later")
    logger.error("a2a: the run store could not answer: %s", exc)
    cause = type(getattr(exc, "orig", None) or exc).__name__
    return InternalError(
        message=f"the run store could not answer ({cause}); the service logged why"
    )


def _store_errors_said(method: _Method) -> _Method:
    """A method whose store errors are answered by `_store_error`."""

    @functools.wraps(method)
    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(self, *args, **kwargs)
        except DBAPIError as exc:
            raise _store_error(exc) from None

    return cast("_Method", call)


def _store_errors_said_stream(method: _Stream) -> _Stream:
    """A streaming method whose store errors are answered by `_store_error`."""

    @functools.wraps(method)
    async def stream(self: Any, *args: Any, **kwargs: Any) -> AsyncGenerator[Any]:
        try:
            async for item in method(self, *args, **kwargs):
                yield item
        except DBAPIError as exc:
            raise _store_error(exc) from None

    return cast("_Stream", stream)


class BatonRequestHandler(RequestHandler):
    """Answers A2A's methods for one agent system, from the service `current` returns.

    Args:
        blocking_wait_s: how long a blocking SendMessage waits for the task's end before it
            answers with the task as it stands (None: to the end, as the spec says; a bound
            below the clients' own timeout lets them learn the task's id and follow it).
        push_private: webhooks may be plain HTTP and on private addresses (see `push`).
    """

    def __init__(
        self,
        current: Callable[[], Awaitable[RunService]],
        blocking_wait_s: float | None = None,
        push_private: bool = False,
    ) -> None:
        self._current = current
        self._blocking_wait_s = blocking_wait_s
        self._push_configs = PushConfigStore(current)
        self._pusher = Pusher(current, self._push_configs, push_private)

    @_store_errors_said
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        """Start a run; answer its task once it ends (or sooner, see below).

        At once with `return_immediately`; as it stands after the service's `blocking_wait_s`
        (the client follows it from there).
        """
        service = await self._current()
        config = params.configuration
        run, answered = await self._submit(service, params, context, stream=False)
        viewer = _caller(context, "read")
        last = None
        if not config.return_immediately:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._blocking_wait_s):
                    async for update in self._updates(service, run, answered):
                        last = update
        history = config.history_length if config.HasField("history_length") else None
        task = await self._task(service, run.id, viewer, _history(history))
        if (
            isinstance(last, TaskStatusUpdateEvent)
            and last.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            and task.status.state
            in (TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_INPUT_REQUIRED)
        ):
            # The question it stopped at, with its text: the stored status and the stored
            # event follow a moment later.
            task.status.CopyFrom(last.status)
        return task

    @_store_errors_said_stream
    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[A2AEvent]:
        """Start a run whose models stream; its task, then its updates to the final state."""
        service = await self._current()
        run, answered = await self._submit(service, params, context, stream=True)
        yield await self._task(service, run.id, _caller(context, "read"), None)
        async for update in self._updates(service, run, answered):
            yield update

    @_store_errors_said
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        """The task a run is now."""
        history = params.history_length if params.HasField("history_length") else None
        viewer = _caller(context, "read")
        return await self._task(await self._current(), params.id, viewer, _history(history))

    @_store_errors_said
    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        """Runs, newest first, as tasks (`page_token`: where the page starts).

        Filtered by the caller's tenant, context, state and the time of the last change, in the
        store's query.
        """
        viewer = _caller(context, "read")
        service = await self._current()
        size = params.page_size if params.HasField("page_size") else _PAGE
        if not 1 <= size <= _MAX_PAGE:
            raise InvalidParamsError(f"pageSize must be 1 to {_MAX_PAGE}, not {size}")
        token = params.page_token
        if token and not (token.isdigit() and len(token) < 10):
            raise InvalidParamsError(f"pageToken {token!r} is not one this service gave")
        history = params.history_length if params.HasField("history_length") else None
        statuses = None
        if params.status:
            statuses = [s.value for s in RunStatus if run_state(s) == params.status]
            if not statuses:
                name = TaskState.Name(params.status)
                raise InvalidParamsError(f"no Baton task is ever in state {name}")
        after = None
        if params.HasField("status_timestamp_after"):
            after = params.status_timestamp_after.ToNanoseconds() / 1e9
        offset = int(token or 0)
        page = await service.list_runs(
            status=statuses,
            thread_id=context_thread(params.context_id, viewer.tenant)
            if params.context_id
            else None,
            changed_after=after,
            viewer=viewer,
            limit=size,
            offset=offset,
        )
        artifacts = params.include_artifacts
        end = offset + len(page.runs)
        return ListTasksResponse(
            tasks=[
                stored_task(run, _history(history), artifacts, await self._exchanged(service, run))
                for run in page.runs
            ],
            next_page_token=str(end) if end < page.total else "",
            page_size=len(page.runs),
            total_size=page.total,
        )

    @_store_errors_said
    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        """Cancel the run (wherever it runs); answer its task once it has stopped."""
        service = await self._current()
        caller = _caller(context, "submit")
        run = await self._run(service, params.id, caller)
        if run.finished:
            raise TaskNotCancelableError(f"task {run.id} has ended ({run.status.value})")
        await service.cancel(run.id, caller)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_CANCEL_WAIT_S):
                async for _ in self._updates(service, run):
                    pass
        return await self._task(service, run.id, caller, None)

    @_store_errors_said_stream
    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[A2AEvent]:
        """The task now, then its updates to the final state (its whole story, from the start).

        A task that has ended has nothing to follow (§3.1.6): GetTask reads it.
        """
        service = await self._current()
        viewer = _caller(context, "read")
        run = await self._run(service, params.id, viewer)
        if run.finished:
            raise UnsupportedOperationError(
                f"task {run.id} has ended ({run.status.value}): read it with GetTask"
            )
        yield await self._task(service, run.id, viewer, None)
        async for update in self._updates(service, run):
            yield update

    async def _submit(
        self,
        service: RunService,
        params: SendMessageRequest,
        context: ServerCallContext,
        stream: bool,
    ) -> tuple[StoredRun, tuple[str, ...]]:
        """The run the message starts, or whose question it answers (see `_follow_up`).

        With the question it answered, if any: the run's updates go on past it.
        """
        message = params.message
        text, given = asked_in(message)
        if message.task_id:
            return await self._follow_up(service, message, text, context)
        headers = {k.lower(): v for k, v in context.state.get("headers", {}).items()}
        origin, agent, deadline_s = origin_of(message, headers)
        name = service.system.config.name
        if name in origin.systems:
            route = " -> ".join([*origin.systems, name])
            raise InvalidRequestError(
                f"delegation cycle across agent systems: {route} ({name} is already on the chain)",
                data={"reason": "cycle", "systems": [*origin.systems, name]},
            )
        if agent is not None and agent != AUTO and agent not in service.system.topology.graph:
            raise InvalidParamsError(f"unknown agent {agent!r} (metadata {META_AGENT!r})")
        if deadline_s is not None:
            deadline_s = min(max(deadline_s, 0.001), MAX_DEADLINE_S)
        # Its context is a thread of the caller's tenant, made the first time: the task's
        # agents see the context's earlier tasks. Tasks of one context run side by side.
        caller = _caller(context, "submit")
        request = Submission(
            task=text,
            input=given,
            agent=agent,
            deadline_s=deadline_s,
            stream=stream,
            origin=origin,
            thread_id=context_thread(message.context_id, caller.tenant)
            if message.context_id
            else None,
            waits_for_turns=False,
        )
        pushed = params.configuration.HasField("task_push_notification_config")
        webhook = params.configuration.task_push_notification_config
        if pushed:
            await self._pusher.check(webhook.url)
        try:
            if request.thread_id is not None:
                await service.threads.ensure(request.thread_id, caller)
            run, _ = await service.submit(
                request, idempotency_key=f"a2a:{message.message_id}", caller=caller
            )
        except IdempotencyConflict:
            raise InvalidParamsError(
                f"messageId {message.message_id!r} was sent before with another message: "
                "a new message needs a new messageId",
                data={"reason": "message_id_reused"},
            ) from None
        except ThreadNotFound:
            raise InvalidParamsError(
                f"contextId {message.context_id!r} is a conversation this caller cannot "
                "continue: send the message with another contextId (or none)",
                data={"reason": "context_not_yours"},
            ) from None
        except InvalidInput as exc:
            raise InvalidParamsError(
                f"the message's data part: {exc.message}",
                data={"reason": "invalid_input", "problems": exc.details["problems"]},
            ) from None
        except ServiceError as exc:
            raise InternalError(f"{exc.code}: {exc.message}") from None
        if pushed:  # its updates go to the client's webhook too
            await self._push_configs.set_info(run.id, webhook, context)
            self._pusher.follow(run)
        return run, ()

    async def _follow_up(
        self, service: RunService, message: Message, text: str, context: ServerCallContext
    ) -> tuple[StoredRun, tuple[str, ...]]:
        """A message for an existing task: the answer to its question (`input-required`).

        Returns the run and the question answered. A task that asks nothing is refused with the
        reason: a Baton task takes the one message it started with, and the answers to its
        questions; a new message is a new task, in the same context. A message that names
        another context than the task's is refused (A2A 1.0 §3.4.3).
        """
        caller = _caller(context, "approve")
        run = await self._run(service, message.task_id, caller)
        if message.context_id and message.context_id != context_of(run):
            raise InvalidParamsError(
                f"task {run.id} is in context {context_of(run)!r}, not {message.context_id!r}: "
                "send its answer with the task's contextId (or none)",
                data={"reason": "context_mismatch"},
            )
        if run.finished:
            raise UnsupportedOperationError(
                f"task {run.id} has ended ({run.status.value}): it takes no more messages; "
                "send a new message (without taskId) in its context"
            )
        try:
            reply = Resolution.reply(text, who=f"a2a:{caller.who}")
            answered = await service.desk.resolve(run, reply)
        except WaitClosed:
            raise UnsupportedOperationError(
                f"task {run.id} is {run.status.value} and asks for no input: send a new message "
                "(without taskId) in its context, or cancel it"
            ) from None
        except ServiceError as exc:
            raise InternalError(f"{exc.code}: {exc.message}") from None
        return await self._run(service, run.id, caller), (str(answered["question_id"]),)

    async def _updates(
        self, service: RunService, run: StoredRun, answered: tuple[str, ...] | None = None
    ) -> AsyncGenerator[A2AEvent]:
        """The run's updates: to its end, or (`answered` given) to a question not among them."""
        followed = service.events.follow(run)
        async for update in run_updates(run, followed, answered is not None, answered or ()):
            yield update

    async def _task(
        self, service: RunService, run_id: str, viewer: Access, history: int | None
    ) -> Task:
        run = await self._run(service, run_id, viewer)
        return stored_task(run, history, exchanged=await self._exchanged(service, run))

    async def _exchanged(self, service: RunService, run: StoredRun) -> list[tuple[int, Any]]:
        """The run's questions and answers, if its team asks any."""
        if not service.system.waits_for_people:
            return []
        return await service.events.stored_of(run, EXCHANGED)

    @staticmethod
    async def _run(service: RunService, run_id: str, viewer: Access) -> StoredRun:
        try:
            return await service.get(run_id, viewer)
        except RunNotFound:
            raise TaskNotFoundError(f"no task {run_id!r}") from None

    @_store_errors_said
    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """Register a webhook for a task that has not ended; its updates are pushed there."""
        service = await self._current()
        run = await self._run(service, params.task_id, _caller(context, "submit"))
        if run.finished:
            raise UnsupportedOperationError(
                f"task {run.id} has ended ({run.status.value}): there is nothing left to push"
            )
        await self._pusher.check(params.url)
        config = await self._push_configs.set_info(run.id, params, context)
        self._pusher.follow(run)
        return config

    @_store_errors_said
    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """One of the caller's webhooks for a task."""
        await self._run(await self._current(), params.task_id, _caller(context, "read"))
        for config in await self._push_configs.get_info(params.task_id, context):
            if config.id == params.id:
                return config
        raise TaskNotFoundError(
            f"task {params.task_id} has no push notification config {params.id!r} of yours"
        )

    @_store_errors_said
    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        """The caller's webhooks for a task."""
        await self._run(await self._current(), params.task_id, _caller(context, "read"))
        configs = await self._push_configs.get_info(params.task_id, context)
        return ListTaskPushNotificationConfigsResponse(configs=configs)

    @_store_errors_said
    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        """Forget one of the caller's webhooks for a task."""
        await self._run(await self._current(), params.task_id, _caller(context, "submit"))
        await self._push_configs.delete_info(params.task_id, context, params.id)

    @_store_errors_said
    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        """No extended card: the public one says it all."""
        raise ExtendedAgentCardNotConfiguredError("the public card is all there is")


def asked_in(message: Message) -> tuple[str, Any]:
    """What a user's message asks: its text, and its structured input (its first data part).

    Raises `InvalidParamsError` naming what is missing or wrong.
    """
    if not message.message_id:
        raise InvalidParamsError(
            "the message has no messageId: it is required (it makes a resent message start "
            "one task, not two)"
        )
    if message.role != Role.ROLE_USER:
        raise InvalidParamsError(
            "the message's role must be ROLE_USER (a task is asked by its user), not "
            f"{Role.Name(message.role)}"
        )
    text = get_message_text(message).strip()
    data = [MessageToDict(p.data) for p in message.parts if p.WhichOneof("content") == "data"]
    if not text and not data:
        raise InvalidParamsError(
            "the message has no text part and no data part: a Baton task is text, with "
            "structured input as a data part"
        )
    text = text or "Work on the input."
    if refusal := nul_refusal(text, "the message's text"):
        raise InvalidParamsError(refusal)
    return text, data[0] if data else None


def _caller(context: ServerCallContext, role: KeyRole) -> Access:
    """Who calls (`KeyCheck` named them: the request's `auth`), if they have `role`."""
    access = context.state.get("auth")
    if not isinstance(access, Access):
        raise InvalidRequestError("no caller: this endpoint is served behind baton's key check")
    if refusal := access.lacks(role):
        raise InvalidRequestError(refusal, data={"reason": "forbidden", "role": role})
    return access


def _history(length: int | None) -> int | None:
    """A historyLength as asked (None: all), refused when negative."""
    if length is not None and length < 0:
        raise InvalidParamsError(f"historyLength must be 0 or more, not {length}")
    return length
