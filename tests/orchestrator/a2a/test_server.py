"""Baton as an A2A agent, driven by the a2a-sdk's own client over HTTP on 127.0.0.1: the card,
a message sent blocking and streamed, a task got, listed and cancelled; a task is a run."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import queue
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.server.tasks.task_manager import append_artifact_to_task
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
        {"url": f"{api}/a2a", "protocolBinding": "JSONRPC", "protocolVersion": version}
        for version in ("1.0", "0.3")
    ]
    assert card["capabilities"]["streaming"] is card["capabilities"]["pushNotifications"] is True
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
    # The artifact's first piece makes it (append false), the next ones grow it, the last
    # (lastChunk) is the whole answer in its place: the SDK's own rule builds the same text.
    *growing, last = pieces
    assert [p.append for p in growing] == [False] + [True] * (len(growing) - 1)
    assert len(growing) >= 10 and "".join(p.artifact.parts[0].text for p in growing) == STORY
    assert last.last_chunk and not last.append and last.artifact.parts[0].text == STORY
    task = updates[0].task
    for piece in pieces:
        append_artifact_to_task(task, piece)  # raises on an append to a missing artifact
    assert [a.parts[0].text for a in task.artifacts] == [STORY]
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


async def rpc(api: str, method: str, params: dict[str, Any], version: str | None = "1.0") -> Any:
    """One JSON-RPC call as any client sends it (`version`: its A2A-Version header)."""
    headers = {"A2A-Version": version} if version else {}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with httpx.AsyncClient(base_url=api, timeout=60) as http:
        return (await http.post("/a2a", json=body, headers=headers)).json()


def sent(text: str, context_id: str = "", message_id: str = "") -> dict[str, Any]:
    """SendMessage's params for a message that returns at once."""
    asked = {"messageId": message_id or uuid.uuid4().hex, "role": "ROLE_USER"}
    asked |= {"parts": [{"text": text}], "contextId": context_id}
    return {"message": asked, "configuration": {"returnImmediately": True}}


async def test_list_tasks_filters_by_context_and_time_and_refuses_bad_parameters(
    api: str,
) -> None:
    mine, other = uuid.uuid4().hex, uuid.uuid4().hex
    for context, n in ((mine, 3), (other, 2)):
        for i in range(n):
            answer = await rpc(api, "SendMessage", sent(f"calculate {i} + 1", context))
            assert answer["result"]["task"]["contextId"] == context
    listed = (await rpc(api, "ListTasks", {"contextId": mine}))["result"]
    assert len(listed["tasks"]) == listed["totalSize"] == listed["pageSize"] == 3
    assert {t["contextId"] for t in listed["tasks"]} == {mine}
    assert all("artifacts" not in t for t in listed["tasks"])  # unless includeArtifacts
    paged = (await rpc(api, "ListTasks", {"contextId": mine, "pageSize": 2}))["result"]
    assert len(paged["tasks"]) == 2 and paged["totalSize"] == 3 and paged["nextPageToken"]
    rest = await rpc(api, "ListTasks", {"contextId": mine, "pageToken": paged["nextPageToken"]})
    assert len(rest["result"]["tasks"]) == 1 and rest["result"]["nextPageToken"] == ""
    later = await rpc(api, "ListTasks", {"statusTimestampAfter": "2030-01-01T00:00:00Z"})
    assert later["result"]["tasks"] == [] and later["result"]["totalSize"] == 0
    for bad in (
        {"pageSize": -1},
        {"pageSize": 0},
        {"pageSize": 101},
        {"pageToken": "not-a-token"},
        {"historyLength": -1},
        {"status": "TASK_STATE_NOT_A_STATE"},
    ):
        error = (await rpc(api, "ListTasks", bad))["error"]
        assert error["code"] == -32602, (bad, error)


async def test_a_message_needs_its_id_and_an_id_names_one_message(api: str) -> None:
    nameless = sent("calculate 1 + 1")
    del nameless["message"]["messageId"]
    error = (await rpc(api, "SendMessage", nameless))["error"]
    assert error["code"] == -32602 and "messageId" in error["message"]
    nul = (await rpc(api, "SendMessage", sent("calculate 1 +\x00 1")))["error"]
    assert nul["code"] == -32602 and "U+0000 (NUL) at character 14" in nul["message"]
    again = uuid.uuid4().hex
    first = await rpc(api, "SendMessage", sent("calculate 1 + 2", message_id=again))
    resent = await rpc(api, "SendMessage", sent("calculate 1 + 2", message_id=again))
    assert resent["result"]["task"]["id"] == first["result"]["task"]["id"]  # one task
    reused = (await rpc(api, "SendMessage", sent("calculate 9 + 9", message_id=again)))["error"]
    assert reused["code"] == -32602 and "new messageId" in reused["message"]


