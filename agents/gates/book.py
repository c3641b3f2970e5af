"""Provider gates' book-keeping: what each gate has let through in its window, and what is out.

Plain code with the clock passed in; `agents.ray.gate_actor` hosts one book for the cluster and
waits on it, `agents.models.gated` asks it before each model call.

A call takes a lease (`take`): it counts one request and its estimated tokens, and one place
among the calls under way; it gives the place back when it ends (`release`, with the tokens
its reply says it used). A call counts in its gate's window from when it passes the gate until
`per_s` after it ends: the provider counts a request when it arrives, somewhere between the
two, so it never sees more than the gate's requests in any window, however long a request takes
to reach it (measured: the first call of an agent process arrives 70 ms after its lease). The
price is a call's duration of throughput per window. A lease not given back (its process died)
ends at the call's own timeout. A provider's refusal for load pauses the whole gate (`pause`)
for as long as its `Retry-After` says.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import time
from dataclasses import dataclass, field

from agents.core.gate_spec import GateSpec

__all__ = ["GateBook", "GateKeeper", "Taken"]


@dataclass(frozen=True)
class Taken:
    """A gate's answer: a lease, or how long until one may be had and why not now."""

    lease: str | None
    wait_s: float = 0.0
    why: str = ""


@dataclass
class _Entry:
    lease: str
    tokens: int
    until: float  # while under way: when it is taken to have ended (the call's timeout)
    ended: float = 0.0


@dataclass
class _Gate:
    spec: GateSpec
    out: dict[str, _Entry] = field(default_factory=dict)  # calls under way
    done: list[_Entry] = field(default_factory=list)  # calls ended, by when, still counted
    paused_until: float = 0.0
    paused_why: str = ""

    def end(self, entry: _Entry, at: float) -> None:
        entry.ended = at
        bisect.insort(self.done, entry, key=lambda e: e.ended)

    def forget(self, now: float) -> None:
        for lease in [k for k, e in self.out.items() if e.until <= now]:
            entry = self.out.pop(lease)
            self.end(entry, entry.until)
        gone = bisect.bisect_right(self.done, now - self.spec.per_s, key=lambda e: e.ended)
        del self.done[:gone]


def _merged(old: GateSpec, new: GateSpec) -> GateSpec:
    """Two declarations of one gate (two systems on one cluster): the stricter of each limit."""

    def least(a: int | None, b: int | None) -> int | None:
        return b if a is None else a if b is None else min(a, b)

    return old.model_copy(
        update={
            "models": tuple(dict.fromkeys((*old.models, *new.models))),
            "requests": least(old.requests, new.requests),
            "tokens": least(old.tokens, new.tokens),
            "concurrency": least(old.concurrency, new.concurrency),
            "per_s": max(old.per_s, new.per_s),
        }
    )


