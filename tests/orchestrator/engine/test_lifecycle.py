"""Runs on the session's real local Ray instance, agents as real actors."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest
import ray

from agents.core.messages import RunStatus
from agents.ray.pool import PoolOptions
from orchestrator.engine import Engine, Execution, Submission
from orchestrator.system.config import AgentSystem
from tests.openai_server import FakeOpenAI
from tests.snapshots import assert_snapshot, tree_text
from tests.testkit import config, node, until_written, wait_for_event

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.long, pytest.mark.heavy]

StartEngine = Callable[..., Engine]


@pytest.fixture
def start_engine(ray_address: str) -> Iterator[StartEngine]:
    engines: list[Engine] = []

    def start(system: AgentSystem, **options: Any) -> Engine:
        engine = Engine(system, PoolOptions(namespace="baton-tests"), **options)
        engine.start()
        engines.append(engine)
        return engine

    yield start
    for engine in engines:
        engine.stop()


# The scenarios of this module as one team, started once (an agent host costs seconds of CPU
# to start): each test enters it at its own agent. Agents the tests kill, block or count
# replicas of have actors of their own. `max_depth: 2` is the depth test's; cycles are allowed
# for the cycle test (the cycle is refused before the depth).
TEAM = """
    name: engine-scenarios
    allow_cycles: true
    limits: {{max_depth: 2, max_steps: 1000}}
    agents:
      - {{name: hub, delegates: [w1, w2, w3, w4]}}
      - &worker {{name: w1, description: survey worker,
                 model: {{name: baton/offline, params: {{latency_ms: 400}}}}}}
      - {{<<: *worker, name: w2}}
      - {{<<: *worker, name: w3}}
      - {{<<: *worker, name: w4}}

      - {{name: a, delegates: [b], description: relay}}
      - {{name: b, delegates: [c], description: relay}}
      - {{name: c, description: relay}}

      - {{name: sales, delegates: [support], description: handles customer questions}}
      - {{name: support, delegates: [sales], description: handles customer problems}}

      - name: spender
        delegates: [helper]
        model:
          name: baton/scripted
          params:
            repeat_last: true
            replies: [{{tool_calls: [{{name: delegate_to_helper, arguments: {{task: more}}}}]}}]
      - {{name: helper, model: {{name: baton/scripted, params: {{replies: [{{content: done}}]}}}}}}

      - name: looper
        tools: [tests.testkit:stamp]
        model:
          name: baton/scripted
          params:
            latency_ms: 50
            repeat_last: true
            replies: [{{tool_calls: [{{name: stamp, arguments: {{text: tick}}}}]}}]

      - {{name: boss, delegates: [slowpoke], description: boss}}
      - name: slowpoke
        description: slow archive search
        tools: [tests.testkit:slow_step]
        ray: {{max_concurrency: 2}}   # its own process: killing it spares the others
        model:
          name: baton/scripted
          params:
            replies: [{{tool_calls: [{{name: slow_step, arguments: {{seconds: 60}}}}]}}]

      - name: remote
        tools: [configs.tools:calculate]
        model:
          name: openai/gpt-4o-mini
          params: {{api_base: "{fake_url}", api_key: sk-test}}
{diggers}
      - name: adder
        description: arithmetic
        tools: [configs.tools:calculate]
        ray: {{replicas: 2}}
"""

DIGGER = """
      - {{name: lead_{key}, delegates: [digger_{key}], description: leads the search}}
      - name: digger_{key}
        description: deep archive search
        tools: [tests.testkit:slow_touch]
        ray: {{isolate: {isolate}}}
        model:
          name: baton/scripted
          params:
            replies:
              - tool_calls:
                  - {{name: slow_touch, arguments: {{path: "{marker}", seconds: 1.5}}}}
              - {{content: found it}}
"""


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    """An OpenAI-compatible server on loopback: `remote`'s provider."""
    server = FakeOpenAI("calculate", {"expression": "2 ** 10"})
    yield server
    server.close()


@pytest.fixture(scope="module")
def markers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("markers")


@pytest.fixture(scope="module")
def team(ray_address: str, fake: FakeOpenAI, markers: Path) -> Iterator[Engine]:
    diggers = "".join(
        DIGGER.format(key=key, isolate=str(isolate).lower(), marker=markers / key)
        for key, isolate in (("shared", False), ("apart", True))
    )
    engine = Engine(
        config(TEAM.format(fake_url=fake.base_url, diggers=diggers)),
        PoolOptions(namespace="baton-tests"),
    )
    engine.start()
    yield engine
    engine.stop()


