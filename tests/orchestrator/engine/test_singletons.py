"""The system's singletons other than the ledger, killed (SIGKILL) and restarted by Ray: the
supervisor watches its hosts again (a host killed after it is created again, its run resumes),
and the scaler scales them again (a burst grows a host after it)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import pytest
import ray
from ray.exceptions import RayActorError

from agents.core.messages import RunStatus
from orchestrator.engine import Engine, Execution, Submission
from tests.testkit import start

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.heavy]

# One agent, supervised (its actors detached, as `baton serve`'s) and autoscaled.
TEAM = """
name: singletons
supervision: {backoff_min_s: 0.2}
agents:
  - name: worker
    description: Takes a slow step.
    tools: [{function: "tests.testkit:slow_step", idempotent: true}]
    ray: {replicas: {min: 1, max: 2, target: 1, up_after_s: 0.5, down_after_s: 600}}
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: slow_step, arguments: {seconds: 1.5}}]}
          - {content: worked}
"""


async def _kill(actor: Any) -> int:
    """SIGKILL to an actor's process, as the kernel's OOM killer sends it; its pid."""
    pid: int = await actor.__ray_call__.remote(lambda _: os.getpid())
    os.kill(pid, signal.SIGKILL)
    return pid


async def _once_back(call: Any) -> Any:
    """A call's answer once the actor Ray restarts answers (within 60 s)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return await call()
        except RayActorError:
            assert time.monotonic() < deadline, "the actor never came back"
            await asyncio.sleep(0.1)


async def test_a_restarted_supervisor_and_scaler_take_their_hosts_up_again(
    started: list[Engine],
) -> None:
    engine = start(started, TEAM, detached=True)
    pool = engine.pool
    await _kill(pool.supervisor)
    await _kill(pool.scaler)
    # Restarted by Ray, each watches and scales the host it was told of in its last life.
    states = await _once_back(lambda: pool.supervisor.states.remote())
    assert [s["state"] for s in states.values()] == ["alive"], states
    _, scaled = await _once_back(lambda: pool.scaler.membership.remote(-1))
    assert scaled == {"worker": [0]}, scaled

    # A host killed now is created again by the restarted supervisor; its run resumes.
    run = asyncio.ensure_future(engine.run(Submission("work"), Execution("after-supervisor")))
    await asyncio.sleep(0.5)  # (the slow step under way)
    await _kill(pool.actors["worker"][0])
    result = await asyncio.wait_for(run, 90)
    assert result.status == RunStatus.SUCCEEDED and result.output == "worked", result.error
    states = await pool.supervisor.states.remote()
    assert [(s["state"], s["restarts"]) for s in states.values()] == [("alive", 1)], states

    # A burst grows the host: the restarted scaler decides.
    runs = [engine.run(Submission("work"), Execution(f"burst-{i}")) for i in range(4)]
    results = await asyncio.wait_for(asyncio.gather(*runs), 120)
    assert {r.status for r in results} == {RunStatus.SUCCEEDED}
    decisions = await pool.scaler.history.remote()
    assert any((d["host"], d["before"], d["after"]) == ("worker", 1, 2) for d in decisions)


# Two model calls an hour through the gate; a call it would hold past a second is not made.
GATED = """
name: gated-singleton
gates:
  - {name: scripted-provider, models: [baton/scripted], requests: 2, per_s: 3600, max_wait_s: 1}
agents:
  - name: worker
    description: Stamps.
    tools: [tests.testkit:stamp]
    model:
      name: baton/scripted
      params: {replies: [{tool_calls: [{name: stamp, arguments: {text: a}}]}, {content: stamped}]}
"""


async def test_a_restarted_gates_actor_holds_the_gates_it_was_told_of(
    started: list[Engine],
) -> None:
    engine = start(started, GATED)
    gates = engine.pool.gates
    assert gates is not None
    try:
        await _kill(gates.handle)
        # (Restarted by Ray with the gate; calls on their way are made again there.)
        first = await asyncio.wait_for(engine.run(Submission("stamp"), Execution("gated-1")), 60)
        assert first.status == RunStatus.SUCCEEDED and first.output == "stamped", first.error
        second = await asyncio.wait_for(engine.run(Submission("stamp"), Execution("gated-2")), 60)
        assert second.status == RunStatus.FAILED, second
        assert "scripted-provider" in str(second.error), second.error
    finally:  # the namespace's gates actor is the session's: the next one starts without it
        ray.kill(gates.handle, no_restart=True)
