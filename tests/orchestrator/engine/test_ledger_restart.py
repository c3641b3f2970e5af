"""A ledger shard's process killed mid-run (Ray restarts it): the restarted shard takes the run
up from the store, and the run ends as an unbroken run of the same team (on the other shard)
does, with every event and span, its at-most-once effect made once, its approval asked once and
its spending counted once."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from agents.core.messages import RunStatus
from agents.core.waits import Resolution
from agents.ledger import shard_of
from agents.ledger.spend import utc_day
from agents.ray.pool import PoolOptions
from orchestrator.engine import Execution, Submission
from orchestrator.store import RunMeta, RunStore

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.heavy]

# The helper counts parcels (at most once), has a stamp approved, then takes a slow step.
TEAM = """
name: ledger-restart
env: [PARCELS_FILE]
agents:
  - name: boss
    delegates: [helper]
    description: boss
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: delegate_to_helper, arguments: {task: help}}]}
          - {content: done}
  - name: helper
    description: helps
    tools:
      - tests.testkit:count_parcels
      - {function: tests.testkit:stamp, confirm: true}
      - {function: "tests.testkit:slow_step", idempotent: true}
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: count_parcels, arguments: {task: parcels}}]}
          - {tool_calls: [{name: stamp, arguments: {text: the parcels}}]}
          - {tool_calls: [{name: slow_step, arguments: {seconds: 1}}]}
          - {content: helped}
"""


async def _kill(actor: Any) -> None:
    """SIGKILL to an actor's process, as the kernel's OOM killer sends it."""
    os.kill(await actor.__ray_call__.remote(lambda _: os.getpid()), signal.SIGKILL)


async def test_a_ledger_killed_mid_run_is_taken_up_again_and_loses_nothing(
    ray_cluster: Any, tmp_path: Path
) -> None:
    from orchestrator.engine import Engine
    from orchestrator.store import absolute_store_url
    from tests.testkit import config

    parcels = tmp_path / "parcels.txt"
    store_url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    store = await RunStore.open(store_url)
    system = config(TEAM)
    options = PoolOptions(
        namespace="baton-tests",
        env={"PARCELS_FILE": str(parcels)},
        store_url=absolute_store_url(store_url),
        ledger_shards=2,
    )
    engine = Engine(system, options)
    # The two runs' ids map to different shards; the second's is killed under it.
    assert (shard_of("intact", 2), shard_of("torn", 2)) == (0, 1)
    kept: dict[str, tuple[list[str], list[str]]] = {}
    tokens = 0
    try:
        engine.start()
        for run_id in ("intact", "torn"):
            await store.add(Submission("help"), RunMeta(run_id, system.config.name, {}))
            job = asyncio.ensure_future(engine.run(Submission("help"), Execution(run_id)))
            for _ in range(600):  # until the stamp waits for approval (the parcels counted)
                if waiting := await engine.ledger.waiting(run_id):
                    break
                await asyncio.sleep(0.05)
            if run_id == "torn":  # its shard dies while the approval waits
                await _kill(engine.pool.ledger_handles[1])
                waiting = await engine.ledger.waiting(run_id)  # (known again, from the store)
            [wait] = waiting
            decided = await engine.ledger.resolve(run_id, wait.call_id, Resolution.decision(True))
            assert decided[0] == "decided", decided
            result = await asyncio.wait_for(job, timeout=60)
            assert result.status == RunStatus.SUCCEEDED and result.output == "done", result.error
            events = [e.type for _, e in await store.events(run_id)]
            kept[run_id] = (events, sorted(s["name"] for s in result.spans))
            tokens += result.usage.input_tokens + result.usage.output_tokens
        # Each reply's spending is in the day's sums once.
        day = await store.spending(utc_day())
        assert sum(r["input_tokens"] + r["output_tokens"] for r in day) == tokens > 0
    finally:
        engine.stop()
        await store.close()
    # Every event in its place, every span; the approval asked once; the parcels counted once.
    assert kept["torn"] == kept["intact"]
    assert kept["torn"][0].count("approval_requested") == 1
    assert parcels.read_text().splitlines() == ["parcels", "parcels"]  # (one a run)