async def test_a_task_flows_through_three_levels_of_delegation(default_engine: Engine) -> None:
    result = await default_engine.run(
        Submission("Research the history of Ray, check the facts, and calculate 17 * 23 + 4")
    )
    assert result.status == RunStatus.SUCCEEDED
    assert result.tree is not None
    assert {c.agent for c in result.tree.children} == {"researcher", "analyst"}
    fact_checker = node(result.tree, "researcher", "fact_checker")
    assert fact_checker.status == RunStatus.SUCCEEDED
    assert "calculate: 395" in (result.output or "")
    assert "RISELab" in (result.output or "")  # the researcher's function tool ran
    assert result.usage.model_calls == sum(n.usage.model_calls for n in result.tree.walk()) == 7
    # The agents have no `ray:` options: all ran in the team's one shared host.
    actors = {n.agent: n.actor or "" for n in result.tree.walk()}
    assert {tuple(a.rsplit(".", 2)[1:]) for a in actors.values()} == {("_shared", "0")}


async def test_auto_routing_sends_the_task_to_the_matching_specialist(
    default_engine: Engine,
) -> None:
    result = await default_engine.run(Submission("calculate 6 * 7", agent="auto"))
    assert result.entry_agent == "analyst"
    assert result.routing is not None and result.routing.scores["analyst"] > 0
    assert "calculate: 42" in (result.output or "")


async def test_parallel_delegations_really_overlap_in_time(team: Engine) -> None:
    result = await team.run(Submission("run the survey", agent="hub"))
    assert result.status == RunStatus.SUCCEEDED and result.tree is not None
    workers = result.tree.children
    assert sorted(w.agent for w in workers) == ["w1", "w2", "w3", "w4"]
    latest_start = max(w.started_at for w in workers)
    earliest_end = min(w.started_at + w.duration_s for w in workers)
    assert latest_start < earliest_end, "the four delegations did not overlap"
    assert result.duration_s < 4 * 0.4


async def test_depth_limit_refusal_is_seen_by_the_calling_model(team: Engine) -> None:
    result = await team.run(Submission("relay this message", agent="a"))
    assert result.tree is not None
    b = node(result.tree, "b")
    assert [(r.reason, r.message) for r in b.refusals] == [
        ("depth", "depth limit 2 reached: a -> b")
    ]
    assert '"reason": "depth"' in (b.output or "")  # the model read the structured error
    assert result.status == RunStatus.SUCCEEDED
    refused = next(s for s in result.spans if s["name"] == "execute_tool delegate_to_c")
    assert refused["status"] == "ERROR"
    assert [e["name"] for e in refused["events"]] == ["delegation_refused"]
    assert refused["events"][0]["attributes"]["baton.refusal.reason"] == "depth"


async def test_a_delegation_back_up_the_chain_hands_control_back_across_actors(
    team: Engine,
) -> None:
    result = await team.run(Submission("a customer has questions", agent="sales"))
    assert result.status == RunStatus.SUCCEEDED and result.tree is not None
    support = node(result.tree, "support")
    # Support named sales, up its chain: no second invocation of sales (no cycle), its turn
    # ended handing control back, and sales went on to answer.
    assert support.refusals == [] and support.children == []
    assert support.handed_back_to == "sales"
    assert sum(s["name"] == "invoke_agent sales" for s in result.spans) == 1


async def test_the_token_budget_stops_a_model_that_always_delegates(team: Engine) -> None:
    result = await team.run(Submission("go", agent="spender", token_budget=600))
    assert result.status == RunStatus.BUDGET_EXCEEDED
    assert "token budget 600 spent" in (result.error or "")
    assert result.tree is not None and len(result.tree.children) >= 2
    # Checked before each model call: the overshoot is at most one call per branch.
    assert result.usage.total_tokens < 600 + 400


async def test_the_deadline_stops_a_model_that_always_calls_a_tool(team: Engine) -> None:
    result = await team.run(Submission("loop", agent="looper", deadline_s=1.0))
    assert result.status == RunStatus.LIMIT_EXCEEDED
    assert "deadline" in (result.error or "")
    assert result.duration_s < 3.0
    assert result.tree is not None and result.tree.steps > 3


