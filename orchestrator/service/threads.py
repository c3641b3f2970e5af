"""Threads: conversations whose runs are turns, and what a second run in a busy thread does.

A thread's turns are its runs in order (the store keeps them by the run's `context_id`); each
turn's entry agent sees the turns before it (`turns_before`, asked by the executor as the turn
starts). A run
submitted while another of its thread is under way follows its `multitask_strategy`, as
LangGraph's threads do: `reject` (409), `enqueue` (it starts when the earlier ones end),
`interrupt` (the earlier one is cancelled, recorded so, and the new one sees what it made) or
`rollback` (the earlier one is cancelled and removed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from agents.core.messages import RunStatus
from agents.core.state import StateChange, StateError, StateSpec, apply_changes
from orchestrator.access import LOCAL, Access
from orchestrator.engine import LAST, Submission, Turns
from orchestrator.errors import (
    InvalidState,
    StateConflict,
    ThreadBusy,
    ThreadFull,
    ThreadNotFound,
)
from orchestrator.store import RunStore, StoredRun
from orchestrator.store.threads import StoredThread
from orchestrator.system import AgentSystem

if TYPE_CHECKING:  # (the executor asks this module for a turn's history)
    from orchestrator.service.executor import RunExecutor

__all__ = ["NEW_THREAD", "MultitaskStrategy", "Threads", "absorb_state", "turns_before"]

logger = logging.getLogger(__name__)

MultitaskStrategy = Literal["reject", "enqueue", "interrupt", "rollback"]
# What the CLI and the MCP tool take for "a thread of its own, made now".
NEW_THREAD = "new"

# How long an interrupting or rolling-back submission waits for the run it cancels to end.
_CANCEL_WAIT_S = 30.0
_POLL_S = 0.1
# A submission holds its thread in the store for at most this long (an interrupting one waits
# for the run it cancels); another waits this long for its turn before it is refused.
_HOLD_S = _CANCEL_WAIT_S + 15.0
_HOLD_WAIT_S = 10.0
# How many times a turn's writes are applied again to a thread's state that changed meanwhile.
_STATE_TRIES = 20

Submit = Callable[..., Awaitable[tuple[StoredRun, bool]]]


class Threads:
    """A service's threads: create, list, read, delete, and submit turns to them.

    Args:
        store: the run store.
        executor: the runs executing here (a turn cancelled here is awaited here).
        submit: the service's own submission (admission, idempotency), for each turn.
        cancel: the service's cancellation (here or through another instance).
        max_turns: the turns a thread takes; the next is refused.
    """

    def __init__(
        self,
        store: RunStore,
        executor: RunExecutor,
        submit: Submit,
        cancel: Callable[[str], Awaitable[StoredRun]],
        max_turns: int = 1000,
    ) -> None:
        self._max_turns = max_turns
        self._store = store
        self._executor = executor
        self._submit = submit
        self._cancel = cancel
        # One submission at a time per thread in this instance: the strategy sees every run.
        self._locks: dict[str, asyncio.Lock] = {}

    async def create(
        self, metadata: dict[str, Any], caller: Access = LOCAL, agent: str | None = None
    ) -> StoredThread:
        """A new, empty thread of the caller's tenant; `agent`: its turns' entry (`LAST`...)."""
        return await self._store.threads.create(uuid.uuid4().hex, metadata, caller.tenant, agent)

    async def ensure(self, thread_id: str, caller: Access = LOCAL) -> None:
        """Make the thread for the caller's tenant unless it exists (an A2A context's first task).

        `ThreadNotFound` if it exists and is another tenant's.
        """
        await self._store.threads.ensure(thread_id, caller.tenant)
        thread = await self._store.threads.get(thread_id)
        if thread is None or not caller.sees(thread.tenant):
            raise ThreadNotFound(thread_id)

    async def get(
        self, thread_id: str, viewer: Access = LOCAL
    ) -> tuple[StoredThread, list[StoredRun]]:
        """A thread and its turns, oldest first.

        `ThreadNotFound` if there is none, or it is another tenant's (no existence leak).
        """
        thread = await self._store.threads.get(thread_id)
        if thread is None or not viewer.sees(thread.tenant):
            raise ThreadNotFound(thread_id)
        return thread, await self._store.threads.turns(thread_id)

    async def change_state(
        self,
        thread_id: str,
        values: dict[str, Any],
        version: int,
        spec: StateSpec | None,
        caller: Access = LOCAL,
    ) -> tuple[StoredThread, list[StoredRun]]:
        """Set keys of the thread's state (null removes one), on the version the caller read.

        `StateConflict` if it changed since; `InvalidState` if the schema refuses a value.
        """
        thread, _ = await self.get(thread_id, caller)
        if thread.state_version != version:
            raise StateConflict(thread_id, version, thread.state_version)
        state = dict(thread.state or {})
        for key, value in values.items():
            if value is None:
                state.pop(key, None)
            elif problems := (spec or StateSpec()).problems(key, value):
                raise InvalidState(thread_id, f"state key {key!r}: {'; '.join(problems)}")
            else:
                state[key] = value
        if not await self._store.threads.set_state(thread_id, state, version):
            current = await self._store.threads.get(thread_id)
            raise StateConflict(thread_id, version, current.state_version if current else -1)
        return await self.get(thread_id, caller)

    async def page(
        self, *, limit: int, offset: int, viewer: Access = LOCAL
    ) -> tuple[list[StoredThread], int]:
        """The threads the viewer may see, newest first, and how many there are."""
        return await self._store.threads.page(
            limit=limit, offset=offset, tenant=viewer.tenant_filter
        )

    async def delete(self, thread_id: str, viewer: Access = LOCAL) -> None:
        """Remove the thread: its runs (cancelled first), their events, steps and spans."""
        async with self._lock(thread_id):
            _, turns = await self.get(thread_id, viewer)
            await self._end([t.id for t in turns if not t.finished])
            if not await self._store.threads.delete(thread_id):
                raise ThreadNotFound(thread_id)

    async def submit(
        self,
        thread_id: str,
        request: Submission,
        strategy: MultitaskStrategy,
        *,
        caller: Access = LOCAL,
        idempotency_key: str | None = None,
    ) -> tuple[StoredRun, bool]:
        """Submit a turn (as the service's `submit` does) to a thread the caller may see.

        A retry (its idempotency key made a run already) gets that run, whatever is under way.
        """
        options = {"caller": caller, "idempotency_key": idempotency_key}
        if request.agent is None:  # the thread's own entry agent, if it names one
            thread = await self._store.threads.get(thread_id)
            if thread is not None and thread.agent is not None:
                request = replace(request, agent=thread.agent)
        if idempotency_key and await self._store.by_idempotency_key(caller.own(idempotency_key)):
            return await self._submit(replace(request, thread_id=thread_id), **options)
        async with self._lock(thread_id), self._held(thread_id):
            turns = await self._store.threads.states(thread_id, caller.tenant_filter)
            if turns is None:
                raise ThreadNotFound(thread_id)
            if len(turns) >= self._max_turns:
                raise ThreadFull(thread_id, len(turns), self._max_turns)
            under_way = [run_id for run_id, ended in turns if not ended]
            if under_way and strategy == "reject":
                raise ThreadBusy(thread_id, under_way[-1])
            if under_way and strategy in ("interrupt", "rollback"):
                await self._end(under_way)
                if strategy == "rollback":
                    for run_id in under_way:
                        await self._store.threads.remove_run(run_id)
            # `enqueue`: the executor starts it once the turns before it have ended (with none
            # under way, or those ended above, it need not look).
            waits = bool(under_way) and strategy == "enqueue"
            turn = replace(request, thread_id=thread_id, waits_for_turns=waits)
            return await self._submit(turn, **options)

    async def continue_or_start(
        self, thread: str, request: Submission, caller: Access = LOCAL
    ) -> tuple[StoredRun, bool]:
        """Submit a turn of `thread`, or of a new thread when it is `NEW_THREAD`.

        Refused while a turn is under way: the CLI's and the MCP tool's way in.
        """
        if thread == NEW_THREAD:
            thread = (await self.create({}, caller)).id
        return await self.submit(thread, request, "reject", caller=caller)

    @contextlib.asynccontextmanager
    async def _held(self, thread_id: str) -> AsyncIterator[None]:
        """Hold the thread in the store while a submission to it is decided and made.

        One at a time across replicas (the in-process lock orders this instance's own): the
        next submission, wherever it comes, sees the run this one makes.
        """
        deadline = time.monotonic() + _HOLD_WAIT_S
        while not await self._store.threads.hold(thread_id, _HOLD_S):
            if await self._store.threads.get(thread_id) is None:
                raise ThreadNotFound(thread_id)
            if time.monotonic() > deadline:
                raise ThreadBusy(thread_id, "another submission to it")
            await asyncio.sleep(_POLL_S / 5)  # another replica's submission: milliseconds
        try:
            yield
        finally:
            await self._store.threads.release(thread_id)

    async def _end(self, run_ids: list[str]) -> None:
        """Cancel the runs and wait (bounded) until each is recorded as ended."""
        for run_id in run_ids:
            await self._cancel(run_id)
        deadline = time.monotonic() + _CANCEL_WAIT_S
        for run_id in run_ids:
            task = self._executor.tasks.get(run_id)
            if task is not None:
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    async with asyncio.timeout(max(deadline - time.monotonic(), 0.0)):
                        await asyncio.shield(task)
            while time.monotonic() < deadline:  # another instance's: its record says
                run = await self._store.get(run_id)
                if run is None or run.finished:
                    break
                await asyncio.sleep(_POLL_S)

    def _lock(self, thread_id: str) -> asyncio.Lock:
        lock = self._locks.get(thread_id)
        if lock is None:
            lock = self._locks[thread_id] = asyncio.Lock()
        if len(self._locks) > 10_000:  # forget idle ones (the dict stays bounded)
            for key in [k for k, v in self._locks.items() if not v.locked() and k != thread_id]:
                del self._locks[key]
        return lock


async def turns_before(
    store: RunStore, run_id: str, request: Submission, system: AgentSystem
) -> Turns | None:
    """The thread a run is a turn of, with the turns that ended before it as messages.

    A replay of a turn sees the turns before the original, and is none of them.
    """
    thread_id, before = request.thread_id, run_id
    if thread_id is None and request.history_of is not None:  # a replay of a turn
        original = await store.get(request.history_of)
        thread_id, before = (original.thread_id, original.id) if original else (None, run_id)
    if thread_id is None:
        return None
    history: list[dict[str, Any]] = []
    marks: list[str] = []  # each turn's, for its tool call ids
    remembering = {a.name for a in system.config.agents if a.memory == "thread"}
    memories: dict[str, list[dict[str, Any]]] = {}
    turns = await store.threads.records(thread_id, trees=bool(remembering))
    ids = [t.id for t in turns]
    for turn in turns[: ids.index(before)] if before in ids else turns:
        if not turn.status.finished:
            continue
        mark, exchange = f"t{len(marks)}-", []
        marks.append(mark)
        if remembering and turn.tree is not None:
            _remember(turn.tree, remembering, memories, mark)
        if turn.status == RunStatus.SUCCEEDED and turn.output is not None:
            answer = turn.output
            # An entry agent with `memory: thread` sees its tool calls' results too.
            exchange = [_marked(m, mark) for m in (turn.tree or {}).get("exchange") or ()]
        else:  # what the agent produced is part of it: that it did not finish, and why
            answer = f"(this turn ended {turn.status.value}" + (
                f": {turn.error})" if turn.error else ")"
            )
        history += [
            {"role": "user", "content": turn.task},
            *exchange,
            {"role": "assistant", "content": answer},
        ]
    thread = await store.threads.get(thread_id)
    state = dict(thread.state or {}) if thread is not None else {}
    last = await store.threads.last_answerer(thread_id) if request.agent == LAST else None
    return Turns(thread_id, tuple(history), memories, state, last)


async def absorb_state(
    store: RunStore, thread_id: str, changes: list[StateChange], spec: StateSpec | None
) -> None:
    """Apply a turn's writes to its thread's state (its next turn begins with it).

    Applied to the state as it is now, by the keys' reducers (a person's change made during
    the turn stays, unless the turn wrote the same key); tried again if it changes meanwhile.
    """
    if not changes:
        return
    for _ in range(_STATE_TRIES):
        thread = await store.threads.get(thread_id)
        if thread is None:
            return
        try:
            merged = apply_changes(thread.state or {}, changes, spec)
        except StateError as exc:  # (the schema changed since the run began)
            logger.warning("thread %s: its turn's state not kept: %s", thread_id, exc)
            return
        if await store.threads.set_state(thread_id, merged, thread.state_version):
            return
    logger.warning("thread %s: its state kept changing; its turn's writes not kept", thread_id)


def _remember(
    node: dict[str, Any], agents: set[str], memories: dict[str, list[dict[str, Any]]], turn: str
) -> None:
    """Add the exchanges of `agents` in a run's delegation tree (calls in order) to `memories`.

    Each invocation that kept its task (`memory: thread`) and answered is one exchange: its
    task, its tool calls with their results, its answer. Tool call ids are prefixed with the
    `turn`'s mark (a model may reuse its ids from one conversation to the next).
    """
    if node.get("agent") in agents and node.get("task") and node.get("output") is not None:
        if node.get("status") == RunStatus.SUCCEEDED:
            memories.setdefault(node["agent"], []).extend(
                [
                    {"role": "user", "content": str(node["task"])},
                    *(_marked(m, turn) for m in node.get("exchange") or ()),
                    {"role": "assistant", "content": str(node["output"])},
                ]
            )
    for child in node.get("children") or ():
        _remember(child, agents, memories, turn)


def _marked(message: dict[str, Any], turn: str) -> dict[str, Any]:
    """A remembered message with its tool call ids marked as its turn's."""
    if message.get("tool_call_id"):
        return {**message, "tool_call_id": turn + str(message["tool_call_id"])}
    if message.get("tool_calls"):
        calls = [{**c, "id": turn + str(c.get("id"))} for c in message["tool_calls"]]
        return {**message, "tool_calls": calls}
    return message
