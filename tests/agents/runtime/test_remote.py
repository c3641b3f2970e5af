"""A remote agent against an agent Baton did not write: the a2a-sdk's own server, no Ray."""

from __future__ import annotations

import time

import pytest

from agents.core.messages import Delegation, RunContext, RunStatus
from agents.core.spec import AgentSpec, RemoteSpec
from agents.models.base import ModelClient
from agents.runtime.agent import AgentRuntime
from tests.a2a_agent import serving
from tests.recording import RecordingClient

pytestmark = pytest.mark.anyio


def _runtime(url: str) -> AgentRuntime:
    spec = AgentSpec(name="remote", a2a=RemoteSpec(url=url))
    model: ModelClient = RecordingClient(spec.model)  # never called: its work is one exchange
    return AgentRuntime(spec=spec, model=model)


def _delegation(task: str) -> Delegation:
    ctx = RunContext(run_id="r", deadline=time.time() + 30)
    return Delegation(task=task, context=ctx.enter("remote"))


async def test_an_answer_given_as_the_final_status_message_is_the_answer() -> None:
    # a2a-sdk's `TaskUpdater.complete(message)`: no artifact, the answer in the last status.
    with serving("message") as url:
        result = await _runtime(url).invoke(_delegation("the price of tea"))
    assert result.status == RunStatus.SUCCEEDED, result.error
    assert result.output == "answer to: the price of tea"


async def test_an_answer_given_as_an_artifact_is_the_answer() -> None:
    with serving("artifact") as url:
        result = await _runtime(url).invoke(_delegation("the price of tea"))
    assert result.status == RunStatus.SUCCEEDED, result.error
    assert result.output == "answer to: the price of tea"
