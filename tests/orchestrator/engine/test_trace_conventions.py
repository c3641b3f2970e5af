"""What a trace viewer receives over OTLP/HTTP follows the GenAI semantic conventions.

A run on Ray, exported to a real OTLP/HTTP receiver; the received attributes are checked for
their names, OTLP value types and the JSON shapes that the conventions publish for captured
content (docs/gen-ai/gen-ai-{input,output}-messages.json, -system-instructions.json and
-tool-definitions.json in open-telemetry/semantic-conventions), as written out below.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from agents.ray.pool import PoolOptions
from orchestrator.engine import Engine, Submission
from tests.testkit import OtlpReceiver, config
from tracing import OtlpExport

pytestmark = pytest.mark.ray


def _when(kind: str, then: dict[str, Any]) -> dict[str, Any]:
    return {"if": {"properties": {"type": {"const": kind}}, "required": ["type"]}, "then": then}


_ID = {"type": ["string", "null"]}
PART = {
    "type": "object",
    "required": ["type"],
    "properties": {"type": {"type": "string"}},
    "allOf": [
        _when("text", {"required": ["content"], "properties": {"content": {"type": "string"}}}),
        _when(
            "tool_call",
            {"required": ["name"], "properties": {"name": {"type": "string"}, "id": _ID}},
        ),
        _when("tool_call_response", {"required": ["response"], "properties": {"id": _ID}}),
    ],
}
ROLES = ["system", "user", "assistant", "tool"]


def _array_of(required: list[str], **properties: Any) -> dict[str, Any]:
    item = {"type": "object", "required": required, "properties": properties}
    return {"type": "array", "items": item}


PARTS = {"type": "array", "items": PART}
INPUT_MESSAGES = _array_of(["role", "parts"], role={"enum": ROLES}, parts=PARTS)
OUTPUT_MESSAGES = _array_of(
    ["role", "parts", "finish_reason"],
    role={"type": "string"},
    parts=PARTS,
    finish_reason={"enum": ["stop", "length", "content_filter", "tool_call", "error"]},
)
SYSTEM_INSTRUCTIONS = {"type": "array", "items": PART}
TOOL_DEFINITIONS = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["type", "name", "description"],
        "properties": {
            "type": {"enum": ["function", "custom"]},
            "name": {"type": "string"},
            "description": {"type": "string"},
        },
    },
}
SHAPES = {
    "gen_ai.input.messages": INPUT_MESSAGES,
    "gen_ai.output.messages": OUTPUT_MESSAGES,
    "gen_ai.system_instructions": SYSTEM_INSTRUCTIONS,
    "gen_ai.tool.definitions": TOOL_DEFINITIONS,
}
# OTLP value kinds the conventions give these attributes.
TYPES = {
    "gen_ai.operation.name": "stringValue",
    "gen_ai.agent.name": "stringValue",
    "gen_ai.request.model": "stringValue",
    "gen_ai.usage.input_tokens": "intValue",
    "gen_ai.usage.output_tokens": "intValue",
    "gen_ai.response.finish_reasons": "arrayValue",
    "gen_ai.tool.name": "stringValue",
    "gen_ai.tool.call.id": "stringValue",
    "error.type": "stringValue",
    **{key: "stringValue" for key in SHAPES},  # JSON, as span attributes carry it
}
OK, ERROR = 1, 2  # OTLP status codes
INTERNAL, CLIENT = 1, 3  # OTLP span kinds

TEAM = """
name: conventions
tracing: {capture_content: true}
agents:
  - name: lead
    instructions: Hand arithmetic to calc.
    delegates: [calc]
    tools: [tests.testkit:fail_loudly]
    model:
      name: baton/scripted
      params:
        replies:
          - tool_calls:
              - {name: delegate_to_calc, arguments: {task: calculate 2 + 3}}
              - {name: fail_loudly, arguments: {reason: the disk is full}}
          - {content: It is 5.}
  - name: calc
    description: Does arithmetic.
    instructions: Compute exactly.
    tools: [configs.tools:calculate]
