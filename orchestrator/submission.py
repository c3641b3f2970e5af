"""What the run service is asked to run: its own input type, whatever door it came through."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Submission"]


@dataclass(frozen=True)
class Submission:
    """A task to run, and how (validated by the door it came through: HTTP, CLI, MCP)."""

    task: str
    agent: str | None = None
    token_budget: int | None = None
    deadline_s: float | None = None

    def fingerprint(self) -> str:
        """Identifies the submission, for idempotent retries."""
        body = json.dumps(asdict(self), separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(body.encode()).hexdigest()

    def options(self) -> dict[str, Any]:
        """Everything but the task that was set, as the store keeps it."""
        return {k: v for k, v in asdict(self).items() if k != "task" and v is not None}
