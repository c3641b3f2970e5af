"""Shared set-up for the benchmarks: Ray once, systems built from YAML text, timing helpers."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Awaitable, Callable

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import ray

from orchestrator.config import AgentSystem, parse_config
from orchestrator.engine import Engine

__all__ = ["engine", "interleaved_medians", "median_seconds", "start", "system"]


def start() -> None:
    ray.init(
        namespace="baton-bench", include_dashboard=False, logging_level="ERROR", log_to_driver=False
    )


def system(yaml_text: str) -> AgentSystem:
    return parse_config(yaml_text, "bench.yaml")


def engine(yaml_text: str) -> Engine:
    built = Engine(system(yaml_text), namespace="baton-bench")
    built.start()
    return built


async def median_seconds(
    fn: Callable[[], Awaitable[object]], *, warmup: int, repeats: int
) -> float:
    for _ in range(warmup):
        await fn()
    samples = []
    for _ in range(repeats):
        began = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


async def interleaved_medians(
    contenders: list[Callable[[], Awaitable[object]]], *, warmup: int, repeats: int
) -> list[float]:
    """Median seconds of each contender, timed in turns (one of each per round), so that a slow
    patch of the machine affects every contender alike."""
    for _ in range(warmup):
        for fn in contenders:
            await fn()
    samples: list[list[float]] = [[] for _ in contenders]
    for _ in range(repeats):
        for fn, kept in zip(contenders, samples, strict=True):
            began = time.perf_counter()
            await fn()
            kept.append(time.perf_counter() - began)
    return [statistics.median(kept) for kept in samples]
