"""Helpers for tests: tools with observable timing, and config builders."""

from __future__ import annotations

import asyncio
import textwrap
import time

from orchestrator.config import AgentSystem, parse_config

__all__ = ["config", "slow_step", "stamp"]


async def slow_step(seconds: float) -> str:
    """Wait for the given number of seconds, then report when the wait started and ended."""
    start = time.time()
    await asyncio.sleep(seconds)
    return f"{start:.6f}-{time.time():.6f}"


def stamp(text: str) -> str:
    """Report the current time (a cheap tool a scripted model can call over and over)."""
    return f"{text} at {time.time():.6f}"


def config(yaml_text: str) -> AgentSystem:
    return parse_config(textwrap.dedent(yaml_text), "test.yaml")
