"""Checks and answer models for the datasets in `configs/datasets/` (`baton eval`).

A check is `(answer, run) -> bool | str | None`: True or None passes, False fails, a string fails
saying why. `run` is what the case's run did (`orchestrator.evals.Observed`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

__all__ = ["Verdict", "lists_what_each_agent_said", "quotes_its_task"]


class Verdict(BaseModel):
    """The support team's checker answers with this (its `output_schema`)."""

    verdict: Literal["true", "false", "unknown"]
    reason: str


def quotes_its_task(answer: str, run: Any) -> bool | str:
    """The answer says which task it answers (the offline model's answers begin so)."""
    return answer.startswith("Answer to: ") or f"does not say its task: {answer[:80]!r}"


def lists_what_each_agent_said(answer: str, run: Any) -> bool | str:
    """Every agent the entry agent asked has a line of the answer."""
    asked = [child.agent for child in run.tree.children] if run.tree else []
    missing = [name for name in asked if f"- {name}: " not in answer]
    return not missing or f"no line from {', '.join(missing)}"
