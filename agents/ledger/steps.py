"""The step log of a shard's open runs, as its ledger holds it, and their effects.

Each open run's recorded steps by invocation and key: loaded from the store when the run
resumes, replays or forks, and kept as they come (a delegation retried after its actor died reads
its invocation's back). And the calls that must run at most once started under each delegation
attempt (`record_effect`): a delegation whose actor died is retried only if none did. The store
holds the step log for good (`agents.ledger.writer`); this is what a live run reads.
"""

from __future__ import annotations

from agents.core.steps import Step

__all__ = ["StepBook"]


class StepBook:
    """Recorded steps and started effects of the open runs, by run."""

    def __init__(self) -> None:
        self._steps: dict[str, dict[str, dict[str, Step]]] = {}
        self._effects: dict[str, dict[str, list[str]]] = {}

    def load(self, run_id: str, steps: dict[str, dict[str, Step]]) -> None:
        """Start the run's log from steps read from the store (by invocation, then key).

        Its effects start afresh: this life of the run retries its delegations by its own.
        """
        self._steps[run_id] = steps
        self._effects.pop(run_id, None)

    def keep(self, run_id: str, step: Step) -> None:
        """Keep a step as it comes (the first one under its key stays)."""
        self._steps.setdefault(run_id, {}).setdefault(step.invocation, {}).setdefault(
            step.key, step
        )

    def recorded(self, run_id: str, invocation: str) -> dict[str, Step]:
        """An invocation's steps, by key (a copy)."""
        return dict(self._steps.get(run_id, {}).get(invocation, {}))

    def of(self, run_id: str) -> list[Step]:
        """Every step held for the run."""
        return [step for steps in self._steps.get(run_id, {}).values() for step in steps.values()]

    def counted(self, run_id: str) -> int:
        """How many steps are held for the run."""
        return sum(len(steps) for steps in self._steps.get(run_id, {}).values())

    def record_effect(self, run_id: str, attempts: tuple[str, ...], tool: str) -> None:
        """Note that `tool` (run at most once) is about to run under these delegation attempts."""
        effects = self._effects.setdefault(run_id, {})
        for attempt in attempts:
            effects.setdefault(attempt, []).append(tool)

    def effects(self, run_id: str, attempt: str) -> list[str]:
        """The at-most-once tools started under a delegation attempt (at any depth below it)."""
        return list(self._effects.get(run_id, {}).get(attempt, ()))

    def drop(self, run_id: str) -> None:
        """Forget the run (it ended, or its service let it go: the store keeps its steps)."""
        self._steps.pop(run_id, None)
        self._effects.pop(run_id, None)
