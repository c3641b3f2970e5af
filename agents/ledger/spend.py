"""What runs spend, against their caps: a run's own, and its tenant's and key's in a UTC day.

One `SpendMeter` sits in the ledger, which sees every model call's reply of every run of the
system (all its replicas and nodes), so its counts are exact for them. A daily count starts
from what the store holds for that day (`seed`), then grows with each reply (`record`); the
ledger persists each reply's spending too, for `GET /v1/usage` and the next start.

A run's calls are checked before they start (`check`), and a call that may start holds what
a reply is likely to cost (the largest reply its run had, else the largest any run had) until
its reply is counted: the checks of every run count what the calls under way will spend, not
only the replies that reached the ledger (they come a moment later, a loaded machine's moment
longer). So the spending passes a cap by at most what the calls under way spend beyond what
they held.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from agents.core.limits import SpendCap

__all__ = ["SpendEntry", "SpendMeter", "Spent", "utc_day"]


def utc_day(at: float | None = None) -> str:
    """The UTC day (YYYY-MM-DD) of a Unix time (default: now)."""
    return time.strftime("%Y-%m-%d", time.gmtime(time.time() if at is None else at))


@dataclass
class Spent:
    """Tokens and dollars counted against one scope."""

    tokens: int = 0
    usd: float = 0.0

    def __add__(self, other: Spent) -> Spent:
        return Spent(self.tokens + other.tokens, self.usd + other.usd)

    def __sub__(self, other: Spent) -> Spent:
        return Spent(self.tokens - other.tokens, self.usd - other.usd)

    def most(self, other: Spent) -> Spent:
        """The larger of each figure."""
        return Spent(max(self.tokens, other.tokens), max(self.usd, other.usd))


@dataclass(frozen=True)
class SpendEntry:
    """One model reply's spending, as the store keeps it.

    Summed there by day, tenant, key, agent and model.
    """

    day: str
    tenant: str
    who: str
    agent: str
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    unpriced: bool


@dataclass
class _Run:
    tenant: str
    who: str
    caps: tuple[SpendCap, ...] = ()
    own: Spent = field(default_factory=Spent)
    warned: set[str] = field(default_factory=set)
    largest: Spent = field(default_factory=Spent)  # its largest reply so far
    held: list[Spent] = field(default_factory=list)  # one for each call under way, oldest first


class SpendMeter:
    """Runs' spending and caps (see the module's docstring)."""

    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}
        # (day, scope) -> spent that day: what the store held when first asked (`seed`), and
        # every reply since. A scope no capped run has asked about is not counted here (the
        # store keeps its sums).
        self._days: dict[tuple[str, str], Spent] = {}
        self._held: dict[str, Spent] = {}  # scope -> what its calls under way hold
        self._largest = Spent()  # the largest reply of any run (a run's first call holds it)
        self._pending_warnings: dict[str, list[tuple[str, str]]] = {}

    def open(
        self, run_id: str, tenant: str, who: str | None, caps: tuple[SpendCap, ...] = ()
    ) -> None:
        """Count a run's spending as its tenant's and key's; hold it to `caps`."""
        run = self._runs.get(run_id)
        if run is None:
            self._runs[run_id] = _Run(tenant, who or "", caps)
        elif caps:
            run.caps = caps

    def holds(self, run_id: str) -> bool:
        """Whether caps hold the run (its calls ask first)."""
        run = self._runs.get(run_id)
        return run is not None and bool(run.caps)

    def close(self, run_id: str) -> None:
        """Forget a run that ended (its spending stays in its scopes' days).

        What its calls held for replies that never came is let go.
        """
        run = self._runs.pop(run_id, None)
        while run is not None and run.held:
            self._release(run)
        self._pending_warnings.pop(run_id, None)

    def _scopes(self, run: _Run) -> tuple[str, ...]:
        return (f"tenant:{run.tenant}", f"key:{run.who}")

    def _hold(self, run: _Run) -> None:
        """A call starts: it holds what a reply is likely to cost, until its reply comes."""
        likely = run.largest if run.largest.tokens or run.largest.usd else self._largest
        run.held.append(likely)
        for scope in self._scopes(run):
            self._held[scope] = self._held.get(scope, Spent()) + likely

    def _release(self, run: _Run) -> None:
        """A reply came (or the run ended): what its call held is counted no more."""
        if not run.held:
            return
        likely = run.held.pop(0)
        for scope in self._scopes(run):
            left = self._held.get(scope, Spent()) - likely
            if left.tokens <= 0 and left.usd <= 1e-12:
                self._held.pop(scope, None)
            else:
                self._held[scope] = left

    def unseeded(self, scopes: list[str], day: str) -> list[str]:
        """The daily scopes whose count for `day` must first be read from the store."""
        return [s for s in scopes if (day, s) not in self._days]

    def seed(self, day: str, scope: str, spent: Spent) -> None:
        """Start a day's count of a scope from what the store holds.

        (The writer is flushed first; a reply counted while the store is read may be missed,
        once per scope and day.)
        """
        self._days.setdefault((day, scope), spent)
        for old in [k for k in self._days if k[0] < day]:  # days past are not counted again
            del self._days[old]

    def spent_today(self, scope: str, day: str | None = None) -> Spent:
        """What a scope has spent in a day (today by default), as far as this meter knows."""
        return self._days.get((day or utc_day(), scope), Spent())

    def record(
        self,
        run_id: str,
        agent: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
        cost_usd: float | None,
    ) -> SpendEntry | None:
        """Count a model reply of a run; the row to persist (None: the run is not counted)."""
        run = self._runs.get(run_id)
        if run is None:
            return None
        tokens, usd = input_tokens + output_tokens, cost_usd or 0.0
        day = utc_day()
        run.own.tokens += tokens
        run.own.usd += usd
        self._release(run)
        run.largest = run.largest.most(Spent(tokens, usd))
        self._largest = self._largest.most(run.largest)
        for scope in (f"tenant:{run.tenant}", f"key:{run.who}"):
            spent = self._days.get((day, scope))
            if spent is not None:  # (else the store's sums alone count it)
                spent.tokens += tokens
                spent.usd += usd
        for cap in run.caps:
            said = self._said(cap, self._spent(run, cap, day), cap.warn_at)
            if said is not None and cap.scope not in run.warned:
                run.warned.add(cap.scope)
                self._pending_warnings.setdefault(run_id, []).append((cap.scope, said))
        return SpendEntry(
            day, run.tenant, run.who, agent, model, input_tokens, output_tokens, usd,
            cost_usd is None,
        )  # fmt: skip

    def recount(self, run_id: str, tokens: int, usd: float | None) -> None:
        """Count a reply of a run taken up again against its own cap only.

        (A restarted ledger: the reply is in its day's sums in the store, which the daily
        scopes are read from.)
        """
        run = self._runs.get(run_id)
        if run is not None:
            run.own = run.own + Spent(tokens, usd or 0.0)
            run.largest = run.largest.most(Spent(tokens, usd or 0.0))

    def check(self, run_id: str) -> tuple[str | None, list[tuple[str, str]]]:
        """Whether the run may make another model call, and what it has not been told yet.

        None, or why not (a cap it reached); and the warnings not yet given to it (scope,
        message).
        """
        warnings = self._pending_warnings.pop(run_id, [])
        run = self._runs.get(run_id)
        if run is None:
            return None, warnings
        day = utc_day()
        for cap in run.caps:
            said = self._said(cap, self._spent(run, cap, day), 1.0)
            if said is not None:
                return said, warnings
        # With what the calls under way hold: a call that would take it past is not made.
        for cap in run.caps:
            held = self._spent(run, cap, day) + self._held_by(run, cap)
            said = self._said(cap, held, 1.0)
            if said is not None:
                return f"{said} (with the calls under way)", warnings
        self._hold(run)
        return None, warnings

    def _held_by(self, run: _Run, cap: SpendCap) -> Spent:
        """What the calls under way hold against a cap: the run's own, or its scope's."""
        if not cap.daily:
            total = Spent()
            for likely in run.held:
                total = total + likely
            return total
        return self._held.get(cap.scope, Spent())

    def over(self, caps: tuple[SpendCap, ...]) -> str | None:
        """Why a new run under these caps would be refused at once (a daily cap spent), or None."""
        day = utc_day()
        for cap in caps:
            if cap.daily:
                said = self._said(cap, self.spent_today(cap.scope, day), 1.0)
                if said is not None:
                    return said
        return None

    def _spent(self, run: _Run, cap: SpendCap, day: str) -> Spent:
        return run.own if not cap.daily else self._days.get((day, cap.scope), Spent())

    @staticmethod
    def _said(cap: SpendCap, spent: Spent, share: float) -> str | None:
        """What to say when `spent` reached `share` of the cap (None: it has not)."""
        whose = "the run" if not cap.daily else f"{cap.scope.replace(':', ' ', 1)} today"
        reached = "reached its cap" if share >= 1 else f"passed {share:.0%} of its cap"
        if cap.usd is not None and spent.usd >= cap.usd * share:
            return f"{whose} spent ${spent.usd:.4f}: {reached} of ${cap.usd:g}"
        if cap.tokens is not None and spent.tokens >= cap.tokens * share:
            return f"{whose} spent {spent.tokens} tokens: {reached} of {cap.tokens}"
        return None
