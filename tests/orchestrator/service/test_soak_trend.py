"""The soak's measure of drift passes a machine's pauses by and catches a service that slows
down (synthetic streams of runs, no service)."""

from __future__ import annotations

import random
from collections.abc import Callable

from bench.soak import Soak, p99_drift

RATE = 10.0


def _stream(latency: Callable[[float, random.Random], float], seconds: float = 150.0) -> Soak:
    rng = random.Random(7)
    soak = Soak()
    for n in range(int(seconds * RATE)):
        at = n / RATE
        soak.ended.append((at, latency(at, rng)))
    return soak


def _steady(at: float, rng: random.Random) -> float:
    return rng.lognormvariate(-3.25, 0.15)  # p50 about 39 ms, p99 about 55 ms


def test_pauses_of_the_machine_are_not_drift() -> None:
    # A 2-second burst of runs 60% slower, three times in the last minute and once in the first.
    bursts = (40.0, 95.0, 118.0, 137.0)

    def paused(at: float, rng: random.Random) -> float:
        slow = any(b <= at < b + 2.0 for b in bursts)
        return _steady(at, rng) * (1.6 if slow else 1.0)

    first, last, drift = p99_drift(_stream(paused))
    assert drift < 0.20, (first, last)


def test_a_service_that_slows_down_drifts() -> None:
    def slowing(at: float, rng: random.Random) -> float:  # 25% slower from the 90th second
        return _steady(at, rng) * (1.25 if at >= 90.0 else 1.0)

    def creeping(at: float, rng: random.Random) -> float:  # 0.6% slower every second
        return _steady(at, rng) * (1.0 + 0.006 * at)

    for latency in (slowing, creeping):
        first, last, drift = p99_drift(_stream(latency))
        assert drift > 0.20, (latency.__name__, first, last)
