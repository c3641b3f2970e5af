"""A model call's span says who answered as the GenAI conventions name it, as a viewer gets it.

litellm over real HTTP to an OpenAI-compatible server on 127.0.0.1; the span exported over
OTLP/HTTP to a real receiver.
"""

from __future__ import annotations

import time

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from agents.core.messages import Delegation, RunContext, RunStatus
from agents.core.spec import AgentSpec, ModelSpec
from agents.models.client import LiteLLMClient
from agents.runtime.agent import AgentRuntime
from agents.tools.base import load_function_tool
from tests.openai_server import FakeOpenAI
from tests.testkit import OtlpReceiver
from tracing import OtlpExport, configure_tracing, workflow_span

pytestmark = pytest.mark.anyio


async def test_a_chat_span_names_the_model_its_provider_and_its_server() -> None:
    fake = FakeOpenAI("stamp", {"text": "now"})
    receiver = OtlpReceiver()
    export = OtlpExport(OTLPSpanExporter(endpoint=f"{receiver.endpoint}/v1/traces"))
    try:
        model = ModelSpec(
            name="openai/gpt-4o-mini", params={"api_base": fake.base_url, "api_key": "sk-test"}
        )
        runtime = AgentRuntime(
            AgentSpec(name="a"), LiteLLMClient(model), [load_function_tool("tests.testkit:stamp")]
        )
        collector = configure_tracing("test")
        ctx = RunContext(run_id="r", chain=("a",), deadline=time.time() + 30)
        with workflow_span("r", "a", "test") as root:
            result = await runtime.invoke(Delegation(task="stamp it", context=ctx))
        assert result.status == RunStatus.SUCCEEDED, result.error
        await export.export(collector.drain(root.get_span_context().trace_id))
        assert export.flush()
    finally:
        export.shutdown()
        fake.close()
        receiver.close()
    chats = [s for s in receiver.spans if s["attributes"].get("gen_ai.operation.name") == "chat"]
    assert len(chats) == 2
    port = int(fake.base_url.rsplit(":", 1)[1].split("/")[0])
    for chat in chats:
        attributes = chat["attributes"]
        assert attributes["gen_ai.request.model"] == "gpt-4o-mini"  # no provider prefix
        assert attributes["gen_ai.provider.name"] == "openai"
        assert attributes["gen_ai.response.model"] == "gpt-4o-mini"  # as the server answered
        assert attributes["server.address"] == "127.0.0.1"
        assert int(attributes["server.port"]) == port
