"""The ledger's writer at its own seam: steps and events into a real SQLite run store."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agents.core.events import AgentStarted
from agents.core.messages import RunStatus
from agents.core.steps import Step
from agents.ledger.writer import StoreWriter
from orchestrator.engine import RunResult, Submission
from orchestrator.store import RunMeta, end_values
from orchestrator.store.store import RunStore
from tracing import SpanRecord

pytestmark = pytest.mark.anyio


async def test_steps_and_events_are_stored_and_read_back_and_a_write_made_twice_counts_once(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    store = await RunStore.open(url)  # its migrations make the tables
    await store.add(Submission("a task"), RunMeta("r", "s", {}))
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
        with caplog.at_level(logging.ERROR, logger="agents.ledger.writer"):
            writer.event("r", 1, AgentStarted(agent="a"))
            assert not await writer.sync()
        assert "could not be written" in caplog.text
        store = await RunStore.open(url)  # the store is back (migrated)
        try:
            await store.add(Submission("a task"), RunMeta("r", "s", {}))
            writer.event("r", 2, AgentStarted(agent="a"))
            assert await writer.sync()
            assert [seq for seq, _ in await store.events("r")] == [2]
        finally:
            await store.close()
    finally:
        await writer.close()


async def test_a_run_s_end_is_written_whole_with_its_spans(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    store = await RunStore.open(url)
    await store.add(Submission("a task"), RunMeta("r", "s", {}))
    writer = StoreWriter(url)
    try:
        result = RunResult(
            run_id="r",
            task="a task",
            entry_agent="a",
            status=RunStatus.SUCCEEDED,
            output="42",
            started_at=1.0,
            duration_s=2.0,
        )
        span = SpanRecord(
            trace_id="t" * 32,
            span_id="s" * 16,
            parent_span_id=None,
            name="invoke_workflow baton",
            kind="INTERNAL",
            start_ns=1,
            end_ns=2,
            status="OK",
            status_message=None,
            attributes={"baton.run.id": "r"},
            events=[],
            resource={},
        )
        writer.end("r", end_values(result), [span])
        assert await writer.sync()
        run = await store.get("r")
        assert run is not None and (run.status, run.output, run.finished_at) == (
            RunStatus.SUCCEEDED,
            "42",
            3.0,
        )
        assert await store.spans("r") == [span]
        with pytest.raises(ValueError, match="its end's columns; not: output"):
            writer.end("r", {k: v for k, v in end_values(result).items() if k != "output"}, [])
    finally:
        await writer.close()
        await store.close()


async def test_the_rows_of_a_run_removed_meanwhile_are_dropped_and_the_others_written(
    store_url: str,
) -> None:
    """A thread deleted just after its turn's end was announced: the turn's last rows are on
    their way. The store refuses them (no run), and the rest of their batch is stored."""
    store = await RunStore.open(store_url)
    await store.threads.create("t", {})
    await store.add(Submission("a task", thread_id="t"), RunMeta("gone", "s", {}))
    await store.add(Submission("a task"), RunMeta("kept", "s", {}))
    assert await store.threads.delete("t")
    writer = StoreWriter(store_url)
    try:
        for run_id in ("kept", "gone"):  # one batch: queued before the writer wakes
            writer.step(run_id, Step(invocation="inv", key="m1", kind="model", data={}))
            writer.event(run_id, 1, AgentStarted(agent="a"))
        assert await writer.sync()  # no failure: the batch was written
        assert [seq for seq, _ in await store.events("kept")] == [1]
        assert len(await store.steps("kept")) == 1
        assert await store.events("gone") == [] and await store.steps("gone") == []
    finally:
        await writer.close()
        await store.close()


async def test_a_row_the_store_refuses_fails_its_run_with_why_and_its_neighbours_are_kept(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A tool's error with U+0000 (PostgreSQL refuses it in text) is kept as U+FFFD; a value a
    column cannot hold (on PostgreSQL, a span name past 256 characters) fails its run, said why,
    and another run's rows of the same batch are all written."""
    store = await RunStore.open(store_url)
    for run_id in ("nul", "long", "neighbour"):
        await store.add(Submission("a task"), RunMeta(run_id, "s", {}))
    writer = StoreWriter(store_url)

    def ended(run_id: str, name: str, message: str) -> None:
        result = RunResult(
            run_id=run_id,
            task="a task",
            entry_agent="a",
            status=RunStatus.FAILED,
            error=message,
            started_at=1.0,
            duration_s=2.0,
        )
        span = SpanRecord(
            trace_id=run_id[0] * 32, span_id=run_id[0] * 16, parent_span_id=None, name=name,
            kind="INTERNAL", start_ns=1, end_ns=2, status="ERROR", status_message=message,
            attributes={}, events=[], resource={},
        )  # fmt: skip
        writer.end(run_id, end_values(result), [span])

    try:
        for seq in (1, 2, 3):  # one batch: queued before the writer wakes
            writer.event("neighbour", seq, AgentStarted(agent="a", seq=seq))
        writer.step("neighbour", Step(invocation="inv", key="m1", kind="model", data={}))
        ended("nul", "execute_tool check", "record r2 is broken: a\x00b")
        ended("long", "x" * 300, "a name too long for its column")
        with caplog.at_level(logging.ERROR, logger="agents.ledger.writer"):
            assert await writer.sync()
        nul, long = await store.get("nul"), await store.get("long")
        assert nul is not None and nul.status == RunStatus.FAILED
        assert nul.error == "record r2 is broken: a\ufffdb"
        assert [s["status_message"] for s in await store.spans("nul")] == [nul.error]
        assert [seq for seq, _ in await store.events("neighbour")] == [1, 2, 3]
        assert len(await store.steps("neighbour")) == 1
        assert long is not None and long.status == RunStatus.FAILED
        if store_url.startswith("postgresql"):  # SQLite keeps a string of any length
            assert long.error is not None
            assert long.error.startswith("the run store refused the run's record: ")
            assert "run long: the run store refused" in caplog.text
    finally:
        await writer.close()
        await store.close()
