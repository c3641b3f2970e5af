"""Agents that ask: an agent's question (`ask_user`) stops its run at `input_required` until the
person answers, over HTTP or as the next A2A message on the task (the a2a-sdk's own client)."""

from __future__ import annotations

import asyncio
import re
import uuid

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState
from google.protobuf.struct_pb2 import Struct
from playwright.sync_api import Page, expect

from tests.service import all_events, follow, submit

pytestmark = [pytest.mark.ray, pytest.mark.anyio]

ASK = "ask the user which account to pay the rent from"


async def until_asked(url: str, run_id: str) -> dict[str, object]:
    async with asyncio.timeout(60):
        async for _, kind, data in follow(url, run_id):
            if kind == "input_requested":
                return data
    raise AssertionError("no question was asked")


async def test_a_question_waits_for_the_answer_given_over_http(api: str) -> None:
    run_id = (await submit(api, {"task": ASK, "agent": "teller"})).json()["id"]
    asked = await until_asked(api, run_id)
    assert asked["agent"] == "teller" and asked["question"] == ASK
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        # While it waits, the run says so and lists the question.
        async with asyncio.timeout(30):
            status = ""
            while status != "input_required":  # the store follows the ledger a moment later
                status = (await client.get(f"/v1/runs/{run_id}")).json()["status"]
                await asyncio.sleep(0.05)
        [waiting] = (await client.get(f"/v1/runs/{run_id}/input")).json()
        assert waiting["question_id"] == asked["call_id"] and waiting["question"] == ASK
        unknown = await client.post(
            f"/v1/runs/{run_id}/input", json={"answer": "x", "question_id": "q-nosuch"}
        )
        assert unknown.status_code == 404, unknown.text
        assert unknown.json()["error"]["code"] == "question_not_found"
        answered = await client.post(f"/v1/runs/{run_id}/input", json={"answer": "savings"})
        assert answered.status_code == 200, answered.text
        assert answered.json() == {
            "question_id": asked["call_id"], "answer": "savings", "by": "person",
            "who": "ip:127.0.0.1",  # no API keys: the caller's address
        }  # fmt: skip
        events = await all_events(api, run_id)
        run = (await client.get(f"/v1/runs/{run_id}")).json()
        # The answer is the tool's result: the model read it.
        assert run["status"] == "succeeded" and "- ask_user: savings" in run["output"], run
        again = await client.post(f"/v1/runs/{run_id}/input", json={"answer": "checking"})
        assert again.status_code == 409 and "succeeded" in again.json()["error"]["message"]
        assert (await client.get(f"/v1/runs/{run_id}/input")).json() == []
    kinds = [kind for _, kind, _ in events]
    assert kinds.count("input_requested") == kinds.count("input_provided") == 1
    provided = next(data for _, kind, data in events if kind == "input_provided")
    assert provided["answer"] == "savings" and provided["by"] == "person"


async def test_an_answer_to_a_run_that_asks_nothing_is_a_conflict(api: str) -> None:
    run_id = (await submit(api, {"task": "pay it", "agent": "teller"})).json()["id"]
    await all_events(api, run_id)
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        answered = await client.post(f"/v1/runs/{run_id}/input", json={"answer": "savings"})
        assert answered.status_code == 409, answered.text
        assert answered.json()["error"]["code"] == "not_waiting_for_input"
        missing = await client.post("/v1/runs/nosuchrun/input", json={"answer": "savings"})
        assert missing.status_code == 404
        empty = await client.post(f"/v1/runs/{run_id}/input", json={"answers": "savings"})
        assert empty.status_code == 422 and "answer" in empty.text


async def test_a_question_no_one_answers_ends_the_run_at_its_deadline_saying_so(api: str) -> None:
    body = {"task": ASK, "agent": "teller", "deadline_s": 3}
    run_id = (await submit(api, body)).json()["id"]
    events = await all_events(api, run_id)
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        run = (await client.get(f"/v1/runs/{run_id}")).json()
    assert run["status"] == "limit_exceeded", run
    assert f"while waiting for the user's answer to: {ASK}" in run["error"]
    [provided] = [data for _, kind, data in events if kind == "input_provided"]
    assert provided["by"] == "expiry"


