"""How many runs the service takes on: running plus queued, up to bounds that hold in a burst."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from orchestrator.errors import Overloaded

__all__ = ["Admission"]


class Admission:
    """Counts the runs a service instance has accepted and not finished, and refuses more.

    Args:
        max_running: runs that go at once.
        max_queued: runs that may wait their turn beyond those.
        accepted: how many runs the service holds now (running or queued).
    """

    def __init__(self, max_running: int, max_queued: int, accepted: Callable[[], int]) -> None:
        self.limit = max_running + max_queued
        self._max_running = max_running
        self._accepted = accepted
        self._recording = 0  # admitted, and being recorded before the service holds them
        self._mean_run_s = 1.0

    @property
    def in_flight(self) -> int:
        """Runs accepted and not finished: running, queued, or being recorded."""
        return self._accepted() + self._recording

    @contextlib.contextmanager
    def place(self) -> Iterator[None]:
        """Hold a place for one run while it is recorded, or raise `Overloaded`.

        The check and the reservation happen in one step of the event loop, so a burst of
        concurrent submissions cannot all pass the check before any of them is counted.
        """
        if self.in_flight >= self.limit:
            waves = self.in_flight / self._max_running
            raise Overloaded(
                f"{self.in_flight} runs are running or queued (limit {self.limit}); retry later",
                retry_after_s=max(1, round(waves * self._mean_run_s)),
            )
        self._recording += 1
        try:
            yield
        finally:
            self._recording -= 1

    def ran(self, seconds: float) -> None:
        """Note how long a run took, for `Retry-After` estimates.

        From its place among the running (queueing not counted): `Retry-After` is the queue
        ahead in waves of `max_running`, each a mean run long.
        """
        self._mean_run_s = 0.9 * self._mean_run_s + 0.1 * seconds
