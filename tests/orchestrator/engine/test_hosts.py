"""Agent hosts: agents that ask nothing of Ray share one actor process, and it shows nowhere
but in the process count (same results, events, spans and diagram as agents apart)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from agents.core.messages import RunStatus
from agents.core.placement import SHARED_HOST, own_actors_reason, plan_hosts
from agents.ray.pool import PoolOptions
from orchestrator.engine import Engine, Execution, Submission
from orchestrator.engine.results import RunResult
from orchestrator.system.config import load_config, parse_config
from tests.snapshots import tree_text
from tests.testkit import causal_breaks
from tracing.sequence import sequence_diagram

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.long, pytest.mark.heavy]

TASK = "Research the history of Ray, check the facts, and calculate 17 * 23 + 4"


def test_agents_without_ray_options_share_the_host_and_the_others_say_why_not() -> None:
    team = yaml.safe_load(Path("configs/default.yaml").read_text())
    team["agents"][3]["ray"] = {"replicas": 2}  # the analyst
    team["agents"][4]["ray"] = {"isolate": True}  # the writer
    agents = parse_config(yaml.safe_dump(team), "team.yaml").config.agents
    plan = plan_hosts(agents)
    assert [(h.name, h.agents, h.ray.replicas) for h in plan] == [
        (SHARED_HOST, ("coordinator", "researcher", "fact_checker"), 1),
        ("analyst", ("analyst",), 2),
        ("writer", ("writer",), 1),
    ]
    reasons = {a.name: own_actors_reason(a) for a in agents}
    assert reasons == {
        "coordinator": None,
        "researcher": None,
        "fact_checker": None,
        "analyst": "replicas: 2",
        "writer": "isolate: True",
    }
    # The default team asks nothing of Ray: one host for all (in as many replicas as asked).
    default = plan_hosts(load_config(Path("configs/default.yaml")).config.agents)
    assert [(h.name, len(h.agents), h.ray.replicas) for h in default] == [(SHARED_HOST, 5, 1)]
    assert plan_hosts(agents, shared_replicas=3)[0].ray.replicas == 3


def test_the_service_and_the_cli_load_litellm_the_protocol_sdks_and_networkx_when_needed() -> None:
    # Only agent hosts need litellm: it would cost every `baton serve` and `baton run` 2.4 s of
    # start-up and about 150 MB. The MCP and A2A SDKs wait for the first request to `/mcp`,
    # `/a2a` or the agent card (1.5 s of the service's start otherwise). networkx waits for a
    # config to check: `baton runs`, `baton show` and `baton --help` never need it (0.1 s).
    probe = (
        "import sys, orchestrator.api.app, orchestrator.cli, orchestrator.engine.lifecycle, "
        "agents.ray.pool, agents.ray.ledger_actor; "
        "found = [m for m in ('litellm', 'mcp', 'a2a', 'networkx') if m in sys.modules]; "
        "sys.exit(str(found) if found else 0)"
    )
    done = subprocess.run([sys.executable, "-c", probe], check=False, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-500:]


def _isolated_default_team() -> str:
    """configs/default.yaml with every agent in actors of its own."""
    data = yaml.safe_load(Path("configs/default.yaml").read_text())
    data["name"] = "apart"
    for agent in data["agents"]:
        agent["ray"] = {**agent.get("ray", {}), "isolate": True}
    return yaml.safe_dump(data)


@pytest.fixture(scope="module")
def apart(ray_address: str) -> Iterator[Engine]:
    engine = Engine(
        parse_config(_isolated_default_team(), "apart.yaml"), PoolOptions(namespace="baton-tests")
    )
    engine.start()
    yield engine
    engine.stop()


async def test_a_shared_host_runs_the_team_in_one_process_traced_as_if_apart(
    default_engine: Engine, apart: Engine
) -> None:
    shared = await default_engine.run(Submission(TASK), Execution("same-run"))
    separate = await apart.run(Submission(TASK), Execution("same-run"))
    assert shared.status == separate.status == RunStatus.SUCCEEDED
    assert shared.output == separate.output
    assert shared.usage == separate.usage

    assert len(set(_pids(shared).values())) == 1  # the whole team in one process
    assert len(set(_pids(separate).values())) == 4  # each agent in a process of its own
    # The result tree holds every invocation, however many processes it came up through.
    for result in (shared, separate):
        assert result.tree is not None
        assert sorted(node.agent for node in result.tree.walk()) == sorted(_pids(result))

    # The same spans, parentage and attributes (the actor names aside), the same diagram.
    def shape(result: RunResult) -> tuple[str, str]:
        diagram = sequence_diagram(result.spans, title="Run").text
        return tree_text(result.spans), re.sub(r"\d+(\.\d+)? (ms|s)\b", "N ms", diagram)

    assert shape(shared) == shape(separate)

    # The same events, agent by agent.
    async def events(engine: Engine, result: RunResult) -> Counter[tuple[str, str]]:
        found, _ = await engine.ledger.events(result.run_id)
        return Counter((e.type, getattr(e, "agent", "") or "") for _, e in found)

    assert await events(default_engine, shared) == await events(apart, separate)


def _pids(result: RunResult) -> dict[str, int]:
    """The process each agent of the run ran in."""
    return {
        s["attributes"]["gen_ai.agent.name"]: s["resource"]["process.pid"]
        for s in result.spans
        if s["name"].startswith("invoke_agent ")
    }


@pytest.fixture
def twins(ray_address: str) -> Iterator[Engine]:
    """The default team with its shared host in two replicas."""
    team = yaml.safe_load(Path("configs/default.yaml").read_text())
    team |= {"name": "twins", "shared_host": {"replicas": 2}}
    engine = Engine(
        parse_config(yaml.safe_dump(team), "twins.yaml"), PoolOptions(namespace="baton-tests")
    )
    engine.start()
    yield engine
    engine.stop()


async def test_a_replicated_shared_host_spreads_runs_and_keeps_each_run_in_one_process(
    twins: Engine,
) -> None:
    results = await asyncio.gather(*(twins.run(Submission(TASK)) for _ in range(4)))
    assert {r.status for r in results} == {RunStatus.SUCCEEDED}
    processes = [set(_pids(r).values()) for r in results]
    assert [len(p) for p in processes] == [1, 1, 1, 1]  # delegations stay in the replica
    assert len(set.union(*processes)) == 2  # the runs were spread over both
    rows = await twins.placement()
    assert len(rows) == 10 and len({r["pid"] for r in rows}) == 2  # 5 agents, 2 replicas


async def test_placement_says_which_agents_share_a_process(default_engine: Engine) -> None:
    rows = {r["agent"]: r for r in await default_engine.placement()}
    assert rows["coordinator"]["actor"] == rows["writer"]["actor"]
    assert rows["coordinator"]["pid"] == rows["fact_checker"]["pid"]
    assert sorted(rows["writer"]["shares_with"]) == [
        "analyst",
        "coordinator",
        "fact_checker",
        "researcher",
    ]


BUSY_BOSS = """
name: busy
agents:
  - name: boss
    ray: {isolate: true}
    delegates: [h1, h2, h3]
    tools: [tests.testkit:block_loop]
    model:
      name: baton/scripted
      params:
        replies:
          - tool_calls:
              - {name: delegate_to_h1, arguments: {task: one}}
              - {name: delegate_to_h2, arguments: {task: two}}
              - {name: delegate_to_h3, arguments: {task: three}}
              - {name: block_loop, arguments: {seconds: 0.25}}
          - {content: done}
  - {name: h1, description: helper}
  - {name: h2, description: helper}
  - {name: h3, description: helper}
