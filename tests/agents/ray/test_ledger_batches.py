"""A ledger shard answers a batch only once the batch is stored, so that a shard that dies in
between loses nothing: Ray makes the open call again to the shard it restarts."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
from pathlib import Path

import pytest
import ray

from agents.core.events import RunStarted
from agents.ray.ledger_actor import LedgerActor
from agents.ray.wire import Batch, seal
from orchestrator.engine import Submission
from orchestrator.store import RunMeta
from orchestrator.store.store import RunStore

pytestmark = [pytest.mark.anyio, pytest.mark.ray, pytest.mark.heavy]


def _stored_events(db: Path) -> int:
    with sqlite3.connect(db) as connection:
        (count,) = connection.execute(
            "SELECT count(*) FROM run_events WHERE run_id = 'r'"
        ).fetchone()
    return int(count)


async def test_a_batch_is_answered_once_stored_and_sent_again_to_a_restarted_shard(
    ray_address: str, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    url = f"sqlite+aiosqlite:///{db}"
    store = await RunStore.open(url)  # its migrations make the tables
    await store.add(Submission("a task"), RunMeta("r", "s", {}))
    await store.close()
    shard = LedgerActor.options(  # type: ignore[attr-defined]
        max_restarts=-1, max_task_retries=-1
    ).remote(url)
    try:
        pid = await shard.__ray_call__.remote(lambda _: os.getpid())
        # Another writer holds SQLite's write lock: the shard's write waits for it.
        lock = sqlite3.connect(db, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        batch = Batch([("r", RunStarted(agent="a"))], sender="p", number=1)
        sent = shard.emit_many.remote(seal(batch))
        ready, _ = await asyncio.to_thread(ray.wait, [sent], timeout=1.5)
        assert not ready, "the batch was answered before it was stored"
        os.kill(pid, signal.SIGKILL)  # the shard dies with the batch applied, not stored
        lock.execute("ROLLBACK")
        lock.close()
        await asyncio.wait_for(sent, timeout=60)  # made again to the restarted shard
        assert await shard.__ray_call__.remote(lambda _: os.getpid()) != pid
        assert await asyncio.to_thread(_stored_events, db) == 1
    finally:
        ray.kill(shard)
