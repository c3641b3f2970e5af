"""Experiments: a dataset's results as kept in the store, summed up, and two compared.

Case by case (what got better or worse), and in total: pass rate, cost, latency p50/p95.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from orchestrator.evals.runner import CaseResult

__all__ = ["Change", "Summary", "compare", "kept", "summary"]

_RANK = {"pass": 2, "fail": 1, "error": 0}
# A verdict's detail as kept (a diagrams' difference is a few dozen lines at most).
_KEPT_CHARS = 4000


def kept(result: CaseResult) -> dict[str, Any]:
    """One case's run as an experiment keeps it (and `baton eval --json` prints it)."""
    run = result.run
    return {
        "case": result.case.name,
        "repeat": result.repeat,
        "outcome": result.outcome,
        "error": result.error[:_KEPT_CHARS] if result.error else None,
        "run_id": run.run_id if run else None,
        "cost_usd": run.cost_usd if run else None,
        "duration_s": run.duration_s if run else None,
        "tokens": run.tokens if run else None,
        "live_calls": list(run.live_calls) if run else [],
        "verdicts": [
            {**vars(v), "detail": v.detail[:_KEPT_CHARS], "judge": v.judge and vars(v.judge)}
            for v in result.verdicts
        ],
    }


@dataclass(frozen=True)
class Summary:
    """An experiment in figures."""

    passed: int
    total: int
    cost_usd: float
    p50_s: float
    p95_s: float

    @property
    def pass_rate(self) -> float:
        """The share of the cases that passed."""
        return self.passed / self.total if self.total else 0.0


def summary(results: list[dict[str, Any]]) -> Summary:
    """The figures of an experiment's results."""
    times = sorted(r["duration_s"] for r in results if r["duration_s"] is not None)
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))] if times else 0.0
    return Summary(
        passed=sum(r["outcome"] == "pass" for r in results),
        total=len(results),
        cost_usd=sum(r["cost_usd"] or 0.0 for r in results),
        p50_s=statistics.median(times) if times else 0.0,
        p95_s=p95,
    )


@dataclass(frozen=True)
class Change:
    """One case (and repeat) in two experiments."""

    case: str
    repeat: int
    before: dict[str, Any] | None
    after: dict[str, Any] | None

    @property
    def verdict(self) -> str:
        """`better`, `worse`, `same`, `new` or `gone` (by outcome)."""
        if self.before is None:
            return "new"
        if self.after is None:
            return "gone"
        rank = _RANK[self.after["outcome"]] - _RANK[self.before["outcome"]]
        return "better" if rank > 0 else "worse" if rank < 0 else "same"


def compare(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[Change]:
    """Each case of either experiment, in the first one's order then the second's new ones."""
    a = {(r["case"], r["repeat"]): r for r in before}
    b = {(r["case"], r["repeat"]): r for r in after}
    keys = list(a) + [k for k in b if k not in a]
    return [Change(case, n, a.get((case, n)), b.get((case, n))) for case, n in keys]
