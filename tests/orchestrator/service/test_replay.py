"""Replays and forks: a finished run executed again from its step log, as a new run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from agents.core.messages import RunStatus
from agents.ray.pool import PoolOptions
from orchestrator.engine import Execution, ForkPoint, Lineage, Submission
from orchestrator.store import RunMeta, RunStore
from tests.orchestrator.service.test_durability import _answer
from tests.service import submit

pytestmark = [pytest.mark.ray, pytest.mark.anyio]


async def test_a_replay_reproduces_a_run_from_its_record_without_calling_anything(
    api: str,
) -> None:
    first = (await submit(api, {"task": "calculate 6 * 7", "agent": "coordinator"})).json()
    original = await _answer(api, first["id"])
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        # Named by the 12 characters the UI shows, as git's short hashes.
        answer = await client.post(f"/v1/runs/{first['id'][:12]}/replay")
        assert answer.status_code == 202, answer.text
        replay_id = answer.json()["id"]
        assert answer.json()["replay_of"] == first["id"]
        replayed = await _answer(api, replay_id)
        assert replayed["status"] == "succeeded", replayed
        assert replayed["output"] == original["output"] and "42" in str(original["output"])
        assert replayed["usage"] == original["usage"]  # tokens as recorded, no call made
        for detail in ("agents", "full"):
            texts = [
                (
                    await client.get(
                        f"/v1/runs/{run_id}/diagram",
                        params={"detail": detail, "comparable": "true"},
                    )
                ).text
                for run_id in (first["id"], replay_id)
            ]
            assert texts[0] == texts[1], detail  # byte for byte
            assert "calculate" in texts[0] or detail == "agents"
        spans = (await client.get(f"/v1/runs/{replay_id}/trace")).json()["spans"]
        # A run still going cannot be replayed.
        running = (await submit(api, {"task": "wait", "agent": "sleeper"})).json()
        refused = await client.post(f"/v1/runs/{running['id']}/replay")
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "not_replayable"
        await client.post(f"/v1/runs/{running['id']}/cancel")

    def walk(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [n for node in nodes for n in (node, *walk(node["children"]))]

    chats = [s for s in walk(spans) if s["name"].startswith("chat ")]
    assert chats and all(s["attributes"].get("baton.step.replayed") for s in chats)


FORKED = """
name: forked
agents:
  - name: coordinator
    description: Plans the work.
    delegates: [analyst]
    model: {{name: baton/offline, params: {{calls_file: "{calls}"}}}}
  - name: analyst
    description: Does arithmetic.
    capabilities: [calculate]
    instructions: "{instructions}"
    tools: [configs.tools:calculate]
    model: {{name: baton/offline, params: {{calls_file: "{calls}"}}}}
