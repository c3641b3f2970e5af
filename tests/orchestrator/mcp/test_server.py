"""Baton as an MCP server, driven by the `mcp` package's own client: streamable HTTP at `/mcp`
on a real `baton serve`, and stdio through `baton mcp`."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar, Literal

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client import ClaimContext, ClientExtension, ResultClaim
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import ElicitResult, PromptReference
from mcp_types import CallToolResult, Request, RequestParams, Result
from opentelemetry.sdk.trace import TracerProvider
from pydantic import TypeAdapter

from tests.service import KEYS, ServiceProcess, all_events

pytestmark = [pytest.mark.ray, pytest.mark.anyio]
ROOT = Path(__file__).resolve().parents[3]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def result_json(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data: dict[str, Any] = json.loads(result.content[0].text)
    return data


async def use_team(client: Client) -> None:
    """What an MCP client does with a Baton team: every tool, and one mistake."""
    names = {t.name for t in (await client.list_tools()).tools}
    assert names == {
        "submit_task", "answer_question", "cancel_run", "get_run", "get_run_diagram",
        "list_agents",
    }  # fmt: skip
    agents = json.loads((await client.call_tool("list_agents", {})).content[0].text)
    assert "analyst" in {a["name"] for a in agents}

    run = result_json(
        await client.call_tool("submit_task", {"task": "calculate 6 * 7", "agent": "analyst"})
    )
    assert run["status"] == "succeeded" and "42" in run["output"]
    again = result_json(await client.call_tool("get_run", {"run_id": run["id"]}))
    assert again["id"] == run["id"] and again["output"] == run["output"]
    diagram = await client.call_tool("get_run_diagram", {"run_id": run["id"]})
    assert "sequenceDiagram" in diagram.content[0].text and "analyst" in diagram.content[0].text

    wrong = await client.call_tool("submit_task", {"task": "x", "agent": "nobody"})
    assert wrong.is_error and "unknown agent 'nobody'" in wrong.content[0].text
    missing = await client.call_tool("get_run", {"run_id": "f" * 32})
    assert missing.is_error and "no run" in missing.content[0].text
    # No tool of that name is the protocol's error, not a call made that failed.
    with pytest.raises(MCPError) as unknown:
        await client.call_tool("submit_tasks", {"task": "x"})
    assert unknown.value.code == -32602 and "submit_tasks" in unknown.value.message
    # How long to wait is bounded, and said so before any run is submitted.
    never = await client.call_tool("submit_task", {"task": "x", "wait_s": -1})
    assert never.is_error and "wait_s" in never.content[0].text


async def test_the_http_endpoint_serves_the_team(api: str) -> None:
    async with Client(f"{api}/mcp") as client:
        assert client.server_info is not None
        assert client.server_info.name == "baton"
        assert client.server_info.version == metadata.version("baton")
        await use_team(client)


async def test_the_http_endpoint_checks_origin_and_host(api: str) -> None:
    async with httpx.AsyncClient(base_url=api) as client:
        foreign = await client.post(
            "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Origin": "https://evil.example"}
        )
        assert foreign.status_code == 403 and "Origin" in foreign.json()["error"]["message"]
        rebound = await client.post(
            "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Host": "evil.example"}
        )
        assert rebound.status_code == 421
        local = await client.post(
            "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Origin": "http://127.0.0.1:3000"}
        )
        assert local.status_code == 200, local.text


async def test_the_http_endpoint_takes_the_api_keys(guarded: ServiceProcess) -> None:
    async with httpx.AsyncClient(base_url=guarded.url) as client:
        anonymous = await client.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
        assert anonymous.status_code == 401
        wrong = await client.post(
            "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": "Bearer nope"}
        )
        assert wrong.status_code == 401
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {KEYS[1]}"}) as http,
        Client(streamable_http_client(f"{guarded.url}/mcp", http_client=http)) as client,
    ):
        names = {t.name for t in (await client.list_tools()).tools}
        assert "submit_task" in names
        missing = await client.call_tool("get_run", {"run_id": "0" * 32})
        assert missing.is_error
    # The key's rate limit (burst 8, then 1 a second) covers /mcp as it covers /v1.
    async with httpx.AsyncClient(base_url=guarded.url) as client:
        key = {"Authorization": f"Bearer {KEYS[1]}"}
        answers = [
            await client.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **key})
            for _ in range(12)
        ]
    limited = [a for a in answers if a.status_code == 429]
    assert limited and int(limited[0].headers["Retry-After"]) >= 1


def baton_mcp(folder: Path, ray_address: str) -> StdioServerParameters:
    """`baton mcp` as an MCP host starts it: the team in `folder/team.yaml`, its own store."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "orchestrator", "mcp", "--config", str(folder / "team.yaml")],
        cwd=str(ROOT),
        env={
            **os.environ,
            "RAY_ADDRESS": ray_address,
            "BATON_STORE_URL": f"sqlite+aiosqlite:///{folder / 'runs.db'}",
        },
    )


