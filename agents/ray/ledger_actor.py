"""The run ledger on Ray: an async actor hosting `RunLedger` (its client: `ledger_client`).

Kept apart from `agents.ray.host` so that the ledger's worker process does not import litellm.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import ray

from agents.core.events import ApprovalRequested, Event
from agents.runtime.ledger import Decision, RunLedger, RunState, SpanShipment

__all__ = ["LedgerActor"]


@ray.remote(num_cpus=0)
class LedgerActor:
    """Hosts the `RunLedger` of one system: budgets, progress events and late spans of its runs.

    An async actor, so that callers can wait here for news (events, spans) without polling.
    """

    def __init__(self) -> None:
        self._ledger = RunLedger()
        self._signals: dict[str, asyncio.Event] = {}
        self._fed = asyncio.Event()  # set (and replaced) whenever any run changes

    def _changed(self, run_id: str) -> None:
        signal = self._signals.pop(run_id, None)
        if signal is not None:
            signal.set()
        self._fed.set()
        self._fed = asyncio.Event()

    async def feed(
        self, cursor: int, wait_s: float
    ) -> tuple[list[tuple[str, int, Event]], int, bool]:
        """Every run's events after `cursor`, waiting up to `wait_s` for some (see `RunLedger`).

        A service reads all its runs' events with this one call, whatever it follows.
        """
        until = time.monotonic() + wait_s
        if cursor < 0:
            cursor = self._ledger.feed(cursor)[1]
        while True:
            items, position, missed = self._ledger.feed(cursor)
            if items or missed:
                return items, position, missed
            signal = self._fed
            try:
                await asyncio.wait_for(signal.wait(), max(until - time.monotonic(), 0))
            except TimeoutError:
                return [], position, False

    async def _wait_for_change(self, run_id: str, until: float) -> bool:
        """Wait until the run changes or `until` (monotonic) passes; False on time-out."""
        signal = self._signals.setdefault(run_id, asyncio.Event())
        try:
            await asyncio.wait_for(signal.wait(), max(until - time.monotonic(), 0))
        except TimeoutError:
            return False
        return True

    def open(self, run_id: str, budget: int | None, first: Event | None = None) -> None:
        """Start counting a run; `first` is its first event (before any agent's)."""
        self._ledger.open(run_id, budget)
        if first is not None:
            self._ledger.emit(run_id, first)
            self._changed(run_id)

    def finish(self, run_id: str, final: Event) -> list[tuple[int, Event]]:
        """Add the run's last event and close it; return all its events with their ids."""
        events = self._ledger.finish(run_id, final)
        self._changed(run_id)
        return events

    def close(self, run_id: str) -> None:
        """Stop counting the run; its events stay readable for a while."""
        self._ledger.close(run_id)
        self._changed(run_id)

    def snapshot(self, run_id: str) -> tuple[list[dict[str, Any]], list[Event]]:
        """The run's spans sent so far and its events, without taking them."""
        return self._ledger.snapshot(run_id)

    def tokens_left(self, run_id: str) -> int | None:
        """Tokens the run may still spend (None: no budget)."""
        return self._ledger.tokens_left(run_id)

    def charge(self, run_id: str, tokens: int) -> None:
        """Count tokens the run spent."""
        self._ledger.charge(run_id, tokens)

    def record_effect(self, run_id: str, attempts: tuple[str, ...], tool: str) -> None:
        """Note that `tool` (run at most once) is about to run under these delegation attempts."""
        self._ledger.record_effect(run_id, attempts, tool)

    def effects(self, run_id: str, attempt: str) -> list[str]:
        """The at-most-once tools started under a delegation attempt."""
        return self._ledger.effects(run_id, attempt)

    def request_approval(
        self,
        run_id: str,
        call_id: str,
        event: ApprovalRequested,
        earlier: list[tuple[str, Event]] | None = None,
        spans: list[SpanShipment] | None = None,
        sender: str = "",
    ) -> str:
        """Register a call waiting for approval, after the caller's `earlier` events.

        They are sent along because an async actor does not keep one caller's calls in order.
        """
        if earlier or spans:
            self.emit_many(earlier or [], spans or [], sender)
        unique = self._ledger.request_approval(run_id, call_id, event)
        self._changed(run_id)
        return unique

    def decide(
        self, run_id: str, call_id: str, approved: bool, message: str, by: str
    ) -> tuple[Decision, dict[str, Any] | None]:
        """Approve or deny a pending call; the first decision counts."""
        outcome = self._ledger.decide(run_id, call_id, approved, message, by)
        self._changed(run_id)
        return outcome

    def pending(self, run_id: str) -> list[ApprovalRequested]:
        """The run's calls waiting for a decision, oldest first."""
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
        """Wait up to `wait_s` for the run's approvals to change from version `seen`.

        Returns the version, how many calls wait for a decision, and the run's state.
        """
        until = time.monotonic() + wait_s
        while True:
            version = self._ledger.approvals_version(run_id)
            state = self._ledger.state(run_id)
            if version != seen or state != "open" or not await self._wait_for_change(run_id, until):
                return version, len(self._ledger.pending(run_id)), state

    def emit_many(
        self,
        events: list[tuple[str, Event]],
        spans: list[SpanShipment],
        sender: str = "",
    ) -> None:
        """Record batches of events and numbered span shipments from one agent process."""
        changed = set()
        for run_id, event in events:
            self._ledger.emit(run_id, event)
            changed.add(run_id)
        for run_id, number, records in spans:
            self._ledger.keep_spans(run_id, records, sender, number)
            changed.add(run_id)
        for run_id in changed:
            self._changed(run_id)

    async def events(
        self, run_id: str, after: int = 0, wait_s: float = 0.0
    ) -> tuple[list[tuple[int, Event]], RunState]:
        """The run's events with ids above `after`, and whether the run is open, closed or unknown.

        With `wait_s`, wait that long for a first new event (not once closed).
        """
        until = time.monotonic() + wait_s
        while True:
            found = self._ledger.numbered(run_id, after)
            state = self._ledger.state(run_id)
            if found or state == "closed" or not await self._wait_for_change(run_id, until):
                return found, state

    async def collect_spans(
        self,
        run_id: str,
        have: int,
        lost: int,
        expected: int,
        wait_s: float,
        shipped: tuple[str, int] | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        """Take the spans agents sent for the run, once every invocation has sent its own.

        Args:
            run_id: the run.
            have: the invocations' own `invoke_agent` spans the caller already holds.
            lost: the spans the caller holds for invocations whose own were lost (dead actors).
            expected: invocations the caller knows of (its result tree, lost ones left out);
                the ledger also counts every invocation that has started.
            wait_s: how long to wait for stragglers.
            shipped: a process, and how many span shipments of the run it has sent (the entry
                agent's, sent as its steps ended, which no `invoke_agent` span stands for).

        Returns:
            The spans, and how many invocations' spans are still missing.
        """
        until = time.monotonic() + wait_s
        while True:
            started, sent, lost_here, gaps = self._ledger.span_progress(run_id)
            # An invocation that died sends nothing; its caller's lost span stands for it.
            missing = max(expected, started - lost - lost_here) - have - sent
            if shipped is not None:
                gaps += max(shipped[1] - self._ledger.shipments_from(run_id, shipped[0]), 0)
            if (missing <= 0 and not gaps) or not await self._wait_for_change(run_id, until):
                return self._ledger.take_spans(run_id), max(missing, 0)
