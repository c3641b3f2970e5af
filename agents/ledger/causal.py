"""Putting one run's events in causal order as they reach the ledger.

Each process sends its events in batches, and batches from different processes (an agent and
the agents it delegated to, on other actors) may arrive in any order. Every consumer (the store,
the SSE stream, the CLI, the live diagram) reads the order the ledger gives, so the ledger
releases an event only once what caused it is out:

- `run_started` first: the entry invocation's `agent_started` after it (the orchestrator opens
  the run without waiting for the ledger, so the entry agent's first batch may come first);
- an invocation's events in their `seq` order;
- a delegated invocation's `agent_started` after its caller's `tool_started` for that call;
- a delegation's `tool_finished` after the callee's `agent_finished`, once the callee began.

An event held longer than `hold_s` goes out anyway (its cause may never come: the process that
would have sent it died), in the order it would have had.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agents.core.events import (
    AgentFinished,
    AgentStarted,
    Event,
    RunStarted,
    ToolFinished,
    ToolStarted,
)

__all__ = ["CausalOrder"]

# Long enough for a batch from a busy process (batches leave every 50 ms, but a process whose
# event loop a tool blocks sends nothing until it is free), short enough that a cause that never
# comes (its process died) holds a live view back only briefly.
HOLD_S = 3.0

# A call is named by the chain of the agent that made it and the model's call id (call ids are
# unique within one invocation's conversation only).
_Call = tuple[tuple[str, ...], str]
# What an entry invocation's `agent_started` waits for: the run's `run_started`.
_RUN_OPENED: _Call = ((), "run_started")


@dataclass
class _Held:
    event: Event
    since: float


@dataclass
class CausalOrder:
    """Releases one run's events in causal order (see the module's docstring)."""

    hold_s: float = HOLD_S
    clock: Callable[[], float] = time.monotonic
    _next: dict[str, int] = field(default_factory=dict)  # invocation -> next seq to release
    _held: dict[str, dict[int, _Held]] = field(default_factory=dict)  # out of seq order
    _calls: set[_Call] = field(default_factory=set)  # calls whose tool_started is out
    _begun: set[_Call] = field(default_factory=set)  # delegations whose callee started
    _ended: set[_Call] = field(default_factory=set)  # ... and finished
    _waiting: dict[_Call, list[_Held]] = field(default_factory=dict)  # for a call's cause

    def admit(self, event: Event) -> list[Event]:
        """Take an arriving event; return the events that can go out now, in order."""
        return self._flow([_Held(event, self.clock())])

    def overdue(self) -> list[Event]:
        """Events held past `hold_s`, with whatever must come after them, in order."""
        now = self.clock()
        late = [h for h in self._all_held() if now - h.since >= self.hold_s]
        return self._force(late) if late else []

    def drain(self) -> list[Event]:
        """Everything still held (the run is over), in the best order known."""
        return self._force(self._all_held())

    @property
    def holding(self) -> bool:
        """Whether some event waits for its cause."""
        return any(self._held.values()) or any(self._waiting.values())

    def _all_held(self) -> list[_Held]:
        held = [h for by_seq in self._held.values() for h in by_seq.values()]
        return held + [h for waiting in self._waiting.values() for h in waiting]

    def _force(self, items: list[_Held]) -> list[Event]:
        for item in items:  # let them go: pretend their causes came
            event = item.event
            if event.invocation is not None:
                self._held.get(event.invocation, {}).pop(event.seq, None)
                self._next[event.invocation] = max(self._next.get(event.invocation, 1), event.seq)
            for call, waiting in self._waiting.items():
                if item in waiting:
                    waiting.remove(item)
                    # The cause it waited for: its caller's start of the call, or its callee's end.
                    (self._calls if isinstance(event, AgentStarted) else self._ended).add(call)
        items.sort(key=lambda h: (h.since, h.event.seq))
        return self._flow(items, forced=True)

    def _flow(self, items: list[_Held], forced: bool = False) -> list[Event]:
        out: list[Event] = []
        queue = list(items)
        while queue:
            item = queue.pop(0)
            event = item.event
            invocation = event.invocation
            if invocation is None or event.seq <= 0:
                out.append(event)
                queue[:0] = self._released(event)
                continue
            expected = self._next.get(invocation, 1)
            if event.seq > expected and not forced:
                self._held.setdefault(invocation, {})[event.seq] = item
                continue
            blocker = None if forced else self._cause(event)
            if blocker is not None:
                self._waiting.setdefault(blocker, []).append(item)
                continue
            out.append(event)
            # A lower seq than expected is a resumed invocation's new life: let it through.
            self._next[invocation] = max(expected, event.seq + 1)
            queue[:0] = self._released(event)
            following = self._held.get(invocation, {}).pop(self._next[invocation], None)
            if following is not None:
                queue.insert(0, following)
        return out

    def _cause(self, event: Event) -> _Call | None:
        """The call this event must wait for, if it has not come out yet."""
        if isinstance(event, AgentStarted) and event.call_id and len(event.chain) > 1:
            call = (tuple(event.chain[:-1]), event.call_id)
            return None if call in self._calls else call
        if isinstance(event, AgentStarted) and event.call_id is None:  # the run's entry
            return None if _RUN_OPENED in self._calls else _RUN_OPENED
        if isinstance(event, ToolFinished):
            call = (tuple(event.chain), event.call_id)
            if call in self._begun and call not in self._ended:
                return call
        return None

    def _released(self, event: Event) -> list[_Held]:
        """Events that were waiting for `event`."""
        call: _Call | None = None
        if isinstance(event, RunStarted):
            call = _RUN_OPENED
            self._calls.add(call)
        elif isinstance(event, ToolStarted):
            call = (tuple(event.chain), event.call_id)
            self._calls.add(call)
        elif isinstance(event, AgentStarted) and event.call_id and len(event.chain) > 1:
            self._begun.add((tuple(event.chain[:-1]), event.call_id))
        elif isinstance(event, AgentFinished) and event.call_id and len(event.chain) > 1:
            call = (tuple(event.chain[:-1]), event.call_id)
            self._ended.add(call)
        if call is None:
            return []
        return self._waiting.pop(call, [])
