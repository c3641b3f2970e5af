"""A remote agent: another agent system (or any A2A agent), delegated to over A2A.

It is an agent like the others to its callers, the guard, the trace and the diagram: the same
invocation, `invoke_agent` span and events (`AgentRuntime`), but its work is one A2A message
(`RemoteExchange`) instead of model and tool steps. The message carries the trace context, the
delegation chain and the time left; the remote task's updates become `remote_update` events
(its streamed answer, `model_delta` events); cancelling the invocation cancels the remote task.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from opentelemetry import trace

from agents.core.a2a_meta import META_STATUS, META_USAGE, message_metadata, qualified_chain
from agents.core.events import RemoteUpdate
from agents.core.messages import AgentResult, RunStatus, Usage
from agents.core.ports import Ledger
from agents.core.spec import RemoteSpec
from agents.runtime.deltas import Deltas
from agents.runtime.invocation import DELEGATION_GRACE_S, Invocation
from agents.runtime.people import People
from agents.runtime.reporting import Reporter
from tracing import attributes as attr
from tracing import inject_context

if TYPE_CHECKING:
    from a2a.client import Client
    from a2a.types import StreamResponse

__all__ = ["RemoteExchange"]

logger = logging.getLogger(__name__)

# How long the remote side may take to say which task is ours once the invocation is cancelled,
# and to answer the cancel (a Baton service answers once its run has stopped: up to 7 s).
_CANCEL_S = 5.0
_CANCEL_ANSWER_S = 10.0
_ENDED = {
    "TASK_STATE_COMPLETED": RunStatus.SUCCEEDED,
    "TASK_STATE_FAILED": RunStatus.FAILED,
    "TASK_STATE_CANCELED": RunStatus.CANCELLED,
    "TASK_STATE_REJECTED": RunStatus.FAILED,
    "TASK_STATE_INPUT_REQUIRED": RunStatus.FAILED,  # (asked, and left so: see `_ask`)
    "TASK_STATE_AUTH_REQUIRED": RunStatus.FAILED,
}


@dataclass
class _Exchange:
    """What one invocation learnt of its remote task so far."""

    task_id: str = ""
    context_id: str = ""
    state: str = ""
    # Its artifacts' text, by artifact id, in the order they came: the answer is all of them.
    artifacts: dict[str, str] = field(default_factory=dict)
    said: str = ""  # the last status message
    unasked: str = ""  # a question the remote agent asked that no one here may answer
    final: str = ""  # the message of the status that ended the task (an answer without artifact)
    usage: Usage = field(default_factory=Usage)
    status: RunStatus | None = None  # how it ended, when a Baton service said so
    known: asyncio.Event = field(default_factory=asyncio.Event)  # set once task_id is

    @property
    def answer(self) -> str:
        """Every artifact's text, in the order they came."""
        return "\n\n".join(text for text in self.artifacts.values() if text)

    @property
    def asks(self) -> bool:
        """Whether the remote task waits for an answer to its question (`input-required`)."""
        return self.state == "TASK_STATE_INPUT_REQUIRED"


