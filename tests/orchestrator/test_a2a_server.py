"""Baton as an A2A agent, driven by the a2a-sdk's own client over HTTP on 127.0.0.1: the card,
a message sent blocking and streamed, a task got, listed and cancelled; a task is a run."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from google.protobuf.struct_pb2 import Struct

from tests.service import KEYS, STORY, ServiceProcess

pytestmark = [pytest.mark.ray, pytest.mark.anyio]


def config(**options: bool) -> ClientConfig:
    # httpx's default 5 s read timeout would cut a quiet stream (a tool call of a few seconds).
    return ClientConfig(httpx_client=httpx.AsyncClient(timeout=60), **options)


def message(text: str, **metadata: Any) -> SendMessageRequest:
    meta = Struct()
    meta.update(metadata)
    return SendMessageRequest(
        message=Message(
            message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)], metadata=meta
        )
    )


async def test_the_agent_card_describes_the_system_and_where_to_send_messages(api: str) -> None:
    async with httpx.AsyncClient(base_url=api) as http:
        card = (await http.get("/.well-known/agent-card.json")).json()
    assert card["name"] == "svc"
    assert card["supportedInterfaces"] == [
        {"url": f"{api}/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    assert card["capabilities"]["streaming"] is True
    skills = {s["id"]: s for s in card["skills"]}
    assert skills["analyst"]["tags"] == ["calculate", "arithmetic"]
    assert skills["analyst"]["description"] == "Does arithmetic."


async def test_a_message_sent_blocking_is_a_run_whose_task_has_the_answer(api: str) -> None:
    client = await create_client(api, config(streaming=False))
    async with client:
        [answer] = [r async for r in client.send_message(message("calculate 6 * 7"))]
        task = answer.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        [artifact] = task.artifacts
        assert "calculate: 42" in artifact.parts[0].text
        # The task is the run: same id, in the run store, with the same answer.
        async with httpx.AsyncClient(base_url=api) as http:
            run = (await http.get(f"/v1/runs/{task.id}")).json()
        assert run["status"] == "succeeded" and run["output"] == artifact.parts[0].text
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == TaskState.TASK_STATE_COMPLETED
        assert got.history[0].parts[0].text == "calculate 6 * 7"
        listed = await client.list_tasks(ListTasksRequest(page_size=100))
        assert task.id in {t.id for t in listed.tasks} and listed.total_size >= 1


async def test_a_streamed_message_sends_status_updates_and_the_answer_as_it_is_written(
    api: str,
) -> None:
    client = await create_client(api, config(streaming=True))
    async with client:
        updates = [
            r async for r in client.send_message(message("tell it", **{"baton.agent": "narrator"}))
        ]
    assert updates[0].HasField("task")
    kinds = [r.WhichOneof("payload") for r in updates]
    assert "status_update" in kinds
    working = [
        u.status_update.status.message.parts[0].text
        for u in updates
        if u.HasField("status_update") and u.status_update.status.message.parts
    ]
    assert "narrator started" in working
    pieces = [u.artifact_update for u in updates if u.HasField("artifact_update")]
    streamed = "".join(p.artifact.parts[0].text for p in pieces if p.append)
    assert streamed == STORY and len([p for p in pieces if p.append]) >= 10
    assert pieces[-1].last_chunk and pieces[-1].artifact.parts[0].text == STORY
    final = updates[-1].status_update.status
    assert final.state == TaskState.TASK_STATE_COMPLETED


async def test_a_subscriber_follows_a_task_that_is_cancelled_to_its_end(api: str) -> None:
    client = await create_client(api, config(streaming=True))
    async with client:
        # The dozer takes a minute: the task is still working when the cancellation comes.
        request = message("wait", **{"baton.agent": "dozer"})
        request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
        started = client.send_message(request)
        first = await anext(aiter(started))
        task_id = first.task.id
        await started.aclose()  # this stream is left; a subscription follows the task instead
        subscription = client.subscribe(SubscribeToTaskRequest(id=task_id))
        now = await anext(aiter(subscription))
        assert now.task.id == task_id and now.task.status.state in (
            TaskState.TASK_STATE_SUBMITTED,
            TaskState.TASK_STATE_WORKING,
        )
        cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
        rest = [r async for r in subscription]
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert rest[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
    async with httpx.AsyncClient(base_url=api) as http:
        assert (await http.get(f"/v1/runs/{task_id}")).json()["status"] == "cancelled"


async def test_behind_api_keys_the_card_says_so_and_messages_need_a_key(
    guarded: ServiceProcess,
) -> None:
    async with httpx.AsyncClient(base_url=guarded.url) as http:
        card = (await http.get("/.well-known/agent-card.json")).json()  # public
        refused = await http.post("/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"})
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "unauthorized"
    key = httpx.AsyncClient(headers={"Authorization": f"Bearer {KEYS[2]}"})
    client = await create_client(guarded.url, ClientConfig(streaming=False, httpx_client=key))
    async with client:
        [answer] = [r async for r in client.send_message(message("calculate 2 + 3"))]
    assert answer.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert "calculate: 5" in answer.task.artifacts[0].parts[0].text
