"""`baton trace`'s text: each span event says what it holds."""

from __future__ import annotations

import io

from rich.console import Console

from orchestrator.cli.report import span_tree
from tracing import SpanRecord


def test_a_span_event_shows_its_words_or_its_attributes_never_an_empty_colon() -> None:
    events = [
        {"name": "input_requested", "time_ns": 2, "attributes": {"baton.question.id": "q-1"}},
        {"name": "step_rules", "time_ns": 3, "attributes": {"step": 2, "rules": ["trim"]}},
        {"name": "hook_veto", "time_ns": 4, "attributes": {"hook": "Audit", "reason": "no"}},
        {"name": "marked", "time_ns": 5, "attributes": {}},
    ]
    span: SpanRecord = {
        "trace_id": "1" * 32, "span_id": "2" * 16, "parent_span_id": None,
        "name": "invoke_agent teller", "kind": "INTERNAL", "start_ns": 1, "end_ns": 9,
        "status": "OK", "status_message": None, "attributes": {}, "events": events,
        "resource": {},
    }  # type: ignore[typeddict-item]  # fmt: skip
    out = io.StringIO()
    Console(file=out, width=400).print(span_tree([span]))
    text = out.getvalue()
    assert "[input_requested: baton.question.id=q-1]" in text
    assert "[step_rules: step=2 rules=[trim]]" in text
    assert "[hook_veto: no]" in text  # (its reason says it)
    assert "[marked]" in text and ": ]" not in text