async def test_an_agent_at_its_limit_says_where_it_runs_and_cancels(
    team: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where agents run (`GET /v1/agents`) and cancelling are not held behind the calls that fill
    # `max_concurrency` (2); Ray's cancel dropped (ray-project/ray#52628): the host's stops them.
    monkeypatch.setattr(ray, "cancel", lambda *_, **__: None)
    ids = ("full-1", "full-2")
    jobs = [
        asyncio.ensure_future(team.run(Submission("search", agent="slowpoke"), Execution(i)))
        for i in ids
    ]
    for run_id in ids:
        await wait_for_event(team, run_id, "tool_started", "slowpoke")
    rows = [r for r in await team.placement(timeout_s=10) if r["agent"] == "slowpoke"]
    assert [(r["state"], r.get("inflight"), r.get("pid", 0) > 0) for r in rows] == [
        ("alive", 2, True)
    ], rows
    assert all(team.cancel(run_id) for run_id in ids)
    for job in jobs:
        assert (await asyncio.wait_for(job, timeout=15)).status == RunStatus.CANCELLED


async def test_a_killed_sub_agent_becomes_a_tool_error_not_a_hang(team: Engine) -> None:
    engine = team
    job = asyncio.ensure_future(
        engine.run(Submission("search the archive", agent="boss"), Execution("kill-me"))
    )
    await wait_for_event(engine, "kill-me", "tool_started", "slowpoke")
    ray.kill(engine.pool.actors["slowpoke"][0], no_restart=True)
    result = await asyncio.wait_for(job, timeout=30)
    assert result.tree is not None
    slowpoke = node(result.tree, "slowpoke")
    assert slowpoke.status == RunStatus.FAILED
    assert "is unavailable" in (slowpoke.error or "")
    assert result.status == RunStatus.SUCCEEDED  # boss recovered with the tool error in hand
    assert "ended failed" in (result.output or "")
    # What boss's process handed down with the call, it sent again when the call failed (the
    # dead process may have sent it first, as it did here): the run records it once.
    events, _ = await engine.ledger.events("kill-me")
    started = [e.agent for _, e in events if e.type == "agent_started"]
    assert sorted(started) == ["boss", "slowpoke"]
    assert len([e for _, e in events if e.type == "model_finished"]) == 3
    # The dead actor's own span died with it; the caller recorded what it saw, in the trace,
    # and the model call the actor had finished before it died is there, under it.
    lost = [s for s in result.spans if s["name"] == "invoke_agent slowpoke"]
    assert len(lost) == 1 and lost[0]["status"] == "ERROR"
    assert lost[0]["attributes"]["error.type"] in ("ActorDiedError", "RayActorError")
    done = [s for s in result.spans if s["parent_span_id"] == lost[0]["span_id"]]
    assert [s["name"] for s in done] == ["chat scripted"]
    assert done[0]["attributes"]["gen_ai.usage.output_tokens"] > 0
    assert len({s["trace_id"] for s in result.spans}) == 1
    # (Token counts left out: the boss reads the Ray error, whose wording varies.)
    assert_snapshot("killed_actor.tree", tree_text(result.spans, tokens=False))


async def test_litellm_talks_to_an_openai_compatible_server_over_http(
    team: Engine, fake: FakeOpenAI
) -> None:
    # A model litellm has a local price for, served by the fake: the run has a cost.
    result = await team.run(Submission("what is two to the tenth?", agent="remote", stream=True))
    assert result.status == RunStatus.SUCCEEDED, result.error
    assert result.output == "The tool said 1024"
    assert [r["body"]["stream"] for r in fake.requests] == [True, True]  # streamed, joined
    first = fake.requests[0]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-test"
    tools = first["body"]["tools"]  # type: ignore[index]
    assert tools[0]["function"]["name"] == "calculate"
    assert result.usage.input_tokens == 22 and result.usage.output_tokens == 14
    price = litellm.model_cost["gpt-4o-mini"]
    per_call = 11 * price["input_cost_per_token"] + 7 * price["output_cost_per_token"]
    assert result.usage.cost_usd == pytest.approx(2 * per_call)
    chats = [s for s in result.spans if s["name"] == "chat gpt-4o-mini"]
    assert [s["attributes"]["baton.usage.cost_usd"] for s in chats] == pytest.approx([per_call] * 2)
    assert chats[0]["attributes"]["gen_ai.provider.name"] == "openai"


@pytest.mark.parametrize("key", ["shared", "apart"], ids=["one host", "own actors"])
async def test_cancelling_a_run_stops_every_agent_working_on_it(
    team: Engine, markers: Path, key: str
) -> None:
    engine, marker, run_id = team, markers / key, f"cancel-me-{key}"
    job = asyncio.ensure_future(
        engine.run(Submission("search the archive", agent=f"lead_{key}"), Execution(run_id))
    )
    await wait_for_event(engine, run_id, "tool_started", f"digger_{key}")
    await until_written(marker.with_suffix(".started"), "the tool did not start")
    assert engine.cancel(run_id)
    result = await asyncio.wait_for(job, timeout=15)
    assert result.status == RunStatus.CANCELLED
    assert not engine.cancel(run_id)  # no longer in flight
    # The cancelled invocations' spans are kept, in one trace.
    names = sorted(s["name"] for s in result.spans)
    assert f"invoke_agent lead_{key}" in names and f"invoke_agent digger_{key}" in names
    assert "execute_tool slow_touch" in names and "invoke_workflow baton" in names
    assert len({s["trace_id"] for s in result.spans}) == 1
    # The sub-agent's tool was cancelled too: it never got to finish its wait.
    await until_written(marker.with_suffix(".cancelled"), "the tool was not cancelled", 10)
    assert not marker.exists()


async def test_an_agent_that_cannot_stop_is_abandoned_shortly_after_the_deadline(
    start_engine: StartEngine,
) -> None:
    engine = start_engine(
        config("""
        agents:
          - name: stuck
            tools: [tests.testkit:block_loop]
            model:
              name: baton/scripted
              params:
                replies: [{tool_calls: [{name: block_loop, arguments: {seconds: 8}}]}]
    """),
        entry_grace_s=0.5,
    )
    began = time.monotonic()
    result = await asyncio.wait_for(engine.run(Submission("get stuck", deadline_s=1.0)), timeout=10)
    assert result.status == RunStatus.LIMIT_EXCEEDED
    assert result.error == "stuck did not return within 0.5s after the deadline"
    # Abandoned 1.5 s in (the deadline, then the grace), its record settled within 5 s more
    # (its own items never come); the blocked tool would have returned at 8 s.
    assert time.monotonic() - began < 7.5
    # The run's first event was to ride with the agent's own, stuck with it: it is there.
    events, _ = await engine.ledger.events(result.run_id, 0)
    assert events[0][1].type == "run_started"


async def test_delegations_are_spread_over_an_agents_replicas(team: Engine) -> None:
    engine = team
    actors = set()
    for _ in range(4):
        result = await engine.run(Submission("calculate 1 + 1", agent="adder"))
        assert result.tree is not None and result.status == RunStatus.SUCCEEDED
        actors.add(result.tree.actor)
    assert len(actors) == 2
    assert all(
        a is not None and a.split(".")[-2:] in (["adder", "0"], ["adder", "1"]) for a in actors
    )


async def test_spans_from_every_process_join_one_trace_with_correct_parentage(
    default_engine: Engine,
) -> None:
    result = await default_engine.run(
        Submission("Research the history of Ray, check the facts, and calculate 17 * 23 + 4")
    )
    spans = result.spans
    by_id = {s["span_id"]: s for s in spans}
    assert len({s["trace_id"] for s in spans}) == 1
    assert len(by_id) == len(spans)
    # This (the driver's) process and the team's shared host: parentage holds across
    # processes and within one (agents in separate actors: tests/orchestrator/engine/test_hosts.py).
    pids = {s["resource"]["process.pid"] for s in spans}
    assert os.getpid() in pids and len(pids) == 2
    agents = [s for s in spans if s["name"].startswith("invoke_agent ")]
    assert sorted(s["attributes"]["gen_ai.agent.name"] for s in agents) == [
        "analyst",
        "coordinator",
        "fact_checker",
        "researcher",
    ]
    root = next(s for s in spans if s["parent_span_id"] is None)
    assert root["name"] == "invoke_workflow baton"
    for span in agents:
        parent = by_id[span["parent_span_id"]]
        agent = span["attributes"]["gen_ai.agent.name"]
        if agent == "coordinator":
            assert parent is root
        else:  # delegated: under the caller's execute_tool span, itself under the caller
            assert parent["name"] == f"execute_tool delegate_to_{agent}"
            caller = by_id[parent["parent_span_id"]]
            assert caller["name"].startswith("invoke_agent ")
            assert (
                span["attributes"]["baton.delegation.chain"][-2]
                == (caller["attributes"]["gen_ai.agent.name"])
            )
    chats = [s for s in spans if s["name"] == "chat offline"]
    assert len(chats) == result.usage.model_calls == 7
    assert sum(s["attributes"]["gen_ai.usage.input_tokens"] for s in chats) == (
        result.usage.input_tokens
    )
