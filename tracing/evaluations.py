"""A run's evaluations as spans of its trace, in the GenAI conventions' evaluation form.

`baton eval` checks a finished run against its case's expectations; the verdicts join the run's
trace as one `evaluation {case}` span under the run's root span, with a `gen_ai.evaluation.result`
event per expectation (`gen_ai.evaluation.name`, `.score.value`, `.score.label`, and
`.explanation` when the run's tracing records content), and a `chat {model}` span under it for
each judge model's call (tokens, cost). The run ended before: these spans are made after the
fact, with the times of what they tell, so trace viewers (Phoenix, Langfuse, Jaeger) show them
beside the run.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tracing import attributes as attr
from tracing.records import MAX_ATTRIBUTE_CHARS, MAX_EVENTS, SpanEventRecord, SpanRecord
from tracing.redaction import Redactor

__all__ = ["EvaluationResult", "JudgeCall", "evaluation_spans"]


@dataclass(frozen=True)
class JudgeCall:
    """A judge model's call for a rubric: who answered, what it cost, when (Unix ns)."""

    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    started_ns: int
    ended_ns: int


@dataclass(frozen=True)
class EvaluationResult:
    """One expectation's outcome: `label` pass, fail or error; `score` from 0 to 1."""

    name: str
    label: str
    score: float
    explanation: str = ""
    judge: JudgeCall | None = None


def _span_id() -> str:
    return f"{random.getrandbits(64) or 1:016x}"


def evaluation_spans(
    root: SpanRecord,
    *,
    dataset: str,
    case: str,
    outcome: str,
    results: Sequence[EvaluationResult],
    redact: Redactor,
    explain: bool,
) -> list[SpanRecord]:
    """The spans of one evaluation of the run whose root span is `root`.

    `explain`: record each result's explanation (it may quote the run's answer: only when the
    run's tracing records content).
    """
    now = time.time_ns()
    calls = [r.judge for r in results if r.judge is not None]
    start = min([now, *(c.started_ns for c in calls)])
    evaluation_id = _span_id()
    events: list[SpanEventRecord] = []
    for result in results[:MAX_EVENTS]:
        attributes: dict[str, Any] = {
            attr.GEN_AI_EVALUATION_NAME: redact.text(result.name),
            attr.GEN_AI_EVALUATION_SCORE_VALUE: result.score,
            attr.GEN_AI_EVALUATION_SCORE_LABEL: result.label,
        }
        if explain and result.explanation:
            text = redact.text(result.explanation[:MAX_ATTRIBUTE_CHARS])
            attributes[attr.GEN_AI_EVALUATION_EXPLANATION] = text
        if result.label == "error":
            attributes[attr.ERROR_TYPE] = "evaluation_error"
        events.append(
            {"name": attr.EVENT_EVALUATION_RESULT, "time_ns": now, "attributes": attributes}
        )
    resource = root.get("resource") or {}
    spans: list[SpanRecord] = [
        {
            "trace_id": root["trace_id"],
            "span_id": evaluation_id,
            "parent_span_id": root["span_id"],
            "name": f"{attr.EVALUATION_SPAN_PREFIX}{redact.text(case)}"[:MAX_ATTRIBUTE_CHARS],
            "kind": "INTERNAL",
            "start_ns": start,
            "end_ns": now,
            "status": "UNSET",
            "status_message": None,
            "attributes": {
                attr.BATON_RUN_ID: root["attributes"].get(attr.BATON_RUN_ID, ""),
                attr.BATON_EVALUATION_DATASET: redact.text(dataset),
                attr.BATON_EVALUATION_CASE: redact.text(case),
                attr.BATON_EVALUATION_OUTCOME: outcome,
                attr.OPENINFERENCE_SPAN_KIND: attr.OPENINFERENCE_EVALUATOR,
            },
            "events": events,
            "resource": resource,
        }
    ]
    for call in calls:
        provider, sep, model = call.model.partition("/")
        attributes = {
            attr.GEN_AI_OPERATION_NAME: attr.OP_CHAT,
            attr.GEN_AI_REQUEST_MODEL: model if sep else call.model,
            attr.GEN_AI_USAGE_INPUT_TOKENS: call.input_tokens,
            attr.GEN_AI_USAGE_OUTPUT_TOKENS: call.output_tokens,
            attr.OPENINFERENCE_SPAN_KIND: attr.OPENINFERENCE_LLM,
        }
        if sep:
            attributes[attr.GEN_AI_PROVIDER_NAME] = provider
        if call.cost_usd is not None:
            attributes[attr.BATON_USAGE_COST] = call.cost_usd
        spans.append(
            {
                "trace_id": root["trace_id"],
                "span_id": _span_id(),
                "parent_span_id": evaluation_id,
                "name": attr.chat_span_name(model if sep else call.model),
                "kind": "CLIENT",
                "start_ns": call.started_ns,
                "end_ns": max(call.ended_ns, call.started_ns),
                "status": "UNSET",
                "status_message": None,
                "attributes": attributes,
                "events": [],
                "resource": resource,
            }
        )
    return spans
