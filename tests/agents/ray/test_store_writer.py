"""The ledger's writer at its own seam: steps and events into a real SQLite run store."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agents.core.events import AgentStarted
from agents.core.steps import Step
from agents.ray.store_writer import StoreWriter
from orchestrator.store.store import RunStore

pytestmark = pytest.mark.anyio


async def test_steps_and_events_are_stored_and_read_back_and_a_write_made_twice_counts_once(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    store = await RunStore.open(url)  # its migrations make the tables
    await store.add("r", "a task", agent=None, system="s", config={})
    writer = StoreWriter(url)
    try:
        for i in (1, 2, 3):
            writer.step("r", Step(invocation="inv", key=f"m{i}", kind="model", data={"i": i}))
        for seq in range(1, 6):
            writer.event("r", seq, AgentStarted(agent="a", seq=seq))
        assert await writer.sync()  # the barrier: all of it is stored when this returns
        steps, top = await writer.load("r")
        assert sorted(steps["inv"]) == ["m1", "m2", "m3"] and top == 5
        assert [seq for seq, _ in await writer.events("r", after=2)] == [3, 4, 5]
        # A batch sent again (its sender could not tell whether it arrived): stored once.
        writer.event("r", 5, AgentStarted(agent="a", seq=5))
        writer.step("r", Step(invocation="inv", key="m3", kind="model", data={"i": 3}))
        assert await writer.sync()
        assert len(await store.events("r")) == 5 and len(await store.steps("r")) == 3
    finally:
        await writer.close()
        await store.close()


async def test_a_write_that_fails_is_said_so_and_the_writer_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"  # no tables: every write fails
    writer = StoreWriter(url)
    try:
        with caplog.at_level(logging.ERROR, logger="agents.ray.store_writer"):
            writer.event("r", 1, AgentStarted(agent="a"))
            assert not await writer.sync()
        assert "could not be written" in caplog.text
        store = await RunStore.open(url)  # the store is back (migrated)
        try:
            writer.event("r", 2, AgentStarted(agent="a"))
            assert await writer.sync()
            assert [seq for seq, _ in await store.events("r")] == [2]
        finally:
            await store.close()
    finally:
        await writer.close()
