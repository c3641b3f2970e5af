"""The HTTP service for real: `baton serve` on 127.0.0.1, agents on the session's Ray, httpx."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fuzzing import finish, schemathesis
from tests.service import KEYS, STORY, ServiceProcess, all_events, follow, submit

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.long]


async def test_a_run_streams_its_events_to_the_end_and_keeps_its_trace(api: str) -> None:
    answer = await submit(api, {"task": "calculate 6 * 7", "agent": "coordinator"})
    assert answer.status_code == 202, answer.text
    run = answer.json()
    assert run["status"] in ("queued", "running")
    assert answer.headers["Location"] == f"/v1/runs/{run['id']}" == run["links"]["self"]
    assert run["links"]["events"].endswith("/events")
    assert run["links"]["cancel"] == f"/v1/runs/{run['id']}/cancel"  # while it goes on
    assert run["links"]["resume"] is None  # nothing to resume

    events = await all_events(api, run["id"])
    ids = [seq for seq, _, _ in events]
    assert ids == list(range(1, len(ids) + 1))  # monotonic, nothing skipped
    kinds = [kind for _, kind, _ in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert "model_delta" not in kinds  # not submitted with `stream`
    assert {"agent_started", "model_finished", "tool_started", "tool_finished"} <= set(kinds)
    started = {data["agent"]: data for _, kind, data in events if kind == "agent_started"}
    assert started["analyst"]["caller"] == "coordinator"
    final = events[-1][2]
    assert final["status"] == "succeeded" and "calculate: 42" in final["output"]

    # Whoever saw run_finished finds the run recorded.
    async with httpx.AsyncClient(base_url=api) as client:
        stored = (await client.get(f"/v1/runs/{run['id']}")).json()
        trace = (await client.get(f"/v1/runs/{run['id']}/trace")).json()
        served = (await client.get("/v1/service")).json()
    assert stored["status"] == "succeeded" and stored["output"] == final["output"]
    assert stored["links"]["cancel"] is None and stored["links"]["resume"] is None
    assert stored["usage"]["model_calls"] == 4 and stored["tree"]["agent"] == "coordinator"
    [root] = trace["spans"]
    assert root["name"] == "invoke_workflow baton"
    # The version of the team it ran on (the config's digest: it has no `release` label).
    assert re.fullmatch("[0-9a-f]{10}", served["system_version"])
    assert stored["version"] == served["system_version"]
    assert root["attributes"]["baton.system.version"] == served["system_version"]
    [coordinator] = root["children"]
    delegation = next(
        c for c in coordinator["children"] if c["name"] == "execute_tool delegate_to_analyst"
    )
    assert [c["name"] for c in delegation["children"]] == ["invoke_agent analyst"]
    assert trace["span_count"] == 9  # workflow, 2 agents, 4 model calls, 2 tools

    # Reconnecting with Last-Event-ID replays exactly what came after it.
    again = await all_events(api, run["id"], last_event_id=3)
    assert [(s, k) for s, k, _ in again] == [(s, k) for s, k, _ in events[3:]]


async def test_a_run_and_the_agents_come_as_mermaid_diagrams(api: str) -> None:
    run = (await submit(api, {"task": "calculate 6 * 7", "agent": "coordinator"})).json()
    await all_events(api, run["id"])
    async with httpx.AsyncClient(base_url=api) as client:
        text = await client.get(f"/v1/runs/{run['id']}/diagram")
        full = await client.get(
            f"/v1/runs/{run['id']}/diagram", params={"detail": "full", "format": "json"}
        )
        agents = await client.get("/v1/agents/diagram")
        wrong = await client.get(f"/v1/runs/{run['id']}/diagram", params={"detail": "all"})
    assert text.headers["content-type"].startswith("text/vnd.mermaid")
    assert "sequenceDiagram" in text.text and "participant a3 as coordinator" in text.text
    view = full.json()
    assert view["status"] == "succeeded" and view["pages"] == 1
    assert "as baton/offline" in view["mermaid"] and "as calculate" in view["mermaid"]
    assert len(view["arrows"]) == view["mermaid"].count("->>") + view["mermaid"].count("--x")
    assert agents.headers["content-type"].startswith("text/vnd.mermaid")
    assert "flowchart LR" in agents.text and "coordinator · depth 1" in agents.text
    assert wrong.status_code == 422


async def test_twenty_identical_submissions_with_one_key_make_one_run(api: str) -> None:
    body = {"task": "calculate 1 + 1", "agent": "analyst"}
    answers = await asyncio.gather(
        *(submit(api, body, **{"Idempotency-Key": "k-20"}) for _ in range(20))
    )
    assert {a.status_code for a in answers} == {202}
    assert len({a.json()["id"] for a in answers}) == 1
    assert sum(a.headers.get("Idempotent-Replayed") == "true" for a in answers) == 19
    other = await submit(api, {**body, "task": "calculate 2 + 2"}, **{"Idempotency-Key": "k-20"})
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_conflict"
    async with httpx.AsyncClient(base_url=api) as client:
        listed = (await client.get("/v1/runs", params={"limit": 200})).json()
    assert sum(r["task"] == "calculate 1 + 1" for r in listed["runs"]) == 1


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ({"task": ""}, 422, "validation_error", "body.task"),
        ({"task": "   "}, 422, "validation_error", "body.task"),
        ({"task": "a\x00b"}, 422, "validation_error", "body.task"),  # as on PostgreSQL
        ({"task": "go", "agent": "ghost"}, 422, "validation_error", "body.agent"),
        ({"task": 5}, 422, "validation_error", "body.task"),
        ({"task": "go", "token_budget": "lots"}, 422, "validation_error", "body.token_budget"),
        ({"task": "go", "deadline_s": -1}, 422, "validation_error", "body.deadline_s"),
        ({"task": "go", "colour": "red"}, 422, "validation_error", "body.colour"),
        ([1, 2], 422, "validation_error", "body"),
    ],
)
async def test_bad_submissions_get_a_4xx_that_names_the_field(
    api: str, body: Any, status: int, code: str, field: str
) -> None:
    answer = await submit(api, body)
    assert answer.status_code == status
    error = answer.json()["error"]
    assert error["code"] == code
    assert error["details"][0]["field"] == field
    assert error["message"].startswith(field)


async def test_malformed_json_oversize_bodies_and_unknown_runs_are_clear_errors(api: str) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        broken = await client.post(
            "/v1/runs", content=b'{"task": "go",', headers={"content-type": "application/json"}
        )
        assert broken.status_code == 400 and broken.json()["error"]["code"] == "invalid_json"

        huge = json.dumps({"task": "x" * 2_000_000}).encode()
        declared = await client.post(
            "/v1/runs", content=huge, headers={"content-type": "application/json"}
        )
        assert declared.status_code == 413
        assert declared.json()["error"]["code"] == "payload_too_large"

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it streams
            for start in range(0, len(huge), 65536):
                yield huge[start : start + 65536]

        streamed = await client.post(
            "/v1/runs", content=chunks(), headers={"content-type": "application/json"}
        )
        assert streamed.status_code == 413

        missing = await client.get("/v1/runs/nope")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "run_not_found"
        assert (await client.get("/v1/runs/nope/events")).status_code == 404
        assert (await client.post("/v1/runs/nope/cancel")).status_code == 404
        paged = await client.get("/v1/runs", params={"limit": 0})
        assert paged.status_code == 422 and paged.json()["error"]["details"][0]["field"] == (
            "query.limit"
        )


async def test_runs_are_listed_newest_first_filtered_and_paged(api: str) -> None:
    ids = []
    for task in ("calculate 3 + 3", "calculate 4 + 4", "calculate 5 + 5"):
        run = (await submit(api, {"task": task, "agent": "analyst"})).json()
        await all_events(api, run["id"])
        ids.append(run["id"])
    async with httpx.AsyncClient(base_url=api) as client:
        page = (await client.get("/v1/runs", params={"agent": "analyst", "limit": 2})).json()
        rest = (
            await client.get("/v1/runs", params={"agent": "analyst", "limit": 2, "offset": 2})
        ).json()
        none = (await client.get("/v1/runs", params={"status": "failed"})).json()
    assert [r["id"] for r in page["runs"]] == [ids[2], ids[1]]
    assert page["total"] == rest["total"] >= 3 and rest["runs"][0]["id"] == ids[0]
    assert {k: v for k, v in none.items() if k != "usage"} == {
        "runs": [],
        "total": 0,
        "limit": 50,
        "offset": 0,
    }
    assert none["usage"]["cost_usd"] == 0 and none["usage"]["input_tokens"] == 0
    # The filtered set's totals, whichever page is shown.
    assert page["usage"] == rest["usage"]
    assert page["usage"]["model_calls"] >= 3 * 2 and page["usage"]["input_tokens"] > 0


async def test_health_readiness_and_agents(api: str) -> None:
    async with httpx.AsyncClient(base_url=api) as client:
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        ready = (await client.get("/readyz")).json()
        # (`clerk` names an MCP server that is not there: reported, and still ready.)
        assert ready["status"] == "ready"
        assert ready["checks"]["ray"] == ready["checks"]["store"] == "ok"
        assert ready["checks"]["tools"].startswith("degraded: MCP server gone:")
        agents = (await client.get("/v1/agents")).json()
        spec = (await client.get("/openapi.json")).json()
    assert agents["system"] == "svc"
    by_name = {a["name"]: a for a in agents["agents"]}
    assert by_name["coordinator"]["delegates"] == ["analyst", "sleeper"]
    # No `ray:` options: the analyst shares the team's host with the others like it.
    [replica] = by_name["analyst"]["replicas"]
    assert replica["actor"].endswith("._shared.0") and replica["node_id"]
    assert by_name["analyst"]["own_actors"] is None
    assert {"coordinator", "sleeper"} <= set(replica["shares_with"])
    assert "analyst" not in replica["shares_with"]
    assert agents["topology"]["edges"] == [
        ["coordinator", "analyst"],
        ["coordinator", "sleeper"],
        ["desk", "refunds"],
        ["notary", "scribe"],
        ["lead", "clerk"],
        ["lead", "vault"],
        ["pipeline", "profiler"],  # (a workflow's calls are edges too)
        ["pipeline", "clerk"],
        ["fanout", "sleeper"],
    ]
    submission = spec["components"]["schemas"]["RunSubmission"]["properties"]["agent"]
    assert submission["anyOf"][0]["enum"] == [
        "coordinator",
        "analyst",
        "sleeper",
        "dozer",
        "narrator",
        "desk",
        "refunds",
        "parrot",
        "teller",
        "notary",
        "scribe",
        "lead",
        "clerk",
        "vault",
        "pipeline",
        "fanout",
        "profiler",
        "keeper",
        "auto",
    ]


def test_baton_run_submits_to_a_server_and_follows_it(api: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "calculate 7 * 6", "--server", api],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    # Piped: progress (from the event stream) and the streamed text on stderr, the answer alone
    # on stdout.
    assert "→ analyst (from coordinator)" in done.stderr
    assert "coordinator ▸ Answer to: calculate 7 * 6" in done.stderr
    assert "succeeded" in done.stderr
    assert "calculate: 42" in done.stdout and "→" not in done.stdout


def test_serving_beyond_loopback_without_keys_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "serve", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "BATON_STORE_URL": f"sqlite+aiosqlite:///{tmp_path}/x.db"},
    )
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0 without API keys" in done.stderr


async def test_keys_are_required_and_each_key_is_rate_limited(guarded: ServiceProcess) -> None:
    async with httpx.AsyncClient(base_url=guarded.url) as client:
        anonymous = await client.get("/v1/runs")
        wrong = await client.get("/v1/runs", headers={"Authorization": "Bearer sk-nope-nope"})
        assert anonymous.status_code == wrong.status_code == 401
        assert anonymous.headers["WWW-Authenticate"] == "Bearer"
        assert wrong.json()["error"]["code"] == "unauthorized"
        key = {"Authorization": f"Bearer {KEYS[1]}"}
        answers = [await client.get("/v1/agents", headers=key) for _ in range(12)]
    codes = [a.status_code for a in answers]
    assert codes[:8] == [200] * 8 and 429 in codes[8:]
    limited = next(a for a in answers if a.status_code == 429)
    assert int(limited.headers["Retry-After"]) >= 1
    assert limited.json()["error"]["code"] == "rate_limited"
    assert not any(k in guarded.log.read_text() for k in KEYS)  # never logged


async def test_beyond_running_and_queued_runs_the_service_answers_429(
    guarded: ServiceProcess,
) -> None:
    key = {"Authorization": f"Bearer {KEYS[0]}"}
    body = {"task": "wait", "agent": "sleeper"}
    first, second, third = [await submit(guarded.url, body, **key) for _ in range(3)]
    assert (first.status_code, second.status_code) == (202, 202)  # one runs, one waits
    assert third.status_code == 429 and third.json()["error"]["code"] == "overloaded"
    assert int(third.headers["Retry-After"]) >= 1
    async with httpx.AsyncClient(base_url=guarded.url, headers=key) as client:
        queued = (await client.get(f"/v1/runs/{second.json()['id']}")).json()
        assert queued["status"] == "queued"
        # Cancelling a queued run ends it at once; it never starts.
        assert (await client.post(f"/v1/runs/{second.json()['id']}/cancel")).status_code == 202
    events = await all_events(guarded.url, second.json()["id"], **key)
    assert [(k, d["status"]) for _, k, d in events] == [("run_finished", "cancelled")]
    await all_events(guarded.url, first.json()["id"], **key)  # the next test starts unqueued


async def test_events_reach_followers_as_they_happen_not_at_heartbeats(
    guarded: ServiceProcess,
) -> None:
    # This service keeps the default 15 s heartbeat: an event that waited for a quiet period
    # to be fetched would come seconds late. The sleeper's run takes about 3 s.
    key = {"Authorization": f"Bearer {KEYS[0]}"}
    began = time.monotonic()
    answer = await submit(guarded.url, {"task": "wait", "agent": "sleeper"}, **key)
    assert answer.status_code == 202, answer.text
    events = await all_events(guarded.url, answer.json()["id"], **key)
    assert events[-1][1] == "run_finished" and events[-1][2]["status"] == "succeeded"
    assert time.monotonic() - began < 12  # a run queued behind another included


async def test_a_streamed_run_sends_its_text_as_it_is_written_and_stores_only_the_whole(
    api: str,
) -> None:
    answer = await submit(api, {"task": "tell it", "agent": "narrator", "stream": True})
    assert answer.status_code == 202, answer.text
    run_id = answer.json()["id"]
    seen: list[tuple[float, int, str, dict[str, Any]]] = []

    async def collect() -> None:
        async for seq, kind, data in follow(api, run_id):
            seen.append((time.monotonic(), seq, kind, data))

    await asyncio.wait_for(collect(), 60)
    deltas = [(at, data) for at, _, kind, data in seen if kind == "model_delta"]
    assert "".join(d["text"] for _, d in deltas) == STORY == seen[-1][3]["output"]
    # As it was written (40 words over 2 s), not all at the end; none has an id to resume from.
    assert len(deltas) >= 10 and seen[-1][0] - deltas[0][0] > 1.0
    assert {seq for _, seq, kind, _ in seen if kind == "model_delta"} == {0}
    assert {d["agent"] for _, d in deltas} == {"narrator"}
    # Stored: the numbered events only, and the whole message in the run's record.
    again = await all_events(api, run_id)
    assert "model_delta" not in {kind for _, kind, _ in again}
    assert [seq for seq, _, _ in again] == list(range(1, len(again) + 1))
    assert [s for _, s, k, _ in seen if k != "model_delta"] == [s for s, _, _ in again]


def test_every_operation_answers_as_its_openapi_document_says(api: str, tmp_path: Path) -> None:
    """Schemathesis against the service's own document: generated valid and invalid requests
    to every operation, all checks (no 5xx, documented statuses, headers and bodies, invalid
    input refused, valid input accepted, links between operations)."""
    # The two runs at once: the first mostly waits on the runs it starts (their event streams
    # end with them), the second is mostly schemathesis's own work.
    runs = [
        schemathesis(api, tmp_path / "main", "--phases", "examples,fuzzing,stateful"),
        # In its coverage phase, schemathesis 4.32 labels a case "positive" when only a header
        # was drawn valid and the body invalid (its own metadata says body: negative), then
        # expects a 2xx; every other check runs on that phase too.
        schemathesis(
            api,
            tmp_path / "coverage",
            "--phases",
            "coverage",
            "--exclude-checks",
            "positive_data_acceptance",
        ),
    ]
    finish(runs)
