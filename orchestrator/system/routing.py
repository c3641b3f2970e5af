"""Choosing the entry agent for `agent: auto`.

Each agent scores the number of significant task words (lower-cased, crudely stemmed, stop
words dropped) that appear in its capabilities (weight 3), its name (weight 2) and its
description (weight 1). The highest score wins; ties go to the agent declared first. When no
agent scores above zero, the system's entry agent takes the task.
"""

from __future__ import annotations

from pydantic import BaseModel

from agents.core.spec import AgentCard
from agents.models.text import terms

__all__ = ["AUTO", "RoutingDecision", "route"]

# The `agent` value that asks for routing by capabilities.
AUTO = "auto"

CAPABILITY_WEIGHT = 3
NAME_WEIGHT = 2
DESCRIPTION_WEIGHT = 1


class RoutingDecision(BaseModel):
    """Which agent a task was routed to, why, and every agent's score."""

    agent: str
    scores: dict[str, int]
    reason: str


def _score(task_terms: set[str], card: AgentCard) -> int:
    capability_terms = terms(" ".join(card.capabilities))
    return (
        CAPABILITY_WEIGHT * len(task_terms & capability_terms)
        + NAME_WEIGHT * len(task_terms & terms(card.name))
        + DESCRIPTION_WEIGHT * len(task_terms & terms(card.description))
    )


def route(task: str, cards: list[AgentCard], fallback: str) -> RoutingDecision:
    """Pick the agent whose declared capabilities best match `task`."""
    task_terms = terms(task)
    scores = {card.name: _score(task_terms, card) for card in cards}
    best = max(cards, key=lambda c: scores[c.name])  # max keeps the first of equals
    if scores[best.name] <= 0:
        return RoutingDecision(
            agent=fallback, scores=scores, reason=f"no capability matched; entry agent {fallback}"
        )
    return RoutingDecision(
        agent=best.name, scores=scores, reason=f"best capability match ({scores[best.name]})"
    )