async def test_a_finished_task_reads_the_same_every_time_and_takes_no_more_messages(
    api: str,
) -> None:
    client = await create_client(api, config(streaming=False))
    async with client:
        request = message("calculate 6 * 7")
        request.configuration.CopyFrom(SendMessageConfiguration(history_length=0))
        [answer] = [r async for r in client.send_message(request)]
        assert answer.task.status.state == TaskState.TASK_STATE_COMPLETED
        assert not answer.task.history  # historyLength 0: none
        first = await client.get_task(GetTaskRequest(id=answer.task.id))
        second = await client.get_task(GetTaskRequest(id=answer.task.id))
    # Times and ids are stored, not made per read; the history keeps the client's own id.
    assert first.status.timestamp == second.status.timestamp == answer.task.status.timestamp
    assert first.status.message.message_id == second.status.message.message_id
    assert first.history[0].message_id == request.message.message_id
    subscribed = await rpc(api, "SubscribeToTask", {"id": answer.task.id})
    assert subscribed["error"]["code"] == -32004  # UnsupportedOperation: it has ended
    follow_up = sent("and now?")
    follow_up["message"]["taskId"] = answer.task.id
    refused = (await rpc(api, "SendMessage", follow_up))["error"]
    assert refused["code"] == -32004 and "has ended" in refused["message"]


