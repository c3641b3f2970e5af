"""Approvals over HTTP, for real: a call marked `confirm: true` pauses its run until a person
approves or denies it through the API, or until the approval expires."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page

from orchestrator.cli.client import parse_sse
from tests.service import CLERK

pytestmark = [pytest.mark.ray, pytest.mark.anyio]

# The clerk alone, for `baton run`.
CONFIG = (
    """
name: approvals
limits: {deadline_s: 60, approval_timeout_s: 120}
agents:
"""
    + CLERK
)


async def events(url: str, run_id: str) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    async with (
        httpx.AsyncClient(base_url=url, timeout=60) as client,
        client.stream("GET", f"/v1/runs/{run_id}/events") as response,
    ):
        async for event in parse_sse(response.aiter_lines()):
            yield event.event, event.json()


async def run_until_asked(
    client: httpx.AsyncClient, url: str, agent: str
) -> tuple[str, dict[str, Any], AsyncIterator[tuple[str, dict[str, Any]]]]:
    submitted = await client.post("/v1/runs", json={"task": "pay the bill", "agent": agent})
    assert submitted.status_code == 202, submitted.text
    run_id = submitted.json()["id"]
    stream = events(url, run_id)
    async with asyncio.timeout(60):
        async for kind, data in stream:
            if kind == "approval_requested":
                return run_id, data, stream
    raise AssertionError("no approval was requested")


async def rest_of(stream: AsyncIterator[tuple[str, dict[str, Any]]]) -> list[tuple[str, Any]]:
    async with asyncio.timeout(60):
        return [item async for item in stream]


def tool_spans(trace: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    nodes = list(trace["spans"])
    while nodes:
        node = nodes.pop()
        nodes += node["children"]
        if node["name"].startswith("execute_tool "):
            found.append(node)
    return found


async def test_an_approved_call_runs_and_the_run_waits_until_then(api: str) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        run_id, asked, stream = await run_until_asked(client, api, "clerk")
        assert asked["tool"] == "stamp" and asked["agent"] == "clerk"
        assert "payment 42 EUR" in asked["arguments"]
        # While it waits, the run says so, and lists the pending call.
        async with asyncio.timeout(10):
            status = ""
            while status != "waiting_for_approval":
                status = (await client.get(f"/v1/runs/{run_id}")).json()["status"]
                await asyncio.sleep(0.1)
        [pending] = (await client.get(f"/v1/runs/{run_id}/approvals")).json()
        assert pending["call_id"] == asked["call_id"]

        decided = await client.post(
            f"/v1/runs/{run_id}/approvals/{asked['call_id']}",
            json={"approve": True, "message": "ok by me"},
        )
        assert decided.status_code == 200, decided.text
        assert decided.json() == {
            "call_id": asked["call_id"],
            "approved": True,
            "message": "ok by me",
            "by": "person",
            "who": "ip:127.0.0.1",  # no API keys: the caller's address
            "arguments": None,
        }
        # A second decision is too late.
        again = await client.post(
            f"/v1/runs/{run_id}/approvals/{asked['call_id']}", json={"approve": False}
        )
        assert again.status_code == 409 and again.json()["error"]["code"] == "approval_conflict"

        rest = await rest_of(stream)
        kinds = [k for k, _ in rest]
        assert kinds[0] == "approval_decided" and kinds[-1] == "run_finished"
        assert rest[-1][1]["status"] == "succeeded"
        trace = (await client.get(f"/v1/runs/{run_id}/trace")).json()
        [stamp] = tool_spans(trace)
        assert "payment 42 EUR at" in stamp["attributes"]["gen_ai.tool.call.result"]
        assert (await client.get(f"/v1/runs/{run_id}")).json()["status"] == "succeeded"


async def test_an_approval_may_edit_the_arguments_the_call_is_made_with(api: str) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        run_id, asked, stream = await run_until_asked(client, api, "clerk")
        url = f"/v1/runs/{run_id}/approvals/{asked['call_id']}"
        edit = {"text": "payment 40 EUR"}
        refused = await client.post(url, json={"approve": False, "arguments": edit})
        assert refused.status_code == 422 and "arguments" in refused.text
        # The pending call shows its arguments as the object an edit is, and the tool's schema.
        [pending] = (await client.get(f"/v1/runs/{run_id}/approvals")).json()
        assert pending["arguments"] == {"text": "payment 42 EUR"}
        assert pending["parameters"]["properties"]["text"]["type"] == "string"
        # An edit the tool does not take is refused, naming the field; the call still waits.
        misfit = await client.post(url, json={"approve": True, "arguments": {"text": 40}})
        assert misfit.status_code == 422, misfit.text
        error = misfit.json()["error"]
        assert error["code"] == "invalid_arguments"
        assert error["details"]["problems"] == ["text: 40 is not of type 'string'"]
        assert [
            p["call_id"] for p in (await client.get(f"/v1/runs/{run_id}/approvals")).json()
        ] == [asked["call_id"]]
        decided = await client.post(url, json={"approve": True, "arguments": edit})
        assert decided.status_code == 200, decided.text
        assert decided.json()["arguments"] == edit
        rest = await rest_of(stream)
        [said] = [data for kind, data in rest if kind == "approval_decided"]
        # The edit is recorded, with who made it.
        assert json.loads(said["arguments"]) == edit and said["who"] == "ip:127.0.0.1"
        trace = (await client.get(f"/v1/runs/{run_id}/trace")).json()
    [stamp] = tool_spans(trace)
    # The call was made with the person's arguments, and its span says so.
    assert "payment 40 EUR at" in stamp["attributes"]["gen_ai.tool.call.result"]
    assert json.loads(stamp["attributes"]["gen_ai.tool.call.arguments"]) == edit
    [decision] = [e for e in stamp["events"] if e["name"] == "approval_decided"]
    assert decision["attributes"]["edited"] is True


async def test_a_denied_call_goes_back_to_the_model_as_its_result(api: str) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        run_id, asked, stream = await run_until_asked(client, api, "clerk")
        decided = await client.post(
            f"/v1/runs/{run_id}/approvals/{asked['call_id']}",
            json={"approve": False, "message": "not this month"},
        )
        assert decided.status_code == 200 and decided.json()["approved"] is False
        rest = await rest_of(stream)
        assert rest[-1][1]["status"] == "succeeded"  # the model carried on
        trace = (await client.get(f"/v1/runs/{run_id}/trace")).json()
        [stamp] = tool_spans(trace)
        result = stamp["attributes"]["gen_ai.tool.call.result"]
        assert "denied by a person" in result and "not this month" in result
        assert " at " not in result.split("not this month")[0]  # the tool never ran
        assert stamp["status"] == "ERROR"


async def test_an_unanswered_approval_expires_as_a_denial(api: str) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        run_id, asked, stream = await run_until_asked(client, api, "clerk")
        assert asked["expires_at"] - asked["ts"] == pytest.approx(15, abs=0.5)
        rest = await rest_of(stream)
        decided = next(data for kind, data in rest if kind == "approval_decided")
        assert decided["approved"] is False and decided["by"] == "expiry"
        late = await client.post(
            f"/v1/runs/{run_id}/approvals/{asked['call_id']}", json={"approve": True}
        )
        assert late.status_code == 409
        trace = (await client.get(f"/v1/runs/{run_id}/trace")).json()
        [stamp] = tool_spans(trace)
        assert "approval expired" in stamp["attributes"]["gen_ai.tool.call.result"]


async def test_a_delegation_to_a_confirm_agent_waits_for_approval(api: str) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        run_id, asked, stream = await run_until_asked(client, api, "lead")
        assert asked["tool"] == "delegate_to_vault"
        unknown = await client.post(
            f"/v1/runs/{run_id}/approvals/no-such-call", json={"approve": True}
        )
        assert unknown.status_code == 404
        bad = await client.post(
            f"/v1/runs/{run_id}/approvals/{asked['call_id']}", json={"approve": "maybe"}
        )
        assert bad.status_code == 422
        await client.post(f"/v1/runs/{run_id}/approvals/{asked['call_id']}", json={"approve": True})
        rest = await rest_of(stream)
        started = [d["agent"] for k, d in rest if k == "agent_started"]
        assert started == ["vault"] and rest[-1][1]["status"] == "succeeded"


def test_baton_run_without_a_terminal_denies_at_once(ray_address: str, tmp_path: Path) -> None:
    """`baton run` asks at the terminal; with none (a script, CI) nobody can approve, so the
    call is denied at once instead of holding the run until the approval expires."""
    (tmp_path / "team.yaml").write_text(CONFIG)
    env = {
        **os.environ,
        "RAY_ADDRESS": ray_address,
        "BATON_STORE_URL": f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}",
        "COLUMNS": "400",
    }
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "pay the bill", "-a", "clerk",
         "--config", str(tmp_path / "team.yaml"), "--json"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - began < 110  # not held until the approval expired
    run = json.loads(done.stdout)
    listed = subprocess.run(
        [sys.executable, "-m", "orchestrator", "trace", run["id"]],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert "✗ execute_tool stamp" in listed.stdout
    assert "not_approved" in listed.stdout and "not attached to a terminal" in listed.stdout


@pytest.mark.browser
def test_the_run_page_shows_a_pending_call_with_approve_and_deny(
    api: str, page: Page, problems: list[str]
) -> None:
    submitted = httpx.post(f"{api}/v1/runs", json={"task": "pay", "agent": "clerk"})
    run_id = submitted.json()["id"]
    page.goto(f"{api}/runs/{run_id}")
    approval = page.locator("#approvals .approval")
    approval.wait_for(timeout=30_000)
    assert "stamp" in approval.inner_text()
    # The arguments are shown to edit: the call is made with the edit.
    arguments = approval.locator("textarea.arguments")
    assert "payment 42 EUR" in arguments.input_value()
    assert page.locator("#run-status").inner_text() in ("running", "waiting_for_approval")
    # An edit the tool does not take is said beside it, and the call still waits.
    arguments.fill('{"text": 41}')
    page.locator("#approvals .approve").click()
    problem = approval.locator("p.error")
    problem.wait_for(timeout=10_000)
    assert "text: 41 is not of type 'string'" in problem.inner_text()
    # (the browser logs the refused request: expected here, and the only one)
    refused = [p for p in problems if "status of 422" in p]
    assert len(refused) == 1
    problems.remove(refused[0])
    arguments.fill('{"text": "payment 41 EUR"}')
    page.locator("#approvals .approve").click()
    page.wait_for_selector("body[data-state=finished]", timeout=30_000)
    assert page.locator("#approvals").is_hidden()
    assert page.locator("#run-status").inner_text() == "succeeded"
    trace = httpx.get(f"{api}/v1/runs/{run_id}/trace").json()
    [stamp] = tool_spans(trace)
    assert "payment 41 EUR at" in stamp["attributes"]["gen_ai.tool.call.result"]  # it ran
