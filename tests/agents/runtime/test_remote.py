"""A remote agent against an agent Baton did not write: the a2a-sdk's own server, no Ray."""

from __future__ import annotations

import time

import pytest

from agents.core.messages import Delegation, RunContext, RunStatus
from agents.core.spec import AgentSpec, RemoteSpec
from agents.models.base import ModelClient
from agents.runtime.agent import AgentRuntime
from tests.a2a_agent import serving
from tests.ports import free_port
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


async def test_a_failed_remote_task_says_its_state_and_why() -> None:
    with serving("fail") as url:
        result = await _runtime(url).invoke(_delegation("a pot of tea"))
    assert result.status == RunStatus.FAILED
    assert result.error == f"the remote task at {url} ended failed: out of stock"


async def test_an_agent_nobody_listens_for_says_the_connection_was_refused() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = await _runtime(url).invoke(_delegation("a pot of tea"))
    assert result.status == RunStatus.FAILED
    assert result.error == f"could not connect to {url}: connection refused"


async def test_every_artifact_of_the_answer_is_kept_in_order() -> None:
    with serving("artifacts") as url:
        result = await _runtime(url).invoke(_delegation("the price of tea"))
    assert result.status == RunStatus.SUCCEEDED, result.error
    assert result.output == "summary of: the price of tea\n\ndetails of: the price of tea"


async def test_a_question_no_one_here_may_answer_cancels_the_remote_task() -> None:
    # (No `ask_user`: the question is not passed on; the task would wait there for nobody.)
    with serving("asks") as url:
        result = await _runtime(url).invoke(_delegation("pay the rent"))
    assert result.status == RunStatus.FAILED
    assert result.error == (
        f"the remote task at {url} asked 'which account?', and no one here may answer it (the "
        "agent's ask_user passes questions on): it was cancelled"
    )