async def test_a_client_of_a2a_0_3_is_served_on_the_same_endpoint(api: str) -> None:
    async with httpx.AsyncClient(base_url=api) as http:
        card = (await http.get("/.well-known/agent-card.json")).json()
    # The card speaks both: 1.0's interfaces, and 0.3's url and protocolVersion.
    assert card["protocolVersion"] == "0.3" and card["url"] == f"{api}/a2a"
    asked = {"messageId": uuid.uuid4().hex, "role": "user", "kind": "message"}
    asked |= {"parts": [{"kind": "text", "text": "calculate 20 + 22"}]}
    answer = await rpc(api, "message/send", {"message": asked}, version=None)
    task = answer["result"]
    assert task["kind"] == "task" and task["status"]["state"] == "completed", answer
    assert "calculate: 42" in task["artifacts"][0]["parts"][0]["text"]
    got = await rpc(api, "tasks/get", {"id": task["id"]}, version=None)
    assert got["result"]["status"]["state"] == "completed"
    # And at the service's root, where clients of the SDK's default path post.
    async with httpx.AsyncClient(base_url=api) as http:
        body = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}}
        root = (await http.post("/", json=body, headers={"A2A-Version": "1.0"})).json()
    assert root["result"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_blocking_send_of_a_long_task_answers_in_time_and_the_client_follows_it(
    api: str,
) -> None:
    # `api` answers a blocking send after at most BATON_A2A_BLOCKING_WAIT_S (6 s): the dozer
    # takes a minute, so the client gets the task working, and follows it from there.
    client = await create_client(api, config(streaming=False))
    async with client:
        [answer] = [
            r async for r in client.send_message(message("wait", **{"baton.agent": "dozer"}))
        ]
        assert answer.task.status.state == TaskState.TASK_STATE_WORKING
        cancelled = await client.cancel_task(CancelTaskRequest(id=answer.task.id))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED


FINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"}


@contextlib.contextmanager
def webhook() -> Iterator[tuple[str, queue.Queue[tuple[dict[str, str], dict[str, Any]]]]]:
    """An HTTP receiver on 127.0.0.1: its URL, and the (headers, body) of each POST to it."""
    received: queue.Queue[tuple[dict[str, str], dict[str, Any]]] = queue.Queue()

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            received.put(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    finally:
        server.shutdown()


async def pushed_until_final(
    received: queue.Queue[tuple[dict[str, str], dict[str, Any]]],
) -> list[tuple[dict[str, str], dict[str, Any]]]:
    """The posts to a webhook up to (and with) the one that says the task has ended."""
    posts = []
    while True:
        headers, body = await asyncio.to_thread(received.get, timeout=60)
        posts.append((headers, body))
        if body["statusUpdate"]["status"]["state"] in FINAL:
            return posts


async def test_push_notifications_reach_the_clients_webhook_with_its_token(api: str) -> None:
    with webhook() as (url, received):
        asked = sent("calculate 6 * 7")
        asked["configuration"]["taskPushNotificationConfig"] = {"url": url, "token": "tok-1"}
        task = (await rpc(api, "SendMessage", asked))["result"]["task"]
        posts = await pushed_until_final(received)
    assert {h["x-a2a-notification-token"] for h, _ in posts} == {"tok-1"}
    assert {b["statusUpdate"]["taskId"] for _, b in posts} == {task["id"]}
    states = [b["statusUpdate"]["status"]["state"] for _, b in posts]
    assert "TASK_STATE_WORKING" in states and states[-1] == "TASK_STATE_COMPLETED"
    final = posts[-1][1]["statusUpdate"]["status"]["message"]["parts"][0]["text"]
    assert "calculate: 42" in final


async def test_push_configs_are_kept_listed_and_removed_and_hear_a_cancellation(
    api: str,
) -> None:
    with webhook() as (url, received):
        asked = sent("wait")
        asked["message"]["metadata"] = {"baton.agent": "dozer"}  # a minute: it is cancelled
        task = (await rpc(api, "SendMessage", asked))["result"]["task"]
        config = {"taskId": task["id"], "id": "mine", "url": url, "token": "tok-2"}
        made = (await rpc(api, "CreateTaskPushNotificationConfig", config))["result"]
        assert made["id"] == "mine" and made["url"] == url
        listed = await rpc(api, "ListTaskPushNotificationConfigs", {"taskId": task["id"]})
        assert [c["id"] for c in listed["result"]["configs"]] == ["mine"]
        got = await rpc(api, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "mine"})
        assert got["result"]["token"] == "tok-2"
        await rpc(api, "CancelTask", {"id": task["id"]})
        posts = await pushed_until_final(received)
        assert posts[-1][1]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"
        gone = {"taskId": task["id"], "id": "mine"}
        assert "result" in await rpc(api, "DeleteTaskPushNotificationConfig", gone)
        listed = await rpc(api, "ListTaskPushNotificationConfigs", {"taskId": task["id"]})
        assert listed["result"].get("configs", []) == []


async def test_a_webhook_on_a_private_address_is_refused_unless_allowed(
    guarded: ServiceProcess,
) -> None:
    asked = sent("calculate 1 + 1")
    asked["configuration"]["taskPushNotificationConfig"] = {"url": "http://127.0.0.1:9/hook"}
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {KEYS[2]}"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": asked}
    async with httpx.AsyncClient(base_url=guarded.url) as http_client:
        answer = (await http_client.post("/a2a", json=body, headers=headers)).json()
    assert answer["error"]["code"] == -32602 and "https" in answer["error"]["message"]


async def test_a_body_that_is_not_utf8_json_is_a_parse_error(api: str) -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    for body, why in (
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask\xff"}', "not UTF-8"),
        (json.dumps(request).encode("utf-16"), "not UTF-8"),
        (b"{not json", "not JSON"),
    ):
        async with httpx.AsyncClient(base_url=api) as http_client:
            answer = await http_client.post("/a2a", content=body, headers={"A2A-Version": "1.0"})
        error = answer.json()["error"]
        assert error["code"] == -32700 and why in error["message"], (body[:40], error)


async def test_a_keyed_callers_malformed_requests_are_one_line_each_in_the_log(
    guarded: ServiceProcess,
) -> None:
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {KEYS[2]}"}
    mark = uuid.uuid4().hex
    start = len(guarded.log.read_bytes())  # (the log is the service's whole life's)
    malformed = [
        {"jsonrpc": "2.0", "id": mark, "method": "SendMessage", "params": {"message": 5}},
        {"jsonrpc": "2.0", "id": mark, "method": "GetTask", "params": {"id": 5}},
        [],
    ]
    async with httpx.AsyncClient(base_url=guarded.url, headers=headers) as http:
        for body in malformed:
            error = (await http.post("/a2a", json=body)).json()["error"]
            assert error["code"] in (-32600, -32602), error
    said = guarded.log.read_bytes()[start:].decode()
    assert "Traceback" not in said, said  # a client's mistake is no error of the service's
    assert said.count(f"Request Error (ID: {mark})") == 2 and "Request Error (ID: None)" in said
