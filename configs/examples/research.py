"""A manager in code, as people write one with the OpenAI Agents SDK or Google ADK.

It plans, searches in parallel, writes, has the report verified, and revises it at most once.
The code decides what runs next; the agents' models do the steps. Each `flow.call` is a
delegation: a span, an arrow in the diagram, a step the run's record keeps (a resumed run runs
this function again, and the calls it made before take their results from the record).

A workflow must make the same calls in the same order each time it runs with the same answers:
no clock, no randomness, no reading of files that change between the calls.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from agents.tools.base import idempotent
from agents.workflows import Workflow

__all__ = ["Plan", "Review", "research", "search_notes", "split_topic"]

MAX_SEARCHES = 5


class Plan(BaseModel):
    """The planner's answer: what to search for."""

    queries: list[str]


class Review(BaseModel):
    """The verifier's answer: whether the report holds, and what to fix."""

    ok: bool
    issues: list[str]


async def research(flow: Workflow) -> dict[str, object]:
    """Plan, search in parallel, write, verify; revise once if the verifier asks."""
    plan = await flow.call("planner", f"Split this topic into search questions: {flow.task}")
    queries = Plan.model_validate(plan.data).queries[:MAX_SEARCHES]
    found = await asyncio.gather(
        *(flow.call("searcher", f"Search the notes for: {query}") for query in queries)
    )
    notes = "\n".join(f"- {answer.text}" for answer in found)
    draft = await flow.call("writer", f"Write a short report on {flow.task} from:\n{notes}")
    checked = await flow.call("verifier", f"Verify this report: {draft.text}")
    review = Review.model_validate(checked.data)
    if not review.ok:
        fixes = "; ".join(review.issues) or "make it clearer"
        draft = await flow.call("writer", f"Revise this report ({fixes}):\n{draft.text}")
    return {"report": draft.text, "searched": queries, "revised": not review.ok}


@idempotent
def split_topic(topic: str) -> list[str]:
    """Split a topic into search questions: what it is, its history, its uses.

    Args:
        topic: the topic to research.
    """
    subject = topic.rsplit(":", 1)[-1].strip() or topic
    return [f"what is {subject}", f"history of {subject}", f"uses of {subject}"]


@idempotent
def search_notes(query: str) -> str:
    """Search the notes for a query (a stand-in for a web search).

    Args:
        query: the question to search for.
    """
    asked = query.rsplit(":", 1)[-1].strip()
    return f"notes on {asked}: three sources agree."
