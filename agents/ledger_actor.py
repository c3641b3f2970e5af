"""The run ledger on Ray: an async actor hosting `RunLedger`, and the client agents use.

Kept apart from `agents.actor` so that the ledger's worker process does not import litellm.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import ray

from agents.ledger import Decision, RunLedger, RunState

__all__ = ["EVENT_FLUSH_S", "LedgerActor", "RayLedger"]

# Longest time an event waits in an actor before it is sent to the ledger.
EVENT_FLUSH_S = 0.05


@ray.remote(num_cpus=0)
class LedgerActor:
    """Hosts the `RunLedger` of one system: budgets, progress events and late spans of its runs.

    An async actor, so that callers can wait here for news (events, spans) without polling.
    """

    def __init__(self) -> None:
        self._ledger = RunLedger()
        self._signals: dict[str, asyncio.Event] = {}

    def _changed(self, run_id: str) -> None:
        signal = self._signals.pop(run_id, None)
        if signal is not None:
            signal.set()

    async def _wait_for_change(self, run_id: str, until: float) -> bool:
        """Wait until the run changes or `until` (monotonic) passes; False on time-out."""
        signal = self._signals.setdefault(run_id, asyncio.Event())
        try:
            await asyncio.wait_for(signal.wait(), max(until - time.monotonic(), 0))
        except TimeoutError:
            return False
        return True

    def open(self, run_id: str, budget: int | None, first: dict[str, Any] | None = None) -> None:
        """Start counting a run; `first` is its first event (before any agent's)."""
        self._ledger.open(run_id, budget)
        if first is not None:
            self._ledger.emit(run_id, first)
            self._changed(run_id)

    def finish(self, run_id: str, final: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
        """Add the run's last event and close it; return all its events with their ids."""
        events = self._ledger.finish(run_id, final)
        self._changed(run_id)
        return events

    def close(self, run_id: str) -> None:
        self._ledger.close(run_id)
        self._changed(run_id)

    def snapshot(self, run_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The run's spans sent so far and its events, without taking them."""
        return self._ledger.snapshot(run_id)

    def tokens_left(self, run_id: str) -> int | None:
        return self._ledger.tokens_left(run_id)

    def charge(self, run_id: str, tokens: int) -> None:
        self._ledger.charge(run_id, tokens)

    def record_effect(self, run_id: str, attempts: tuple[str, ...], tool: str) -> None:
        self._ledger.record_effect(run_id, attempts, tool)

    def effects(self, run_id: str, attempt: str) -> list[str]:
        return self._ledger.effects(run_id, attempt)

    def request_approval(
        self,
        run_id: str,
        call_id: str,
        event: dict[str, Any],
        earlier: list[tuple[str, dict[str, Any]]] | None = None,
        spans: list[tuple[str, list[dict[str, Any]]]] | None = None,
    ) -> str:
        """Register a call waiting for approval, after the caller's `earlier` events (sent
        along: an async actor does not keep one caller's calls in order)."""
        if earlier or spans:
            self.emit_many(earlier or [], spans or [])
        unique = self._ledger.request_approval(run_id, call_id, event)
        self._changed(run_id)
        return unique

    def decide(
        self, run_id: str, call_id: str, approved: bool, message: str, by: str
    ) -> tuple[Decision, dict[str, Any] | None]:
        outcome = self._ledger.decide(run_id, call_id, approved, message, by)
        self._changed(run_id)
        return outcome

    def pending(self, run_id: str) -> list[dict[str, Any]]:
        return self._ledger.pending(run_id)

    async def await_decision(
        self, run_id: str, call_id: str, wait_s: float
    ) -> dict[str, Any] | None:
        """The decision on a pending call, waiting up to `wait_s` for one."""
        until = time.monotonic() + wait_s
        while True:
            decision = self._ledger.decision(run_id, call_id)
            if decision is not None or not await self._wait_for_change(run_id, until):
                return decision

    async def watch_pending(
        self, run_id: str, seen: int, wait_s: float
    ) -> tuple[int, int, RunState]:
        """Wait up to `wait_s` for the run's approvals to change from version `seen`; return
        the version, how many calls wait for a decision, and the run's state."""
        until = time.monotonic() + wait_s
        while True:
            version = self._ledger.approvals_version(run_id)
            state = self._ledger.state(run_id)
            if version != seen or state != "open" or not await self._wait_for_change(run_id, until):
                return version, len(self._ledger.pending(run_id)), state

    def emit_many(
        self,
        events: list[tuple[str, dict[str, Any]]],
        spans: list[tuple[str, list[dict[str, Any]]]],
    ) -> None:
        changed = set()
        for run_id, event in events:
            self._ledger.emit(run_id, event)
            changed.add(run_id)
        for run_id, records in spans:
            self._ledger.keep_spans(run_id, records)
            changed.add(run_id)
        for run_id in changed:
            self._changed(run_id)

    async def events(
        self, run_id: str, after: int = 0, wait_s: float = 0.0
    ) -> tuple[list[tuple[int, dict[str, Any]]], RunState]:
        """The run's events with ids above `after`, and whether the run is open, closed or
        unknown here; with `wait_s`, wait that long for a first new event (not once closed)."""
        until = time.monotonic() + wait_s
        while True:
            found = self._ledger.numbered(run_id, after)
            state = self._ledger.state(run_id)
            if found or state == "closed" or not await self._wait_for_change(run_id, until):
                return found, state

    async def collect_spans(
        self, run_id: str, have: int, lost: int, expected: int, wait_s: float
    ) -> tuple[list[dict[str, Any]], int]:
        """Take the spans agents sent for the run, once every invocation has sent its own.

        Args:
            have: the invocations' own `invoke_agent` spans the caller already holds.
            lost: the spans the caller holds for invocations whose own were lost (dead actors).
            expected: invocations the caller knows of (its result tree, lost ones left out);
                the ledger also counts every invocation that has started.
            wait_s: how long to wait for stragglers.

        Returns:
            The spans, and how many invocations' spans are still missing.
        """
        until = time.monotonic() + wait_s
        while True:
            started, sent, lost_here = self._ledger.span_progress(run_id)
            # An invocation that died sends nothing; its caller's lost span stands for it.
            missing = max(expected, started - lost - lost_here) - have - sent
            if missing <= 0 or not await self._wait_for_change(run_id, until):
                return self._ledger.take_spans(run_id), max(missing, 0)


class RayLedger:
    """The `Ledger` and `EventSink` protocols over a `LedgerActor` handle.

    Events and spans are batched: one actor call per flush instead of one per event, flushed
    when an invocation ends and otherwise at most `EVENT_FLUSH_S` after an event was emitted.
    """

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self._batch: list[tuple[str, dict[str, Any]]] = []
        self._spans: list[tuple[str, list[dict[str, Any]]]] = []
        self._timer: asyncio.TimerHandle | None = None

    async def tokens_left(self, run_id: str) -> int | None:
        left: int | None = await self._handle.tokens_left.remote(run_id)
        return left

    def charge(self, run_id: str, tokens: int) -> None:
        self._handle.charge.remote(run_id, tokens)  # fire and forget; ordered per caller

    async def record_effect(self, run_id: str, attempts: tuple[str, ...], tool: str) -> None:
        # Awaited: the record must exist before the call is made.
        await self._handle.record_effect.remote(run_id, attempts, tool)

    async def request_approval(self, run_id: str, call_id: str, event: dict[str, Any]) -> str:
        # The buffered events go in the same call, so that they come before this one.
        events, spans = self._take()
        unique: str = await self._handle.request_approval.remote(
            run_id, call_id, event, events, spans
        )
        return unique

    async def await_decision(
        self, run_id: str, call_id: str, wait_s: float
    ) -> dict[str, Any] | None:
        decision: dict[str, Any] | None = await self._handle.await_decision.remote(
            run_id, call_id, wait_s
        )
        return decision

    async def decide(
        self, run_id: str, call_id: str, approved: bool, message: str, by: str
    ) -> tuple[Decision, dict[str, Any] | None]:
        outcome: tuple[Decision, dict[str, Any] | None] = await self._handle.decide.remote(
            run_id, call_id, approved, message, by
        )
        return outcome

    async def effects(self, run_id: str, attempt: str) -> list[str]:
        found: list[str] = await self._handle.effects.remote(run_id, attempt)
        return found

    def keep_spans(self, run_id: str, spans: list[dict[str, Any]]) -> None:
        if spans:
            self._spans.append((run_id, spans))

    def emit(self, run_id: str, event: dict[str, Any]) -> None:
        self._batch.append((run_id, event))
        if self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            self._timer = loop.call_later(EVENT_FLUSH_S, self.flush)

    def flush(self) -> None:
        self._send()

    def _take(
        self,
    ) -> tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, list[dict[str, Any]]]]]:
        """The buffered events and spans, handed over (the flush timer stopped)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        events, self._batch = self._batch, []
        spans, self._spans = self._spans, []
        return events, spans

    def _send(self) -> Any:
        events, spans = self._take()
        if not (events or spans):
            return None
        return self._handle.emit_many.remote(events, spans)
