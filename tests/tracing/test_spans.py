"""The tracing seam: the runtime's spans nest correctly across a delegation boundary, with the
parent carried only by the W3C context inside the `Delegation` (as it is between Ray actors)."""

from __future__ import annotations

import os
import time

import pytest
from opentelemetry import trace

from agents.core.limits import Limits
from agents.core.messages import AgentResult, Delegation, RunContext
from agents.core.spec import AgentSpec, ModelSpec
from agents.models.client import LiteLLMClient
from agents.runtime.agent import AgentRuntime
from agents.tools.delegate import DelegateTool
from tracing import (
    SpanCollector,
    configure_tracing,
    extract_context,
    inject_context,
    workflow_span,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def collector() -> SpanCollector:
    return configure_tracing("test")  # once per process; later calls return the same one


class ContextOnlyDispatcher:
    """Drops the caller's in-process context, so only the carrier can link the spans."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self.runtime = runtime

    async def dispatch(self, target: str, delegation: Delegation) -> AgentResult:
        from opentelemetry import context

        token = context.attach(context.Context())
        try:
            return await self.runtime.invoke(delegation)
        finally:
            context.detach(token)


async def test_delegation_spans_nest_under_the_calling_tool_span(
    collector: SpanCollector,
) -> None:
    helper = AgentSpec(name="helper", description="helps with chores")
    helper_rt = AgentRuntime(helper, LiteLLMClient(ModelSpec()))
    boss = AgentRuntime(
        AgentSpec(name="boss"),
        LiteLLMClient(ModelSpec()),
        [DelegateTool("boss", helper.card(), True, ContextOnlyDispatcher(helper_rt))],
    )
    with workflow_span("run-9", "boss", "test") as root:
        ctx = RunContext(run_id="run-9", deadline=time.time() + 30, limits=Limits())
        await boss.invoke(
            Delegation(task="do the chores", context=ctx.enter("boss", inject_context()))
        )
    finished = collector.drain(root.get_span_context().trace_id)
    spans = {s["name"]: s for s in finished}
    assert set(spans) == {
        "invoke_workflow baton",
        "invoke_agent boss",
        "chat offline",
        "execute_tool delegate_to_helper",
        "invoke_agent helper",
    }
    assert len({s["trace_id"] for s in finished}) == 1
    parent = {name: s["parent_span_id"] for name, s in spans.items()}
    span_id = {name: s["span_id"] for name, s in spans.items()}
    assert parent["invoke_agent boss"] == span_id["invoke_workflow baton"]
    assert parent["execute_tool delegate_to_helper"] == span_id["invoke_agent boss"]
    assert parent["invoke_agent helper"] == span_id["execute_tool delegate_to_helper"]
    helper_span = spans["invoke_agent helper"]
    assert helper_span["attributes"]["gen_ai.agent.name"] == "helper"
    assert helper_span["attributes"]["baton.delegation.chain"] == ["boss", "helper"]
    assert helper_span["attributes"]["baton.delegation.depth"] == 2
    assert helper_span["resource"]["baton.process.role"] == collector.role
    assert helper_span["resource"]["process.pid"] == os.getpid()
    assert collector.drain(root.get_span_context().trace_id) == []  # drained once


def test_a_malformed_carrier_means_no_parent_not_an_error() -> None:
    assert extract_context(None) is None
    extracted = extract_context({"traceparent": "garbage"})
    assert trace.get_current_span(extracted).get_span_context().is_valid is False