def _message(text: str, task_id: str = "", **metadata: str) -> SendMessageRequest:
    meta = Struct()
    meta.update(metadata)
    return SendMessageRequest(
        message=Message(
            message_id=uuid.uuid4().hex,
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            task_id=task_id,
            metadata=meta,
        )
    )


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streamed"])
async def test_an_a2a_task_asks_for_input_and_the_next_message_on_it_answers(
    api: str, streaming: bool
) -> None:
    client = await create_client(
        api, ClientConfig(streaming=streaming, httpx_client=httpx.AsyncClient(timeout=60))
    )
    async with client:
        first = [r async for r in client.send_message(_message(ASK, **{"baton.agent": "teller"}))]
        # The send stops at the question: the task is input-required, the question its message.
        if streaming:
            asking = first[-1].status_update
            assert asking.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            task_id = asking.task_id
        else:
            [answer] = first
            asking = answer.task
            task_id = asking.id
        assert asking.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert asking.status.message.parts[0].text == ASK
        # An answer that names another context than the task's is refused (A2A 1.0 §3.4.3), and
        # the task still asks.
        wrong = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "taskId": task_id,
                 "contextId": "someone-elses", "parts": [{"text": "savings"}]}  # fmt: skip
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": wrong}}
        async with httpx.AsyncClient(base_url=api, timeout=30) as http:
            refused = (await http.post("/a2a", json=body, headers={"A2A-Version": "1.0"})).json()
            assert refused["error"]["code"] == -32602, refused
            assert "not 'someone-elses'" in refused["error"]["message"]
            still = (await http.get(f"/v1/runs/{task_id}/input")).json()
            assert [q["question"] for q in still] == [ASK]
        # The SDK's client sends the answer as a message on the same task.
        second = [r async for r in client.send_message(_message("savings", task_id=task_id))]
        if streaming:
            assert second[0].task.id == task_id
            assert second[0].task.status.state in (
                TaskState.TASK_STATE_WORKING,
                TaskState.TASK_STATE_COMPLETED,
            )
            final = second[-1].status_update.status
        else:
            final = second[0].task.status
        assert final.state == TaskState.TASK_STATE_COMPLETED, final
        task = await client.get_task(GetTaskRequest(id=task_id))
    assert "- ask_user: savings" in task.artifacts[0].parts[0].text
    # Its history is the conversation: the task, the question, the answer.
    assert [(m.role, m.parts[0].text) for m in task.history] == [
        (Role.ROLE_USER, ASK),
        (Role.ROLE_AGENT, ASK),
        (Role.ROLE_USER, "savings"),
    ]


@pytest.mark.browser
def test_the_run_page_asks_the_question_and_sends_the_answer(api: str, page: Page) -> None:
    run_id = httpx.post(f"{api}/v1/runs", json={"task": ASK, "agent": "teller"}).json()["id"]
    page.goto(f"{api}/runs/{run_id}")
    question = page.locator("#questions .question")
    question.wait_for(timeout=30_000)
    assert "teller" in question.inner_text() and ASK in question.inner_text()
    question.locator("input.answer-text").fill("checking")
    question.locator("button.send-answer").click()
    page.wait_for_selector("body[data-state=finished]", timeout=30_000)
    assert page.locator("#questions").is_hidden()
    # (The answer may still be growing from its streamed text as the run is marked finished.)
    expect(page.locator("#run-answer")).to_contain_text("- ask_user: checking")
    # The diagram draws the question to the client and the answer back.
    diagram = httpx.get(f"{api}/v1/runs/{run_id}/diagram").text
    assert f"teller->>Client: ? {ASK}" in _by_name(diagram)
    assert "Client-->>teller: checking" in _by_name(diagram)


def _by_name(diagram: str) -> str:
    """The diagram's arrows with each participant's name for its id (`a3` -> `teller`)."""
    names = dict(re.findall(r"participant (\w+) as (\S+)", diagram))
    return re.sub(r"\b(\w\d+)(?=-|:|$)", lambda m: names.get(m.group(1), m.group(1)), diagram)
