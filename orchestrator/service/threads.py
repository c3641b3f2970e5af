"""Threads: conversations whose runs are turns, and what a second run in a busy thread does.

A thread's turns are its runs in order (the store keeps them by the run's `context_id`); the
executor gives each turn's entry agent the turns before it (`RunExecutor._turns`). A run
submitted while another of its thread is under way follows its `multitask_strategy`, as
LangGraph's threads do: `reject` (409), `enqueue` (it starts when the earlier ones end),
`interrupt` (the earlier one is cancelled, recorded so, and the new one sees what it made) or
`rollback` (the earlier one is cancelled and removed).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any, Literal

from orchestrator.access import LOCAL, Access
from orchestrator.engine import Submission
from orchestrator.errors import ThreadBusy, ThreadFull, ThreadNotFound
from orchestrator.service.executor import RunExecutor
from orchestrator.store import RunStore, StoredRun
from orchestrator.store.threads import StoredThread

__all__ = ["NEW_THREAD", "MultitaskStrategy", "Threads"]

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

    async def create(self, metadata: dict[str, Any], caller: Access = LOCAL) -> StoredThread:
        """A new, empty thread of the caller's tenant."""
        return await self._store.threads.create(uuid.uuid4().hex, metadata, caller.tenant)

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
        if idempotency_key and await self._store.by_idempotency_key(caller.own(idempotency_key)):
            return await self._submit(replace(request, thread=thread_id), **options)
        async with self._lock(thread_id), self._held(thread_id):
            turns = await self._store.threads.states(thread_id, caller.tenant_filter)
            if turns is None:
                raise ThreadNotFound(thread_id)
            if len(turns) >= self._max_turns:
                raise ThreadFull(thread_id, self._max_turns)
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
            turn = replace(request, thread=thread_id, waits_for_turns=waits)
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
