"""Spans nested by parentage: the one tree that every view (diagram, API, terminal) reads."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tracing import attributes as attr
from tracing.records import SpanRecord

__all__ = ["SpanTree", "span_forest"]


@dataclass
class SpanTree:
    """A span and the spans under it, in start order."""

    span: SpanRecord
    children: list[SpanTree] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The span's name."""
        return str(self.span.get("name", ""))

    @property
    def attrs(self) -> dict[str, Any]:
        """The span's attributes."""
        return self.span.get("attributes") or {}

    @property
    def failed(self) -> bool:
        """Whether the span ended with an error status."""
        return self.span.get("status") == "ERROR"

    @property
    def open(self) -> bool:
        """Whether the span has not ended yet (its run goes on)."""
        return self.span.get("end_ns") is None

    @property
    def duration_ms(self) -> float | None:
        """How long the span took; None while it is open."""
        if self.open:
            return None
        return ((self.span["end_ns"] or 0) - self.span["start_ns"]) / 1e6

    @property
    def agent(self) -> str:
        """The agent an `invoke_agent` span stands for."""
        return str(
            self.attrs.get(attr.GEN_AI_AGENT_NAME) or self.name.removeprefix(attr.AGENT_SPAN_PREFIX)
        )

    @property
    def model(self) -> str:
        """The model a `chat` span called, as `provider/model` when the provider is known."""
        model = str(
            self.attrs.get(attr.GEN_AI_REQUEST_MODEL)
            or self.name.removeprefix(attr.CHAT_SPAN_PREFIX)
        )
        provider = self.attrs.get(attr.GEN_AI_PROVIDER_NAME)
        return f"{provider}/{model}" if provider else model

    def walk(self) -> Iterator[SpanTree]:
        """This node and every node under it, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()


def span_forest(spans: Iterable[SpanRecord]) -> list[SpanTree]:
    """Spans nested by parentage, in start order; a span whose parent is missing is a root."""
    nodes = {
        s["span_id"]: SpanTree(s) for s in sorted(spans, key=lambda s: int(s["start_ns"] or 0))
    }
    roots: list[SpanTree] = []
    for node in nodes.values():
        parent = nodes.get(node.span.get("parent_span_id") or "")
        (parent.children if parent is not None else roots).append(node)
    return roots