"""


async def test_a_fork_with_a_changed_instruction_goes_live_from_the_step_it_changes(
    ray_cluster: Any, tmp_path: Path
) -> None:
    from orchestrator.engine import Engine
    from orchestrator.store import absolute_store_url
    from tests.testkit import config
    from tracing.sequence import sequence_diagram

    store_url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    store = await RunStore.open(store_url)
    calls = {v: tmp_path / f"{v}.txt" for v in ("before", "after")}
    engines = [
        Engine(
            config(FORKED.format(calls=calls[v], instructions=text)),
            PoolOptions(namespace="baton-tests", store_url=absolute_store_url(store_url)),
        )
        for v, text in (("before", "Be brief."), ("after", "Show your working, step by step."))
    ]
    try:
        for engine, run_id in zip(engines, ("parent", "fork"), strict=True):
            engine.start()
            await store.add(Submission("calculate 6 * 7"), RunMeta(run_id, "forked", {}))
        parent = await engines[0].run(Submission("calculate 6 * 7"), Execution("parent"))
        fork = await engines[1].run(
            Submission("calculate 6 * 7"),
            Execution("fork", lineage=Lineage(replay_of="parent", fork=True)),
        )
        # The same with the old config is a plain replay: nothing differs, nothing is called.
        same = await engines[0].run(
            Submission("calculate 6 * 7"), Execution("same", lineage=Lineage(replay_of="parent"))
        )
    finally:
        for engine in engines:
            engine.stop()
        await store.close()
    assert parent.status == fork.status == same.status == RunStatus.SUCCEEDED
    texts = [
        sequence_diagram(r.spans, detail="full", comparable=True).text.splitlines()
        for r in (parent, fork, same)
    ]
    assert texts[2] == texts[0]
    first = next(i for i, (a, b) in enumerate(zip(texts[0], texts[1], strict=False)) if a != b)
    # Identical up to the analyst's first model call, whose request (instructions) changed.
    assert "delegate_to_analyst" in "\n".join(texts[0][:first])
    assert "tok" in texts[1][first] and texts[1][first] != texts[0][first], texts[1][first]
    # The fork called the model only for the analyst, whose requests changed; the coordinator's
    # steps came from the record (its requests were the same).
    fork_calls = calls["after"].read_text().splitlines()
    assert len(fork_calls) == 2 and len(calls["before"].read_text().splitlines()) == 4
    assert fork.output == parent.output


def _walk(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [n for node in nodes for n in (node, *_walk(node["children"]))]


async def test_a_fork_from_a_chosen_step_goes_live_there(api: str) -> None:
    first = (await submit(api, {"task": "calculate 6 * 7", "agent": "coordinator"})).json()
    original = await _answer(api, first["id"])
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        spans = _walk((await client.get(f"/v1/runs/{first['id']}/trace")).json()["spans"])
        analyst = next(s for s in spans if s["name"] == "invoke_agent analyst")
        fork_point = next(s for s in spans if s["parent_span_id"] == analyst["span_id"])
        assert fork_point["name"].startswith("chat ")  # the analyst's first model call
        answer = await client.post(
            f"/v1/runs/{first['id']}/fork", json={"from_span": fork_point["span_id"]}
        )
        assert answer.status_code == 202, answer.text
        assert answer.json()["fork"] is True and answer.json()["replay_of"] == first["id"]
        forked = await _answer(api, answer.json()["id"])
        forked_spans = _walk((await client.get(f"/v1/runs/{forked['id']}/trace")).json()["spans"])
        # From the coordinator's first model call: it, and the analyst it then calls, go live.
        coordinator = next(s for s in spans if s["name"] == "invoke_agent coordinator")
        start = next(s for s in spans if s["parent_span_id"] == coordinator["span_id"])
        answer = await client.post(
            f"/v1/runs/{first['id']}/fork", json={"from_span": start["span_id"]}
        )
        from_start = await _answer(api, answer.json()["id"])
        trace = (await client.get(f"/v1/runs/{from_start['id']}/trace")).json()
        from_start_spans = _walk(trace["spans"])
        # A span that is not a step of the record, and one that is no span id at all.
        root = spans[0]["span_id"]
        refused = await client.post(f"/v1/runs/{first['id']}/fork", json={"from_span": root})
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["code"] == "not_replayable"
        bad = await client.post(f"/v1/runs/{first['id']}/fork", json={"from_span": "nope"})
        assert bad.status_code == 422, bad.text
    assert forked["status"] == "succeeded" and forked["output"] == original["output"]

    def replayed(agent: str, spans: list[dict[str, Any]]) -> list[bool]:
        parent = {s["span_id"]: s for s in spans}
        return [
            bool(s["attributes"].get("baton.step.replayed"))
            for s in spans
            if s["name"].startswith("chat ")
            and parent[s["parent_span_id"]]["name"] == f"invoke_agent {agent}"
        ]

    # Before the fork point from the record; the analyst live from its first model call; the
    # coordinator's last call asks the same as recorded (the analyst answered the same).
    assert replayed("analyst", forked_spans) == [False, False]
    assert replayed("coordinator", forked_spans) == [True, True]
    assert from_start["status"] == "succeeded"
    assert replayed("coordinator", from_start_spans) == [False, False]
    assert replayed("analyst", from_start_spans) == [False, False]


PARALLEL = """
name: parallel
agents:
  - name: lead
    delegates: [left, right]
    model:
      name: baton/scripted
      params:
        calls_file: "{calls}/lead.txt"
        replies:
          - tool_calls:
              - {{name: delegate_to_left, arguments: {{task: the left side}}}}
              - {{name: delegate_to_right, arguments: {{task: the right side}}}}
          - {{content: both sides done}}
  - name: left
    description: The left side.
    model: {{name: baton/offline, params: {{calls_file: "{calls}/left.txt"}}}}
  - name: right
    description: The right side.
    model: {{name: baton/offline, params: {{calls_file: "{calls}/right.txt"}}}}
"""


async def test_a_fork_from_a_delegation_keeps_everything_before_it_and_runs_it_live(
    ray_cluster: Any, tmp_path: Path
) -> None:
    # lead asks left and right at once (one model step); a fork from the delegation to right
    # keeps lead's model reply that asked for it and the left branch (they did not wait for
    # it) from the record, and runs right live, and what lead does after it.
    from orchestrator.engine import Engine
    from orchestrator.store import absolute_store_url
    from tests.testkit import config

    store_url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    store = await RunStore.open(store_url)
    engine = Engine(
        config(PARALLEL.format(calls=tmp_path)),
        PoolOptions(namespace="baton-tests", store_url=absolute_store_url(store_url)),
    )

    def calls(agent: str) -> int:
        path = tmp_path / f"{agent}.txt"
        return len(path.read_text().splitlines()) if path.exists() else 0

    try:
        engine.start()
        for run_id in ("parent", "fork"):
            await store.add(Submission("both sides"), RunMeta(run_id, "parallel", {}))
        parent = await engine.run(Submission("both sides"), Execution("parent"))
        assert parent.status == RunStatus.SUCCEEDED, parent.error
        before = {agent: calls(agent) for agent in ("lead", "left", "right")}
        [to_right] = [s for s in parent.spans if s["name"] == "execute_tool delegate_to_right"]
        point = ForkPoint(span_id="", step=str(to_right["attributes"]["baton.step"]), label="")
        fork = await engine.run(
            Submission("both sides"),
            Execution("fork", lineage=Lineage(replay_of="parent", fork=True, fork_from=point)),
        )
    finally:
        engine.stop()
        await store.close()
    assert fork.status == RunStatus.SUCCEEDED, fork.error
    live = {agent: calls(agent) - before[agent] for agent in ("lead", "left", "right")}
    # lead's first reply and the left branch came from the record; right ran again, live, and
    # lead's answer after it.
    assert live == {"lead": 1, "left": 0, "right": before["right"]}, live

    def replayed(agent: str) -> list[bool]:
        by_id = {s["span_id"]: s for s in fork.spans}
        return [
            bool(s["attributes"].get("baton.step.replayed"))
            for s in fork.spans
            if s["name"].startswith("chat ")
            and by_id[s["parent_span_id"]]["name"] == f"invoke_agent {agent}"
        ]

    assert replayed("lead") == [True, False]
    assert all(replayed("left")) and not any(replayed("right"))
