"""A run taken over by another instance lives on in its newer life: the ledger refuses to end
or release it for an older one (a service that paused past its lease and woke up)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import ray

from agents.core.events import RunFinished, RunStarted
from agents.core.messages import RunStatus
from agents.ray.ledger_actor import LedgerActor
from agents.ray.wire import Closed, RunEnd, RunSettle, seal, unseal
from orchestrator.engine import Submission
from orchestrator.store import RunMeta
from orchestrator.store.store import RunStore

pytestmark = [pytest.mark.anyio, pytest.mark.ray]


def _end(status: str, output: str) -> dict[str, Any]:
    """A run's end as the values of its row."""
    return {
        "task": "a task", "status": status, "entry_agent": "a", "routing": None,
        "output": output, "error": None, "input_tokens": 0, "output_tokens": 0,
        "model_calls": 0, "cost_usd": 0.0, "unpriced_calls": 0, "started_at": 1.0,
        "finished_at": 2.0, "duration_s": 1.0, "tree": None, "state": None,
    }  # fmt: skip


async def _finish(shard: Any, life: int, output: str) -> Closed:
    settle = RunSettle("r", {}, traced=False, epoch=life)
    final = RunFinished(status=RunStatus.SUCCEEDED, output=output)
    end = RunEnd("r", final, settle, _end("succeeded", output))
    return unseal(await shard.finish.remote(seal(end)), Closed)


async def test_an_older_life_of_a_run_may_neither_end_nor_release_it(
    ray_address: str, tmp_path: Path
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    store = await RunStore.open(url)
    await store.add(Submission("a task"), RunMeta("r", "s", {}))
    shard = LedgerActor.remote(url)  # type: ignore[attr-defined]
    try:
        # Its first life (0) began here; another instance resumed it as life 1.
        await shard.open.remote("r", None, RunStarted(agent="a"))
        await shard.open.remote("r", None, RunStarted(agent="a", epoch=1), 1)
        stale = await _finish(shard, 0, "the old life's answer")
        assert stale.superseded and not stale.recorded
        await shard.release.remote(seal(RunSettle("r", {}, traced=False, epoch=0)))
        _, state = await shard.events.remote("r")
        assert state == "open"  # neither ended nor released: life 1 goes on
        assert (await store.get("r")).status == RunStatus.QUEUED  # type: ignore[union-attr]
        ended = await _finish(shard, 1, "the new life's answer")
        assert ended.recorded and not ended.superseded
        stored = await store.get("r")
        assert stored is not None and stored.output == "the new life's answer"
        assert [e.type for _, e in await store.events("r")].count("run_finished") == 1
    finally:
        ray.kill(shard)
        await store.close()
