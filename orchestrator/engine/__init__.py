"""The run engine: one run's lifecycle on Ray, what it is asked to run and what it returns.

`Engine` is imported on first use: it brings in Ray, which readers of the other names (the
API's schemas, the CLI's store commands) do not need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.engine.results import RunResult
from orchestrator.engine.submission import (
    LAST,
    Execution,
    ForkPoint,
    Lineage,
    Origin,
    Submission,
    Turns,
)

if TYPE_CHECKING:
    from orchestrator.engine.lifecycle import Engine

__all__ = [
    "LAST",
    "Engine",
    "Execution",
    "ForkPoint",
    "Lineage",
    "Origin",
    "RunResult",
    "Submission",
    "Turns",
]


def __getattr__(name: str) -> Any:
    if name == "Engine":
        from orchestrator.engine.lifecycle import Engine

        return Engine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
