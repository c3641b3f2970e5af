"""The triage example's tool (`configs/examples/triage.yaml`)."""

from __future__ import annotations

import re

from agents.tools.base import idempotent

__all__ = ["questions_in"]


@idempotent
def questions_in(request: str) -> list[str]:
    """List the questions in a request (its sentences, split at . ? and !).

    Args:
        request: the customer's request.
    """
    said = request.rsplit(":", 1)[-1]
    return [s.strip() for s in re.split(r"(?<=[.?!])\s+", said) if s.strip()]
