"""Shared set-up for the benchmarks: Ray once, systems built from YAML text, timing helpers."""

from __future__ import annotations

import logging
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psutil
import ray

from agents.ray.pool import PoolOptions
from orchestrator.engine import Engine
from orchestrator.system.config import AgentSystem, parse_config

__all__ = [
    "PlainModel",
    "cpu_ms_per_task",
    "cpu_seconds",
    "engine",
    "interleaved_medians",
    "median_seconds",
    "start",
    "system",
]


class PlainModel:
    """A floor's model call: plain `litellm.acompletion` of a built-in model.

    As a user of the stack would write it (Baton's own client trims litellm's path: see
    agents/models/inline.py).
    """

    def __init__(self, params: dict[str, Any]) -> None:
        import litellm

        from agents.models.client import configure_litellm

        configure_litellm()  # makes `baton/scripted` known to litellm in this process
        self._acompletion = litellm.acompletion
        self._params = params

    async def complete(self, messages: list[dict[str, Any]]) -> object:
        return await self._acompletion(model="baton/scripted", messages=messages, **self._params)


def start() -> None:
    # "local": a Ray of its own, even where another one left its address behind.
    ray.init(
        address="local",
        namespace="baton-bench",
        include_dashboard=False,
        logging_level=logging.ERROR,
        log_to_driver=False,
    )


def system(yaml_text: str) -> AgentSystem:
    return parse_config(yaml_text, "bench.yaml")


def engine(yaml_text: str) -> Engine:
    built = Engine(system(yaml_text), PoolOptions(namespace="baton-bench"))
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


def _role(process: psutil.Process, service_pid: int | None) -> str | None:
    if process.pid == os.getpid():  # with a service, only its client runs here
        return "this process (client)" if service_pid is not None else "this process (engine)"
    if process.pid == service_pid:
        return "baton serve"
    line = " ".join(process.cmdline())
    for title, role in (("LedgerActor", "ledger actor"), ("AgentHost", "agent hosts")):
        if title in line:
            return role
    if "gcs_server" in line or "raylet" in line:
        return "ray gcs + raylet"
    return None


def cpu_seconds(service_pid: int | None = None) -> dict[str, float]:
    """CPU seconds (user + system) used so far by Baton's and Ray's main processes, by role."""
    used: dict[str, float] = {}
    for process in psutil.process_iter():
        try:
            role = _role(process, service_pid)
            if role is not None:
                times = process.cpu_times()
                used[role] = used.get(role, 0.0) + times.user + times.system
        except psutil.Error:
            continue
    return used


def cpu_ms_per_task(before: dict[str, float], after: dict[str, float], tasks: int) -> str:
    """CPU milliseconds per task in each role between two `cpu_seconds` readings."""
    parts = [
        f"{role} {(after[role] - before.get(role, 0.0)) * 1000 / tasks:.1f}"
        for role in sorted(after)
        if after[role] - before.get(role, 0.0) > 0
    ]
    return ", ".join(parts)


def cpu_ceiling(before: dict[str, float], after: dict[str, float], tasks: int) -> float:
    """Tasks per second this machine's cores could give at the CPU the tasks used (all roles)."""
    used = sum(after[role] - before.get(role, 0.0) for role in after)
    return (os.cpu_count() or 1) * tasks / used if used > 0 else float("inf")
