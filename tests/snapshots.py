"""Snapshot helpers: what users see (span trees, diagrams) compared to reviewed text files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tracing import attributes as attr
from tracing.tree import SpanTree, span_forest

__all__ = ["SNAPSHOTS", "assert_snapshot", "tree_text"]

SNAPSHOTS = Path(__file__).parent / "tracing" / "snapshots"

# What a line of the tree shows besides the name and status: stable across runs (no ids, no
# times), and what a reader of a trace looks at.
_SHOWN = (
    attr.GEN_AI_OPERATION_NAME,
    attr.GEN_AI_AGENT_NAME,
    attr.GEN_AI_TOOL_NAME,
    attr.GEN_AI_REQUEST_MODEL,
    attr.BATON_DELEGATION_DEPTH,
    attr.BATON_DELEGATION_CHAIN,
    attr.BATON_DELEGATION_TARGET,
    attr.GEN_AI_USAGE_INPUT_TOKENS,
    attr.GEN_AI_USAGE_OUTPUT_TOKENS,
)


_TOKENS = (attr.GEN_AI_USAGE_INPUT_TOKENS, attr.GEN_AI_USAGE_OUTPUT_TOKENS)


def _line(node: SpanTree, tokens: bool) -> str:
    keys = [k for k in _SHOWN if tokens or k not in _TOKENS]
    shown: dict[str, Any] = {k: node.attrs[k] for k in keys if k in node.attrs}
    if node.attrs.get(attr.BATON_AGENT_LOST):
        shown["lost"] = True  # which Ray error said so varies; that it was lost does not
    elif attr.ERROR_TYPE in node.attrs:
        shown[attr.ERROR_TYPE] = node.attrs[attr.ERROR_TYPE]
    events = [e["name"] for e in node.span.get("events") or []]
    parts = [node.name, str(node.span.get("status")), *(f"{k}={v}" for k, v in shown.items())]
    if events:
        parts.append(f"events={events}")
    return " | ".join(parts)


def tree_text(spans: list[dict[str, Any]], *, tokens: bool = True) -> str:
    """The span tree as indented lines, ids and times stripped, siblings in start order.

    Args:
        spans: the run's span records.
        tokens: show token counts (leave them out where a model reads text that varies, such
            as a Ray error message).
    """
    lines: list[str] = []

    def add(nodes: list[SpanTree], depth: int) -> None:
        for node in nodes:
            lines.append("  " * depth + _line(node, tokens))
            add(node.children, depth + 1)

    add(span_forest(spans), 0)
    return "\n".join(lines) + "\n"


def assert_snapshot(name: str, text: str) -> None:
    """`text` equals the stored snapshot; `BATON_UPDATE_SNAPSHOTS=1` rewrites it (then review
    the diff like code)."""
    path = SNAPSHOTS / name
    if os.environ.get("BATON_UPDATE_SNAPSHOTS"):
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed: rerun with BATON_UPDATE_SNAPSHOTS=1"