"""
TASK = "What is 2 + 3?"


@pytest.fixture(scope="module")
def received(ray_address: str) -> Iterator[tuple[Any, list[dict[str, Any]]]]:
    receiver = OtlpReceiver()
    export = OtlpExport(OTLPSpanExporter(endpoint=f"{receiver.endpoint}/v1/traces"))
    engine = Engine(config(TEAM), PoolOptions(namespace="baton-tests"), export=export)
    engine.start()
    try:
        result = asyncio.run(engine.run(Submission(TASK)))
        assert export.flush()
        yield result, receiver.spans
    finally:
        engine.stop()
        receiver.close()


def _one(spans: list[dict[str, Any]], name: str) -> dict[str, Any]:
    [span] = [s for s in spans if s["name"] == name]
    return span


def _content(span: dict[str, Any], key: str) -> Any:
    return json.loads(span["attributes"][key])


def test_every_span_has_a_conventional_name_types_and_a_recorded_outcome(
    received: tuple[Any, list[dict[str, Any]]],
) -> None:
    result, spans = received
    assert result.status == "succeeded", result.error
    assert len({s["trace_id"] for s in spans}) == 1 and len(spans) == 10
    for span in spans:
        attributes = span["attributes"]
        operation = attributes["gen_ai.operation.name"]
        target = {
            "invoke_workflow": "baton",
            "invoke_agent": attributes.get("gen_ai.agent.name"),
            "chat": attributes.get("gen_ai.request.model"),
            "execute_tool": attributes.get("gen_ai.tool.name"),
        }[operation]
        assert span["name"] == f"{operation} {target}"
        for key, kind in TYPES.items():
            if key in attributes:
                assert span["types"][key] == kind, (span["name"], key)
        for key, shape in SHAPES.items():
            if key in attributes:
                jsonschema.validate(_content(span, key), shape)
        assert span["kind"] == (CLIENT if operation == "chat" else INTERNAL), span["name"]
        # Success is said, not left unset; the one tool that failed says how.
        if span["name"] == "execute_tool fail_loudly":
            assert span["status"] == ERROR and attributes["error.type"] == "tool_error"
        else:
            assert span["status"] == OK, span["name"]


def test_the_root_span_carries_the_task_and_the_answer(
    received: tuple[Any, list[dict[str, Any]]],
) -> None:
    result, spans = received
    root = _one(spans, "invoke_workflow baton")
    assert root["parent_span_id"] is None
    [asked] = _content(root, "gen_ai.input.messages")
    assert asked == {"role": "user", "parts": [{"type": "text", "content": TASK}]}
    [answered] = _content(root, "gen_ai.output.messages")
    assert answered["parts"] == [{"type": "text", "content": result.output}]
    assert result.output == "It is 5." and answered["finish_reason"] == "stop"
    # The plain-text names trace lists show (OpenInference's), and the root's kind.
    attributes = root["attributes"]
    assert (attributes["input.value"], attributes["output.value"]) == (TASK, result.output)
    assert attributes["openinference.span.kind"] == "CHAIN"
    calc = _one(spans, "invoke_agent calc")["attributes"]
    assert calc["input.value"] == "calculate 2 + 3" and "5" in calc["output.value"]


def test_agents_and_model_calls_show_as_a_chat(
    received: tuple[Any, list[dict[str, Any]]],
) -> None:
    _, spans = received
    calc = _one(spans, "invoke_agent calc")
    assert _content(calc, "gen_ai.input.messages")[0]["parts"][0]["content"] == "calculate 2 + 3"
    assert _content(calc, "gen_ai.system_instructions") == [
        {"type": "text", "content": "Compute exactly."}
    ]
    lead_chats = [
        s
        for s in spans
        if s["name"] == "chat scripted" and s["parent_span_id"] == _lead(spans)["span_id"]
    ]
    first, second = sorted(lead_chats, key=lambda s: len(s["attributes"]["gen_ai.input.messages"]))
    asked = _content(first, "gen_ai.input.messages")
    assert [m["role"] for m in asked] == ["system", "user"]
    assert {t["name"] for t in _content(first, "gen_ai.tool.definitions")} == {
        "delegate_to_calc",
        "fail_loudly",
    }
    [reply] = _content(first, "gen_ai.output.messages")
    assert reply["finish_reason"] == "tool_call"
    calls = {p["name"]: p for p in reply["parts"] if p["type"] == "tool_call"}
    # Arguments as JSON, not as a string of JSON.
    assert calls["delegate_to_calc"]["arguments"] == {"task": "calculate 2 + 3"}
    # The tool results the model was given back, matched to the calls by id.
    responses = {
        p["id"]: p["response"]
        for m in _content(second, "gen_ai.input.messages")
        if m["role"] == "tool"
        for p in m["parts"]
    }
    assert "5" in responses[calls["delegate_to_calc"]["id"]]
    assert "the disk is full" in responses[calls["fail_loudly"]["id"]]


def _lead(spans: list[dict[str, Any]]) -> dict[str, Any]:
    return _one(spans, "invoke_agent lead")
