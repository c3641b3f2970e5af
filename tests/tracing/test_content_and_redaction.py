"""What a trace records: message contents only when asked, never a secret, failures as errors."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agents.core.limits import TraceOptions
from agents.core.messages import Delegation, RunContext
from agents.core.spec import AgentSpec, ModelSpec
from agents.models.client import LiteLLMClient
from agents.runtime.agent import AgentRuntime
from agents.tools.base import load_function_tool
from tracing import (
    REDACTED,
    Redactor,
    SpanCollector,
    configure_tracing,
    inject_context,
    workflow_span,
)

pytestmark = pytest.mark.anyio

CANARY = "sk-canary-Zx81Qa0917bbQ3"


@pytest.fixture(scope="module")
def collector() -> Iterator[SpanCollector]:
    yield configure_tracing("test", [CANARY])


def scripted(*replies: dict[str, Any]) -> LiteLLMClient:
    return LiteLLMClient(ModelSpec(name="baton/scripted", params={"replies": list(replies)}))


async def run_traced(
    collector: SpanCollector, runtime: AgentRuntime, task: str, *, record: bool = True
) -> list[dict[str, Any]]:
    with workflow_span("run-c", runtime.spec.name, "test", record=record) as root:
        context = RunContext(
            run_id="run-c", chain=("a",), deadline=time.time() + 30, trace_context=inject_context()
        )
        await runtime.invoke(Delegation(task=task, context=context))
    return collector.drain(root.get_span_context().trace_id)


def by_name(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in spans}


FAILING_TOOL_REPLIES = (
    {"tool_calls": [{"name": "fail_loudly", "arguments": {"reason": "the disk is full"}}]},
    {"content": "x" * 500},
)


async def test_contents_are_not_recorded_unless_enabled(collector: SpanCollector) -> None:
    runtime = AgentRuntime(
        AgentSpec(name="a"),
        scripted(*FAILING_TOOL_REPLIES),
        [load_function_tool("tests.testkit:fail_loudly")],
    )
    spans = await run_traced(collector, runtime, "please write a long reply")
    assert len(spans) == 5  # workflow, agent, two chats, one tool
    for span in spans:
        assert not any(
            key.startswith(
                ("gen_ai.input", "gen_ai.output", "gen_ai.tool.call.arg", "gen_ai.tool.call.res")
            )
            for key in span["attributes"]
        ), span["name"]
        assert "please write" not in str(span)


async def test_enabled_contents_are_recorded_and_cut_to_the_configured_size(
    collector: SpanCollector,
) -> None:
    runtime = AgentRuntime(
        AgentSpec(name="a"),
        scripted(*FAILING_TOOL_REPLIES),
        [load_function_tool("tests.testkit:fail_loudly")],
        trace_options=TraceOptions(capture_content=True, max_content_chars=100),
    )
    spans = await run_traced(collector, runtime, "please write a long reply")
    chats = [s for s in spans if s["name"] == "chat scripted"]
    assert "please write a long reply" in chats[0]["attributes"]["gen_ai.input.messages"]
    [first] = json.loads(chats[0]["attributes"]["gen_ai.output.messages"])
    assert first["parts"][0]["name"] == "fail_loudly" and first["finish_reason"] == "tool_call"
    # Each text is cut, and what the span holds stays JSON.
    [final] = json.loads(chats[1]["attributes"]["gen_ai.output.messages"])
    text = final["parts"][0]["content"]
    assert text == "x" * 100 + "… [400 more chars]"
    tool = by_name(spans)["execute_tool fail_loudly"]["attributes"]
    assert tool["gen_ai.tool.call.arguments"] == '{"reason": "the disk is full"}'
    assert tool["gen_ai.tool.call.result"] == "error: ValueError: cannot comply: the disk is full"
    agent = by_name(spans)["invoke_agent a"]["attributes"]
    [asked] = json.loads(agent["gen_ai.input.messages"])
    assert asked["parts"] == [{"type": "text", "content": "please write a long reply"}]


async def test_a_failed_tool_is_an_error_span_that_says_why(collector: SpanCollector) -> None:
    runtime = AgentRuntime(
        AgentSpec(name="a"),
        scripted(*FAILING_TOOL_REPLIES),
        [load_function_tool("tests.testkit:fail_loudly")],
    )
    tool = by_name(await run_traced(collector, runtime, "go"))["execute_tool fail_loudly"]
    assert tool["status"] == "ERROR"
    assert tool["status_message"] == "error: ValueError: cannot comply: the disk is full"
    assert tool["attributes"]["error.type"] == "tool_error"


async def test_secrets_never_reach_spans_results_or_events(collector: SpanCollector) -> None:
    events: list[dict[str, Any]] = []

    class Sink:
        def emit(self, run_id: str, event: dict[str, Any]) -> None:
            events.append(event)

        def keep_spans(self, run_id: str, spans: list[dict[str, Any]]) -> None:
            pass

        def flush(self, run_id: str) -> None:
            pass

    runtime = AgentRuntime(
        AgentSpec(name="a"),
        scripted(
            {"tool_calls": [{"name": "fail_loudly", "arguments": {"reason": f"key {CANARY}"}}]},
            {"content": f"the key is {CANARY}, and another is sk-proj-AAAABBBBCCCCDDDD1234"},
        ),
        [load_function_tool("tests.testkit:fail_loudly")],
        events=Sink(),
        trace_options=TraceOptions(capture_content=True),
        redactor=collector.redactor,
    )
    with workflow_span("run-s", "a", "test") as root:
        context = RunContext(run_id="run-s", chain=("a",), deadline=time.time() + 30)
        result = await runtime.invoke(Delegation(task=f"use {CANARY}", context=context))
    spans = collector.drain(root.get_span_context().trace_id)
    text = str(spans) + str(events) + result.model_dump_json()
    assert CANARY not in text and "sk-proj-AAAA" not in text
    assert result.output == f"the key is {REDACTED}, and another is {REDACTED}"
    assert REDACTED in str(spans)


async def test_a_run_with_tracing_off_records_no_span(collector: SpanCollector) -> None:
    runtime = AgentRuntime(AgentSpec(name="a"), scripted({"content": "done"}))
    assert await run_traced(collector, runtime, "go", record=False) == []


def test_the_redactor_replaces_known_values_and_key_shapes() -> None:
    redactor = Redactor(["hunter2-long-password", "short"])
    text = redactor.text(
        "pw hunter2-long-password, short stays, Bearer abcdefghijklmnop1234, "
        "sk-ant-api03-xyzxyzxyzxyzxyz"
    )
    assert text == f"pw {REDACTED}, short stays, {REDACTED}, {REDACTED}"
    config = {
        "model": {"params": {"api_key": "x1", "max_tokens": 5}},
        "limits": {"token_budget": 9},
    }
    assert redactor.mapping(config) == {
        "model": {"params": {"api_key": REDACTED, "max_tokens": 5}},
        "limits": {"token_budget": 9},
    }


def test_log_records_are_redacted_in_every_logger(
    collector: SpanCollector, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        logging.getLogger("LiteLLM").info("calling with %s", CANARY)
        try:
            raise RuntimeError(f"rejected {CANARY}")
        except RuntimeError:
            logging.getLogger("somewhere.else").exception("failed")
    assert CANARY not in caplog.text
    assert caplog.records[0].getMessage() == f"calling with {REDACTED}"


def test_secrets_in_urls_are_redacted_and_the_names_kept() -> None:
    redactor = Redactor()
    assert (
        redactor.text("http://h/v1?key=AIzaSecret1&alt=json")
        == f"http://h/v1?key={REDACTED}&alt=json"
    )
    assert redactor.text("https://x/a?X-Amz-Signature=abc123#f") == (
        f"https://x/a?X-Amz-Signature={REDACTED}#f"
    )
    assert redactor.text("postgresql://baton:pa55w0rd@db/runs") == (
        f"postgresql://baton:{REDACTED}@db/runs"
    )
    assert (
        redactor.text("http://h/runs?limit=5&status=failed")
        == "http://h/runs?limit=5&status=failed"
    )


def test_an_access_log_line_with_a_key_in_its_query_is_redacted_not_lost(
    collector: SpanCollector,
) -> None:
    from uvicorn.logging import AccessFormatter

    # uvicorn's access formatter unpacks the record's arguments as a tuple of fields.
    record = logging.getLogger("uvicorn.access").makeRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", f"/v1/runs?key={CANARY}", "1.1", 401), None,
    )  # fmt: skip
    line = AccessFormatter("%(request_line)s %(status_code)s", use_colors=False).format(record)
    assert line == f"GET /v1/runs?key={REDACTED} HTTP/1.1 401 Unauthorized"