@dataclass
class RemoteExchange:
    """A remote agent's work for each invocation: one A2A exchange (see the module).

    Args:
        remote: the remote agent's address and credentials.
        reporter: where the invocation's events go, and how it ends.
        ledger: the run-wide record (the remote run's tokens count against the budget).
        people: who answers the remote agent's questions (the agent's `ask_user`); None: no
            one, and a remote task that asks is cancelled.
    """

    remote: RemoteSpec
    reporter: Reporter
    ledger: Ledger | None = None
    people: People | None = None
    _a2a: Client | None = field(default=None, init=False, repr=False)
    # Cancellations of remote tasks under way (kept: a cancelled invocation does not wait).
    _cancelling: set[asyncio.Task[None]] = field(default_factory=set, init=False, repr=False)

    async def _connect(self) -> Client:
        """The A2A client, made once from the agent's card (fetched again after a failure)."""
        if self._a2a is None:
            import httpx
            from a2a.client import ClientConfig, ClientFactory

            remote = self.remote
            headers = {name: os.environ.get(var, "") for name, var in remote.headers.items()}
            http = httpx.AsyncClient(
                headers=headers, timeout=httpx.Timeout(None, connect=remote.connect_timeout_s)
            )
            factory = ClientFactory(ClientConfig(streaming=True, httpx_client=http))
            try:
                self._a2a = await factory.create_from_url(remote.url)
            except BaseException:
                await http.aclose()
                raise
        return self._a2a

    async def run(self, inv: Invocation) -> AgentResult:
        """Send the task to the remote agent and follow its task to the end."""
        remote, ctx, span = self.remote, inv.ctx, trace.get_current_span()
        end = self.reporter.end
        where = urlsplit(remote.url)
        span.set_attribute(attr.URL_FULL, remote.url)
        span.set_attribute(attr.SERVER_ADDRESS, where.hostname or "")
        if where.port:
            span.set_attribute(attr.SERVER_PORT, where.port)
        inv.steps = 1
        seen = _Exchange()
        exchange = asyncio.ensure_future(self._exchange(inv, seen))
        try:
            # As for a delegation here: the remote run gets a moment to report its own limit.
            wait = max(ctx.time_left(), 0.001) + DELEGATION_GRACE_S
            async with asyncio.timeout(wait):
                await asyncio.shield(exchange)
        except TimeoutError:
            await self._cancel_remote(seen, exchange)
            return end(
                inv,
                RunStatus.LIMIT_EXCEEDED,
                error=f"run deadline ({ctx.limits.deadline_s:g}s) passed while {remote.url} "
                "worked on the task",
            )
        except asyncio.CancelledError:
            await self._cancel_remote(seen, exchange)
            raise
        except Exception as exc:
            self._a2a = None  # connect again next time (the card may have changed)
            return end(inv, RunStatus.FAILED, error=_failure(remote.url, exc))
        finally:
            if seen.task_id:
                span.set_attribute(attr.BATON_A2A_TASK_ID, seen.task_id)
                span.set_attribute(attr.BATON_A2A_STATE, seen.state)
        inv.usage = inv.usage + seen.usage
        if ctx.limits.token_budget is not None and self.ledger is not None:
            self.ledger.charge(ctx.run_id, seen.usage.total_tokens, f"{inv.id}/remote")
        if seen.unasked:
            return end(
                inv,
                RunStatus.FAILED,
                error=f"the remote task at {remote.url} asked {seen.unasked!r}, and no one here "
                "may answer it (the agent's ask_user passes questions on): it was cancelled",
            )
        status = seen.status or _ENDED.get(seen.state)
        if status is None:
            return end(
                inv, RunStatus.FAILED, error=f"{remote.url} ended the stream in state {seen.state}"
            )
        if status == RunStatus.SUCCEEDED:
            # The answer is the artifact; an agent may give it as its final message instead
            # (a2a-sdk's `TaskUpdater.complete(message)`).
            return end(inv, status, output=seen.answer or seen.final)
        state = seen.state.removeprefix("TASK_STATE_").lower() or "unknown"
        why = f": {seen.said}" if seen.said else " without saying why"
        return end(inv, status, error=f"the remote task at {remote.url} ended {state}{why}")

    async def _exchange(self, inv: Invocation, seen: _Exchange) -> None:
        from a2a.client import ClientCallContext
        from a2a.types import Message, Part, Role, SendMessageRequest

        ctx, remote = inv.ctx, self.remote
        client = await self._connect()
        carrier = inject_context()  # this invocation's span: the remote run's parent
        system = ctx.systems[-1] if ctx.systems else "baton"
        metadata = message_metadata(
            qualified_chain(ctx.chain, system), ctx.systems, carrier, ctx.time_left(), remote.agent
        )
        call = ClientCallContext(service_parameters=dict(carrier))
        deltas = Deltas(lambda text: self.reporter.delta(inv, 1, text)) if ctx.stream else None
        text, questions = inv.delegation.task, 0
        try:
            while True:
                message = Message(
                    message_id=uuid.uuid4().hex,
                    role=Role.ROLE_USER,
                    parts=[Part(text=text)],
                    metadata=metadata,
                    task_id=seen.task_id,  # (an answer goes to the task that asked)
                    context_id=seen.context_id,
                )
                async for response in client.send_message(
                    SendMessageRequest(message=message), context=call
                ):
                    self._take(inv, response, seen, deltas)
                if not seen.asks:
                    return
                questions += 1
                answer = await self._ask(inv, seen, questions)
                if answer is None:
                    return
                text = answer
        finally:
            if deltas is not None:
                deltas.close()

    async def _ask(self, inv: Invocation, seen: _Exchange, number: int) -> str | None:
        """The person's answer to the remote task's question; None: the task was cancelled.

        Asked as the agent's own `ask_user` would be (the run waits, `input_required`). With
        no one here to ask, the remote task is cancelled: it would wait there for nobody.
        """
        question = seen.said or "the remote agent asks for input"
        if self.people is not None:
            from agents.models.base import ToolCall

            asked = ToolCall(id=f"a2a-{seen.task_id}-{number}", name="ask_user", arguments="")
            answer = await self.people.ask(inv, asked, {"question": question})
            if not answer.is_error:
                seen.state = ""  # (it goes on once the answer is in)
                return answer.content
        seen.unasked = question
        await self._cancel_task(seen)
        return None

    def _take(
        self, inv: Invocation, response: StreamResponse, seen: _Exchange, deltas: Deltas | None
    ) -> None:
        """Note one update of the remote task (and tell the run's followers)."""
        from a2a.types import TaskState
        from google.protobuf.json_format import MessageToDict

        kind = response.WhichOneof("payload")
        if kind == "task":
            task = response.task
            seen.task_id, seen.state = task.id, TaskState.Name(task.status.state)
            seen.context_id = task.context_id or seen.context_id
            seen.known.set()
            for artifact in task.artifacts:
                seen.artifacts[artifact.artifact_id] = "".join(p.text for p in artifact.parts)
            self._said(inv, seen, task.status, task.metadata)
        elif kind == "status_update":
            update = response.status_update
            seen.task_id = seen.task_id or update.task_id
            seen.context_id = seen.context_id or update.context_id
            seen.state = TaskState.Name(update.status.state)
            seen.known.set()
            self._said(inv, seen, update.status, update.metadata)
        elif kind == "artifact_update":
            update = response.artifact_update
            text = "".join(p.text for p in update.artifact.parts)
            artifact, before = (
                update.artifact.artifact_id,
                seen.artifacts.get(update.artifact.artifact_id),
            )
            if update.append and before is not None:
                seen.artifacts[artifact] = before + text
            else:
                # Its first piece (or the whole of it); or, sent again whole, the pieces'
                # text in one (streamed already).
                seen.artifacts[artifact] = text
                text = "" if before else text
            if deltas is not None and text:
                deltas.add(text)
        elif kind == "message":  # an agent that answers at once, without a task
            seen.artifacts[""] = "".join(p.text for p in response.message.parts)
            seen.state = "TASK_STATE_COMPLETED"
        if kind == "status_update":  # a Baton service says how its run ended and what it spent
            meta = MessageToDict(response.status_update.metadata)
            if isinstance(meta.get(META_USAGE), dict):
                seen.usage = Usage.model_validate(meta[META_USAGE])
            if meta.get(META_STATUS) in set(RunStatus) and seen.state in _ENDED:
                seen.status = RunStatus(meta[META_STATUS])

    def _said(self, inv: Invocation, seen: _Exchange, status: Any, metadata: Any) -> None:
        text = "".join(p.text for p in status.message.parts) if status.HasField("message") else ""
        seen.said = text or seen.said
        if seen.state in _ENDED:
            seen.final = text
        self.reporter.emit(
            inv,
            RemoteUpdate,
            url=self.remote.url,
            task_id=seen.task_id,
            state=seen.state.removeprefix("TASK_STATE_").lower(),
            text=text[:500],
        )

    async def _cancel_remote(self, seen: _Exchange, exchange: asyncio.Future[None]) -> None:
        """Cancel the remote task and stop reading it (bounded; a failure is logged).

        Waits for the remote side's answer even when this invocation is cancelled again
        meanwhile (a run's cancellation reaches a call twice, through Ray and through its
        host): the span records the state the remote side confirmed. The cancellation is raised
        again once the answer is in.
        """
        job = asyncio.ensure_future(self._cancel_when_known(seen, exchange))
        self._cancelling.add(job)
        job.add_done_callback(self._cancelling.discard)
        again = False
        while not job.done():
            try:
                await asyncio.shield(job)
            except asyncio.CancelledError:
                again = True  # bounded by the job's own timeouts
        if again:
            raise asyncio.CancelledError

    async def _cancel_when_known(self, seen: _Exchange, exchange: asyncio.Future[None]) -> None:
        try:
            if not seen.task_id and not exchange.done():
                # Cancelled before the remote side said which task is ours: read on until it
                # does (the task is running there already, and would run to its end).
                known = asyncio.ensure_future(seen.known.wait())
                either: set[asyncio.Future[Any]] = {exchange, known}
                await asyncio.wait(either, timeout=_CANCEL_S, return_when=asyncio.FIRST_COMPLETED)
                known.cancel()
        finally:
            exchange.cancel()
        if not seen.task_id or self._a2a is None or (seen.state in _ENDED and not seen.asks):
            return  # (a task that asks waits there: it is cancelled)
        await self._cancel_task(seen)

    async def _cancel_task(self, seen: _Exchange) -> None:
        """Cancel the remote task (bounded; a failure is logged)."""
        from a2a.types import CancelTaskRequest, TaskState

        assert self._a2a is not None
        try:
            async with asyncio.timeout(_CANCEL_ANSWER_S):
                task = await self._a2a.cancel_task(CancelTaskRequest(id=seen.task_id))
            # The state the remote side confirms (canceled, or how it ended meanwhile).
            seen.state = TaskState.Name(task.status.state)
        except Exception as exc:
            logger.warning("could not cancel task %s at %s: %s", seen.task_id, self.remote.url, exc)


def _failure(url: str, exc: Exception) -> str:
    """Why an exchange failed, for the caller's model: unreachable, refused, or what broke."""
    import httpx
    from a2a.client.errors import AgentCardResolutionError
    from a2a.utils.errors import A2AError

    causes = _causes(exc)
    if any(isinstance(c, ConnectionRefusedError) for c in causes):
        return f"could not connect to {url}: connection refused"
    if connect := next((c for c in causes if isinstance(c, httpx.ConnectError)), None):
        return f"could not connect to {url}: {connect}"
    if timeout := next((c for c in causes if isinstance(c, httpx.TimeoutException)), None):
        return f"{url} did not answer in time ({type(timeout).__name__})"
    if isinstance(exc, AgentCardResolutionError):
        status = f" (HTTP {exc.status_code})" if exc.status_code else ""
        return f"no agent card at {url}{status}: {exc.message}"
    if isinstance(exc, A2AError):
        return f"{url} refused the task: {exc}"
    return f"{url} failed: {type(exc).__name__}: {exc}"


def _causes(exc: BaseException) -> list[BaseException]:
    """The exception and what caused it, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain
