"""A cancellation that comes in the very turn of the event loop in which a step ends (a run
cancelled just as its model answered, or as its tool returned) still stops the invocation."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agents.core.limits import Limits
from agents.core.messages import Delegation, RunContext
from agents.core.spec import AgentSpec, ModelSpec
from agents.models.base import ModelReply
from agents.runtime.loop import AgentRuntime
from agents.tools.base import load_function_tool
from tests import testkit
from tests.recording import RecordingClient

pytestmark = pytest.mark.anyio


@dataclass
class CancelledOnReply(RecordingClient):
    """The built-in model through litellm; its reply comes with a cancellation of `victim`."""

    victim: asyncio.Future[Any] | None = None

    async def complete(self, *args: Any, **kwargs: Any) -> ModelReply:
        reply = await super().complete(*args, **kwargs)
        assert self.victim is not None
        self.victim.cancel()  # in this turn, as the reply is handed back
        return reply


def _replies(marker: Path, first_tool: str | None = None) -> dict[str, Any]:
    touch = {"name": "slow_touch", "arguments": {"path": str(marker), "seconds": 0.2}}
    first = [{"tool_calls": [{"name": first_tool, "arguments": {}}]}] if first_tool else []
    return {"replies": [*first, {"tool_calls": [touch]}, {"content": "all done"}]}


def _delegation() -> Delegation:
    limits = Limits()
    return Delegation(
        task="work",
        context=RunContext(
            run_id="run-1", chain=("a",), deadline=time.time() + limits.deadline_s, limits=limits
        ),
    )


@pytest.fixture
def victims() -> Iterator[list[asyncio.Future[object]]]:
    yield testkit.victims
    testkit.victims.clear()


async def test_a_run_cancelled_as_its_model_answers_stops_there(tmp_path: Path) -> None:
    marker = tmp_path / "touched"
    client = CancelledOnReply(ModelSpec(name="baton/scripted", params=_replies(marker)))
    touch = load_function_tool("tests.testkit:slow_touch")
    job = asyncio.ensure_future(
        AgentRuntime(AgentSpec(name="a"), client, [touch]).invoke(_delegation())
    )
    client.victim = job
    with pytest.raises(asyncio.CancelledError):
        await job
    assert not marker.exists()  # the tool the reply asked for never finished
    assert len(client.seen) == 1


# Cancelled within litellm's `acompletion`, between its set-up and the request, as any call can
# be: litellm drops the request's coroutine unawaited, and Python says so as it is collected.
@pytest.mark.filterwarnings("ignore:coroutine 'BuiltinModels.acompletion' was never awaited")
async def test_a_run_cancelled_as_its_tool_returns_stops_there(
    tmp_path: Path, victims: list[asyncio.Future[object]]
) -> None:
    marker = tmp_path / "touched"
    client = RecordingClient(
        ModelSpec(name="baton/scripted", params=_replies(marker, "answer_as_cancelled"))
    )
    tools = [
        load_function_tool(f"tests.testkit:{n}") for n in ("answer_as_cancelled", "slow_touch")
    ]
    job = asyncio.ensure_future(
        AgentRuntime(AgentSpec(name="a"), client, tools).invoke(_delegation())
    )
    victims.append(job)
    with pytest.raises(asyncio.CancelledError):
        await job
    # It stopped at its next step (the model's call, which never answered): no tool after it.
    assert not marker.with_suffix(".started").exists()