async def test_baton_mcp_over_stdio(ray_address: str, tmp_path: Path) -> None:
    # One agent: `baton mcp` starts its own actors, and one is all these tools need.
    (tmp_path / "team.yaml").write_text(
        "agents: [{name: analyst, description: Does arithmetic., tools: [configs.tools:calculate]}]"
    )
    params = baton_mcp(tmp_path, ray_address)
    async with Client(params, read_timeout_seconds=180) as client:
        await use_team(client)
    # Its runs are recorded in the run store like any other.
    with sqlite3.connect(tmp_path / "runs.db") as db:
        assert [row[0] for row in db.execute("SELECT status FROM runs")] == ["succeeded"]


async def test_a_waiting_submit_reports_progress_and_its_cancellation_cancels_the_run(
    api: str,
) -> None:
    said: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        said.append(message or "")

    async with Client(f"{api}/mcp") as client:
        task = {"task": "calculate 6 * 7", "agent": "analyst"}
        # The host's trace goes on into the run's: the client puts the current span's context
        # in the call's `_meta.traceparent` (SEP-414), as an instrumented MCP host does.
        with TracerProvider().get_tracer("host").start_as_current_span("host asks") as span:
            host_trace = format(span.get_span_context().trace_id, "032x")
            run = result_json(
                await client.call_tool("submit_task", task, progress_callback=progress)
            )
        assert said == [f"run {run['id']} accepted", "→ analyst", "run succeeded"]
        async with httpx.AsyncClient(base_url=api) as http:
            trace = (await http.get(f"/v1/runs/{run['id']}/trace")).json()
        assert trace["trace_id"] == host_trace
        said.clear()
        # The dozer takes a minute: the client gives up after a few seconds.
        with anyio.move_on_after(4):
            await client.call_tool(
                "submit_task", {"task": "wait", "agent": "dozer"}, progress_callback=progress
            )
    run_id = said[0].split()[1]
    events = await all_events(api, run_id)
    assert events[-1][1] == "run_finished" and events[-1][2]["status"] == "cancelled"


ASK = "ask the user which account to pay the rent from"


async def test_an_agents_question_is_asked_through_elicitation(api: str) -> None:
    asked: list[str] = []

    async def elicitation(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"answer": "savings"})

    async with Client(f"{api}/mcp", elicitation_callback=elicitation) as client:
        task = {"task": ASK, "agent": "teller"}
        run = result_json(await client.call_tool("submit_task", task))
    # The client's user was asked once, and the agent read the answer.
    assert asked == [f"teller asks: {ASK}"]
    assert run["status"] == "succeeded" and "- ask_user: savings" in run["output"], run
    events = await all_events(api, run["id"])
    kinds = [kind for _, kind, _ in events]
    assert kinds.count("input_requested") == kinds.count("input_provided") == 1


async def test_a_client_without_elicitation_answers_with_answer_question(api: str) -> None:
    async with Client(f"{api}/mcp") as client:
        run = result_json(await client.call_tool("submit_task", {"task": ASK, "agent": "teller"}))
        assert run["status"] == "input_required", run
        [question] = run["questions"]
        assert question["question"] == ASK and question["agent"] == "teller"
        answered = result_json(
            await client.call_tool("answer_question", {"run_id": run["id"], "answer": "savings"})
        )
        assert answered["status"] == "succeeded" and "- ask_user: savings" in answered["output"]
        again = await client.call_tool(
            "answer_question", {"run_id": run["id"], "answer": "checking"}
        )
        assert again.is_error and "succeeded" in again.content[0].text


async def test_cancel_run_the_prompt_and_its_completions(api: str) -> None:
    async with Client(f"{api}/mcp") as client:
        started = result_json(
            await client.call_tool("submit_task", {"task": "wait", "agent": "dozer", "wait_s": 0})
        )
        assert started["status"] in ("queued", "running")
        cancelled = result_json(await client.call_tool("cancel_run", {"run_id": started["id"]}))
        assert cancelled["status"] == "cancelled"
        completed = await client.complete(
            PromptReference(name="ask_team"), {"name": "agent", "value": "ana"}
        )
        assert completed.completion.values == ["analyst"]
        prompt = await client.get_prompt("ask_team", {"task": "sum it", "agent": "analyst"})
        text = prompt.messages[0].content.text  # type: ignore[union-attr]
        assert "submit_task" in text and "analyst" in text and "sum it" in text


async def test_a_host_that_closes_stdin_leaves_its_runs_recorded_as_interrupted(
    ray_address: str, tmp_path: Path
) -> None:
    (tmp_path / "team.yaml").write_text(
        """
agents:
  - name: dozer
    description: Waits a minute.
    tools: [tests.testkit:slow_step]
    model:
      name: baton/scripted
      params: {replies: [{tool_calls: [{name: slow_step, arguments: {seconds: 60}}]}]}
"""
    )
    params = baton_mcp(tmp_path, ray_address)
    async with Client(params, read_timeout_seconds=180) as client:
        # The run is in its minute-long tool (or waits for the agent's actor) when the host
        # leaves: the SDK closes stdin, sends SIGTERM 2 s later, SIGKILL 2 s after that.
        run = result_json(await client.call_tool("submit_task", {"task": "wait", "wait_s": 5}))
        assert run["status"] in ("queued", "running")
    with sqlite3.connect(tmp_path / "runs.db") as db:
        statuses = [row[0] for row in db.execute("SELECT status FROM runs")]
    assert statuses == ["interrupted"]


