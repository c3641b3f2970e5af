"""CPU-bound work for the scale-out benchmark: a tool that computes, holding the GIL, never
sleeping, so that only more processes on more CPUs make many of them finish sooner."""

from __future__ import annotations

import time

__all__ = ["burn", "rounds_for"]


def burn(rounds: int) -> str:
    """Step a pseudo-random generator `rounds` times in pure Python, so the GIL is held
    throughout (about 200 ms of one CPU at the benchmark's setting).

    Args:
        rounds: how many steps to compute.
    """
    state = 1
    for _ in range(rounds):
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
    return f"{state:08x}"


def rounds_for(seconds: float) -> int:
    """How many rounds of `burn` take `seconds` of CPU on this machine (measured, not assumed)."""
    probe = 200_000
    began = time.thread_time()
    burn(probe)
    spent = time.thread_time() - began
    return max(1, int(probe * seconds / spent))
