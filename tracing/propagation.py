"""W3C trace context in and out of the messages that cross Ray process boundaries."""

from __future__ import annotations

import logging

from opentelemetry import propagate
from opentelemetry.context import Context

__all__ = ["extract_context", "inject_context"]

logger = logging.getLogger(__name__)


def inject_context() -> dict[str, str]:
    """The current span's context as a `traceparent`/`tracestate` carrier."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def extract_context(carrier: dict[str, str] | None) -> Context | None:
    """The parent context from a carrier; a missing or bad carrier means no parent, not an error."""
    if not carrier:
        return None
    try:
        return propagate.extract(carrier)
    except Exception:
        logger.warning("ignoring a malformed trace context carrier", exc_info=True)
        return None