"""


async def test_a_busy_caller_s_events_and_its_callees_reach_consumers_in_causal_order(
    ray_address: str,
) -> None:
    # The boss's process is busy (its event loop blocked) right after it delegated to three
    # helpers in another process: their events reach the ledger before the boss's own
    # `tool_started` do. Several runs at once (their blocks add up: 1 s, within the ledger's
    # 3 s hold on a loaded machine); every consumer reads the ledger's order.
    engine = Engine(parse_config(BUSY_BOSS, "busy.yaml"), PoolOptions(namespace="baton-tests"))
    engine.start()
    try:
        results = await asyncio.gather(*(engine.run(Submission("go")) for _ in range(4)))
        for result in results:
            assert result.status == RunStatus.SUCCEEDED, result.error
            found, _ = await engine.ledger.events(result.run_id)
            events = [e for _, e in found]
            assert sum(e.type == "agent_started" for e in events) == 4
            assert causal_breaks(events) == [], result.run_id
    finally:
        engine.stop()


LATE_MAIL = """
name: late
tracing: {enabled: false}
agents:
  - name: boss
    ray: {isolate: true}
    delegates: [helper]
    tools: [tests.testkit:slow_ledger_mail]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: slow_ledger_mail, arguments: {seconds: 0.5}}]}
          - {tool_calls: [{name: delegate_to_helper, arguments: {task: help}}]}
          - {content: done}
  - name: helper
    description: helps
    tools: [tests.testkit:slow_ledger_mail]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: slow_ledger_mail, arguments: {seconds: 2}}]}
          - {content: helped}
"""


async def test_a_run_is_closed_only_once_its_last_events_have_come(ray_address: str) -> None:
    # Both agents' processes (the entry's and a sub-agent's in another host) send their last
    # events to the ledger after their results (the sub-agent's last of all): the run's event
    # log is closed (and `run_finished` sent) once they are in, tracing off (no waiting for
    # spans either).
    engine = Engine(parse_config(LATE_MAIL, "late.yaml"), PoolOptions(namespace="baton-tests"))
    engine.start()
    try:
        result = await engine.run(Submission("go"))
        assert result.status == RunStatus.SUCCEEDED, result.error
        found, state = await engine.ledger.events(result.run_id)
        assert state == "closed"
        events = [e for _, e in found]
        # Each agent: its start and end, a model call per step, a tool call between steps.
        expected = Counter({"run_started": 1, "run_finished": 1})
        for steps in (3, 2):  # boss, helper
            expected.update(agent_started=1, agent_finished=1, model_started=steps)
            expected.update(model_finished=steps, tool_started=steps - 1, tool_finished=steps - 1)
        assert Counter(e.type for e in events) == expected
        assert events[-1].type == "run_finished"
        assert causal_breaks(events) == []
    finally:
        engine.stop()