# --- MCP tasks: the tasks extension's client, as an MCP host would run it ---------------------


class TaskParams(RequestParams):
    task_id: str


class TaskAnswers(TaskParams):
    input_responses: dict[str, Any]


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param: ClassVar[str | None] = "taskId"  # the spec's Mcp-Name header


class UpdateTask(Request[TaskAnswers, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param: ClassVar[str | None] = "taskId"


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param: ClassVar[str | None] = "taskId"


class CreatedTask(Result):
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    poll_interval_ms: int | None = None


ANY = TypeAdapter(dict[str, Any])


class Tasks(ClientExtension):
    """The tasks extension's requester: polls a task to its end, answering its questions with
    `answer`, or cancelling it after the first poll (`cancel`). `seen` keeps each status."""

    identifier = "io.modelcontextprotocol/tasks"

    def __init__(self, answer: str = "", cancel: bool = False) -> None:
        self.answer, self.cancel = answer, cancel
        self.created: list[CreatedTask] = []
        self.seen: list[dict[str, Any]] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self.resolve)]

    async def resolve(self, created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
        self.created.append(created)
        ref = TaskParams(task_id=created.task_id)
        with anyio.fail_after(60):
            while True:
                task = await ctx.session.send_request(GetTask(params=ref), ANY)
                self.seen.append(task)
                if task["status"] == "completed":
                    return CallToolResult.model_validate(task["result"])
                if task["status"] in ("failed", "cancelled"):
                    return CallToolResult(content=[], is_error=True)
                if self.cancel:
                    await ctx.session.send_request(CancelTask(params=ref), ANY)
                elif task["status"] == "input_required":
                    responses = {
                        key: {"action": "accept", "content": {"answer": self.answer}}
                        for key in task["inputRequests"]
                    }
                    answers = TaskAnswers(task_id=created.task_id, input_responses=responses)
                    await ctx.session.send_request(UpdateTask(params=answers), ANY)
                await anyio.sleep(min(created.poll_interval_ms or 1000, 200) / 1000)


async def test_a_client_that_takes_tasks_gets_the_run_as_a_task_and_answers_its_questions(
    api: str,
) -> None:
    tasks = Tasks(answer="savings")
    async with Client(f"{api}/mcp", extensions=[tasks]) as client:
        assert client.protocol_version == "2026-07-28"
        assert "io.modelcontextprotocol/tasks" in (client.server_capabilities.extensions or {})
        run = result_json(await client.call_tool("submit_task", {"task": ASK, "agent": "teller"}))
    # The call answered at once with the run as a task; the client polled it, was asked the
    # agent's question (an elicitation of the task), answered it, and read the answer.
    [created] = tasks.created
    assert created.status == "working" and created.task_id == run["id"]
    statuses = [t["status"] for t in tasks.seen]
    assert "input_required" in statuses and statuses[-1] == "completed", statuses
    [asking] = [t for t in tasks.seen if t["status"] == "input_required"][:1]
    [request] = asking["inputRequests"].values()
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"] == f"teller asks: {ASK}"
    assert run["status"] == "succeeded" and "- ask_user: savings" in run["output"], run
    assert tasks.seen[-1]["createdAt"].endswith("Z") and tasks.seen[-1]["ttlMs"] is None
    events = await all_events(api, run["id"])
    provided = [data for _, kind, data in events if kind == "input_provided"]
    assert [p["answer"] for p in provided] == ["savings"]


async def test_a_task_is_cancelled_and_an_unknown_one_is_an_error(api: str) -> None:
    tasks = Tasks(cancel=True)
    async with Client(f"{api}/mcp", extensions=[tasks]) as client:
        ended = await client.call_tool("submit_task", {"task": "wait", "agent": "dozer"})
        assert ended.is_error
        [created] = tasks.created
        assert tasks.seen[-1]["status"] == "cancelled"
        async with httpx.AsyncClient(base_url=api) as http:
            run = (await http.get(f"/v1/runs/{created.task_id}")).json()
        assert run["status"] == "cancelled"
        with pytest.raises(MCPError) as unknown:
            await client.session.send_request(GetTask(params=TaskParams(task_id="f" * 32)), ANY)
        assert unknown.value.error.code == -32602 and "no task" in unknown.value.error.message
    # A client that does not take tasks waits in the call, as before.
    async with Client(f"{api}/mcp") as client:
        plain = result_json(await client.call_tool("submit_task", {"task": "calculate 2 + 2"}))
        assert plain["status"] == "succeeded"