class GateBook:
    """Every gate of the cluster, by name (see the module's docstring)."""

    def __init__(self) -> None:
        self._gates: dict[str, _Gate] = {}
        self._ids = itertools.count(1)

    def declare(self, specs: tuple[GateSpec, ...]) -> None:
        """Hold calls to these gates' models from now on (a gate declared again gets stricter)."""
        for spec in specs:
            gate = self._gates.get(spec.label)
            if gate is None:
                self._gates[spec.label] = _Gate(spec)
            else:
                gate.spec = _merged(gate.spec, spec)

    @property
    def specs(self) -> tuple[GateSpec, ...]:
        """The gates, as declared (merged)."""
        return tuple(g.spec for g in self._gates.values())

    def take(self, name: str, tokens: int, hold_s: float, now: float) -> Taken:
        """A lease for one call of about `tokens`, or how long until one may be had.

        `hold_s`: the longest the call may last (it is taken to have ended then if its lease
        is not given back).
        """
        gate = self._gates[name]
        wait, why = self._wait(gate, tokens, now)
        if wait > 0:
            return Taken(None, wait, why)
        entry = _Entry(f"{name}#{next(self._ids)}", tokens, now + hold_s)
        gate.out[entry.lease] = entry
        return Taken(entry.lease)

    def free_in(self, name: str, tokens: int, now: float) -> Taken:
        """How long until a call of about `tokens` could take a lease (none is taken)."""
        wait, why = self._wait(self._gates[name], tokens, now)
        return Taken(None, wait, why)

    def release(self, lease: str, used_tokens: int | None, now: float) -> None:
        """A call ended: its place is free; it counts the tokens it used for `per_s` more."""
        gate = self._gates.get(lease.rpartition("#")[0])
        entry = gate.out.pop(lease, None) if gate is not None else None
        if gate is None or entry is None:
            return
        if used_tokens is not None:
            entry.tokens = used_tokens
        gate.end(entry, now)

    def pause(self, name: str, seconds: float, why: str, now: float) -> None:
        """Let no call through for `seconds` (the provider said so: `Retry-After`)."""
        gate = self._gates[name]
        if now + seconds > gate.paused_until:
            gate.paused_until, gate.paused_why = now + seconds, why

    def _wait(self, gate: _Gate, tokens: int, now: float) -> tuple[float, str]:
        """Seconds until a call of `tokens` fits (0: now), and which limit holds it.

        A call under way leaves the window `per_s` after it ends: at the soonest, `per_s` from
        now (the keeper looks again whenever a call ends).
        """
        gate.forget(now)
        spec, waits = gate.spec, []
        if gate.paused_until > now:
            waits.append((gate.paused_until - now, gate.paused_why))
        counted = len(gate.done) + len(gate.out)
        if spec.requests is not None and counted >= spec.requests:
            leaving = counted - spec.requests  # this many must leave first, the next one too
            leaves = gate.done[leaving].ended if leaving < len(gate.done) else now
            waits.append((leaves + spec.per_s - now, f"{spec.requests} requests per {_s(spec)}"))
        if spec.tokens is not None and counted:
            used = sum(e.tokens for e in gate.done) + sum(e.tokens for e in gate.out.values())
            if used + tokens > spec.tokens:
                # The window empties call by call: this one fits once enough has left (one
                # larger than the whole limit goes alone, once the window is empty).
                leaves = now
                for entry in gate.done:
                    used -= entry.tokens
                    if used + tokens <= spec.tokens or (used <= 0 and not gate.out):
                        leaves = entry.ended
                        break
                waits.append((leaves + spec.per_s - now, f"{spec.tokens} tokens per {_s(spec)}"))
        if spec.concurrency is not None and len(gate.out) >= spec.concurrency:
            # Until a call ends: the soonest one is taken to have ended bounds the wait.
            soonest = min(e.until for e in gate.out.values())
            waits.append((soonest - now, f"{spec.concurrency} calls at once"))
        if not waits:
            return 0.0, ""
        wait, why = max(waits)
        return max(wait, 1e-3), why


def _s(spec: GateSpec) -> str:
    return "minute" if spec.per_s == 60 else f"{spec.per_s:g} s"


class GateKeeper:
    """A `GateBook` callers wait on: a lease is handed out as soon as the gate lets it.

    One per cluster (in the gates actor); in-process where there is no Ray (`baton run`'s local
    agents, tests). Implements the `agents.core.ports.Gates` port.
    """

    def __init__(self, specs: tuple[GateSpec, ...] = ()) -> None:
        self.book = GateBook()
        self.book.declare(specs)
        self._ended = asyncio.Event()  # set (and replaced) whenever a call ends

    async def take(
        self, gate: str, tokens: int, hold_s: float, max_wait_s: float
    ) -> tuple[str | None, float, str]:
        """Wait up to `max_wait_s` for a lease (see `agents.core.ports.Gates.take`)."""
        started, why = time.monotonic(), ""
        while True:
            now = time.monotonic()
            taken = self.book.take(gate, tokens, hold_s, now)
            waited = now - started
            if taken.lease is not None:
                return taken.lease, waited, why
            why = taken.why
            if waited + taken.wait_s > max_wait_s:
                return None, waited, f"{why} (free in {taken.wait_s:.1f}s)"
            ended = self._ended
            with contextlib.suppress(TimeoutError):  # a call ended, or the window moved on
                async with asyncio.timeout(taken.wait_s):
                    await ended.wait()

    def free_in(self, gate: str, tokens: int) -> tuple[float, str]:
        """Seconds until a call of about `tokens` could pass `gate`, and what holds it."""
        taken = self.book.free_in(gate, tokens, time.monotonic())
        return taken.wait_s, taken.why

    def release(self, lease: str, used_tokens: int | None) -> None:
        """A call ended: its place is free, its tokens counted as used."""
        self.book.release(lease, used_tokens, time.monotonic())
        self._ended.set()
        self._ended = asyncio.Event()

    def pause(self, gate: str, seconds: float, why: str) -> None:
        """Let no call through `gate` for `seconds`."""
        self.book.pause(gate, seconds, why, time.monotonic())
