"""The trace of a run still going: the spans finished so far, plus the open ones.

Finished spans of sub-agents reach the ledger when each invocation ends; the rest of the run's
spans are still open in the agents' processes. Every progress event carries the ids of the span
it belongs to, so the open spans (and the model calls finished since) are rebuilt from the
events with the same ids, names and parentage the finished trace will have. Views (diagram,
waterfall) thus read spans whether the run is finished or not.
"""

from __future__ import annotations

from typing import Any

from tracing import SpanRecord

__all__ = ["live_spans"]

_CLOSES = {"run_finished", "agent_finished", "tool_finished"}


def _opened(event: dict[str, Any]) -> str | None:
    """The name of the span an event opens, if it opens one."""
    kind = event.get("type")
    if kind == "run_started":
        return "invoke_workflow baton"
    if kind == "agent_started":
        return f"invoke_agent {event['agent']}"
    if kind == "tool_started":
        return f"execute_tool {event['tool']}"
    return None


def _record(event: dict[str, Any], name: str, trace_id: str) -> SpanRecord:
    attributes: dict[str, Any] = {"gen_ai.agent.name": event.get("agent")}
    if event.get("tool"):
        attributes["gen_ai.tool.name"] = event["tool"]
        attributes["gen_ai.tool.call.id"] = event.get("call_id")
    if event.get("target"):
        attributes["baton.delegation.target"] = event["target"]
    if event.get("chain"):
        attributes["baton.delegation.chain"] = event["chain"]
    return {
        "trace_id": event.get("trace_id") or trace_id,
        "span_id": event["span_id"],
        "parent_span_id": event.get("parent_span_id"),
        "name": name,
        "kind": "INTERNAL",
        "start_ns": int(event.get("start_ns") or event["ts"] * 1e9),
        "end_ns": event.get("end_ns"),
        "status": "UNSET",
        "status_message": None,
        "attributes": attributes,
        "events": [],
        "resource": {},
    }


def live_spans(finished: list[SpanRecord], events: list[dict[str, Any]]) -> list[SpanRecord]:
    """The finished spans, and those the events say are open (or finished but not yet sent)."""
    known = {s["span_id"] for s in finished}
    built: dict[str, SpanRecord] = {}
    trace_id = finished[0]["trace_id"] if finished else ""
    for event in events:
        span_id, kind = event.get("span_id"), event.get("type")
        if not span_id or span_id in known:
            continue
        opened = _opened(event)
        if opened is not None:
            built[span_id] = _record(event, opened, trace_id)
        elif kind == "model_finished":
            chat = _record(event, f"chat {event.get('model')}", trace_id)
            chat["attributes"] = {
                "gen_ai.request.model": event.get("model"),
                "gen_ai.usage.input_tokens": event.get("input_tokens"),
                "gen_ai.usage.output_tokens": event.get("output_tokens"),
            }
            built[span_id] = chat
        elif kind in _CLOSES and span_id in built:
            record = built[span_id]
            record["end_ns"] = int(event["ts"] * 1e9)
            failed = event.get("error") is True or event.get("status") not in (None, "succeeded")
            if failed:
                record["status"] = "ERROR"
                record["status_message"] = (
                    event.get("error") if event.get("error") is not True else None
                )
                record["attributes"]["error.type"] = event.get("status") or "tool_error"
            if "input_tokens" in event:
                record["attributes"]["gen_ai.usage.input_tokens"] = event["input_tokens"]
                record["attributes"]["gen_ai.usage.output_tokens"] = event["output_tokens"]
        elif kind == "delegation_refused" and span_id in built:
            built[span_id]["events"].append(
                {
                    "name": "delegation_refused",
                    "time_ns": int(event["ts"] * 1e9),
                    "attributes": {
                        "baton.refusal.reason": event.get("reason"),
                        "message": event.get("message"),
                    },
                }
            )
    return [*finished, *built.values()]
