from __future__ import annotations

import asyncio
import sys
import time

import asyncpg
import pytest

from agents.core.events import RunFinished
from agents.core.messages import AgentResult, RunStatus, Usage
from orchestrator.engine import RunResult, Submission
from orchestrator.errors import AmbiguousRunId
from orchestrator.store import DEFAULT_POOL_SIZE, RunMeta, RunStore

pytestmark = pytest.mark.anyio


def _span(span_id: str, parent: str | None, name: str, start: int) -> dict[str, object]:
    return {
        "trace_id": "ab" * 16,
        "span_id": span_id,
        "parent_span_id": parent,
        "name": name,
        "kind": "INTERNAL",
        "start_ns": start,
        "end_ns": start + 1_000_000,
        "status": "OK",
        "status_message": None,
        "attributes": {"gen_ai.agent.name": "coordinator", "baton.delegation.chain": ["a"]},
        "events": [],
        "resource": {"service.name": "baton"},
    }


def _result(run_id: str, status: RunStatus = RunStatus.SUCCEEDED) -> RunResult:
    tree = AgentResult(agent="coordinator", status=status, output="42", steps=2)
    spans = [
        _span("0000000000000002", "0000000000000001", "invoke_agent coordinator", 2),
        _span("0000000000000001", None, "invoke_workflow baton", 1),
    ]
    return RunResult(
        run_id=run_id,
        task="what is 6 * 7",
        entry_agent="coordinator",
        status=status,
        output="42" if status == RunStatus.SUCCEEDED else None,
        error=None if status == RunStatus.SUCCEEDED else "budget spent",
        usage=Usage(
            input_tokens=30, output_tokens=12, model_calls=2, cost_usd=0.0125, unpriced_calls=1
        ),
        started_at=time.time(),
        duration_s=0.25,
        tree=tree,
        spans=spans,  # type: ignore[arg-type]
    )


async def test_a_run_round_trips_through_the_store(store_url: str) -> None:
    url = store_url
    store = await RunStore.open(url)
    await store.add(Submission("what is 6 * 7"), RunMeta("r1", "default", {"name": "x"}))
    assert (await store.get("r1")).status == "queued"  # type: ignore[union-attr]
    await store.start("r1")
    await store.finish(_result("r1"), _result("r1").spans)
    await store.close()

    reopened = await RunStore.open(url)  # a new process would see the same
    run = await reopened.get("r1")
    await reopened.close()
    assert run is not None
    assert (run.status, run.output, run.entry_agent) == ("succeeded", "42", "coordinator")
    assert (run.input_tokens, run.output_tokens, run.model_calls) == (30, 12, 2)
    assert run.cost_usd == pytest.approx(0.0125) and run.unpriced_calls == 1
    assert run.config == {"name": "x"}
    assert run.tree is not None and run.tree["agent"] == "coordinator"
    assert run.duration_s == pytest.approx(0.25)
    reopened = await RunStore.open(url)
    spans = await reopened.spans("r1")
    await reopened.close()
    assert [s["name"] for s in spans] == ["invoke_workflow baton", "invoke_agent coordinator"]
    assert spans[1] == _result("r1").spans[0]  # every field round-trips


async def test_runs_written_at_once_each_keep_their_own_record_and_outcome(
    store_url: str,
) -> None:
    # Writes made together share transactions: a refused one (an idempotency key taken by a
    # twin) must fail alone, and no run may get another's values.
    store = await RunStore.open(store_url)
    ids = [f"r{i}" for i in range(40)]
    keys = {run_id: f"key-{run_id}" for run_id in ids}
    keys["r39"] = keys["r38"]  # a twin
    added = await asyncio.gather(
        *(
            store.add(
                Submission(f"task {run_id}"), RunMeta(run_id, "s", {}, idempotency_key=keys[run_id])
            )
            for run_id in ids
        ),
        return_exceptions=True,
    )
    refused = [run_id for run_id, got in zip(ids, added, strict=True) if isinstance(got, Exception)]
    assert len(refused) == 1 and refused[0] in ("r38", "r39")
    assert all(
        type(e).__name__ == "DuplicateIdempotencyKey" for e in added if isinstance(e, Exception)
    )
    stored = [run_id for run_id in ids if run_id not in refused]
    await asyncio.gather(*(store.start(run_id) for run_id in stored))
    results = [
        _result(run_id).model_copy(update={"task": f"task {run_id}", "output": f"answer {run_id}"})
        for run_id in stored
    ]
    await asyncio.gather(*(store.finish(result, result.spans) for result in results))
    await store.close()

    reopened = await RunStore.open(store_url)
    page = await reopened.list(limit=100)
    spans = {run_id: await reopened.spans(run_id) for run_id in stored}
    await reopened.close()
    assert page.total == 39
    assert {(r.id, r.task, r.output, r.status) for r in page.runs} == {
        (run_id, f"task {run_id}", f"answer {run_id}", "succeeded") for run_id in stored
    }
    assert all(len(found) == 2 for found in spans.values())


async def test_runs_list_newest_first_with_filters_and_pages(store_url: str) -> None:
    store = await RunStore.open(store_url)
    for i in range(5):
        await store.add(Submission("task"), RunMeta(f"r{i}", "s", {}))
        result = _result(f"r{i}", RunStatus.SUCCEEDED if i % 2 else RunStatus.FAILED)
        await store.finish(result, result.spans)
    page = await store.list(limit=2)
    assert page.total == 5 and [r.id for r in page.runs] == ["r4", "r3"]
    # Usage totals cover every matching run, not only the page's.
    assert (page.usage.input_tokens, page.usage.output_tokens) == (150, 60)
    assert page.usage.model_calls == 10 and page.usage.cost_usd == pytest.approx(0.0625)
    assert page.usage.unpriced_calls == 5  # calls whose cost is unknown, kept apart
    failed = await store.list(status="failed")
    assert [r.id for r in failed.runs] == ["r4", "r2", "r0"]
    assert failed.usage.input_tokens == 90 and failed.usage.cost_usd == pytest.approx(0.0375)
    nobody = await store.list(agent="nobody")
    assert nobody.total == 0 and nobody.usage.total_tokens == 0 and nobody.usage.cost_usd == 0
    await store.close()


async def test_unfinished_runs_are_marked_interrupted_with_the_reason(store_url: str) -> None:
    store = await RunStore.open(store_url)
    await store.add(Submission("t"), RunMeta("queued", "s", {}))
    await store.add(Submission("t"), RunMeta("running", "s", {}))
    await store.start("running")
    await store.add(Submission("t"), RunMeta("done", "s", {}))
    await store.finish(_result("done"), [])
    assert await store.leases.interrupt_unfinished("service restarted") == 2
    statuses = {r.id: (r.status, r.error) for r in (await store.list()).runs}
    assert statuses == {
        "queued": ("interrupted", "service restarted"),
        "running": ("interrupted", "service restarted"),
        "done": ("succeeded", None),
    }
    await store.close()


async def test_a_start_written_late_never_turns_an_ended_run_back_to_running(
    store_url: str,
) -> None:
    # A start kept through an outage (or retried after its commit was reported failed) can be
    # made after the run's end was recorded by the ledger: the end stands.
    store = await RunStore.open(store_url)
    try:
        await store.add(Submission("t"), RunMeta("ended", "s", {}))
        await store.finish(_result("ended"), [])
        await store.start("ended")
        ended = await store.get("ended")
        assert ended is not None and ended.status == "succeeded"
        await store.add(Submission("t"), RunMeta("queued", "s", {}))
        await store.start("queued")
        started = await store.get("queued")
        assert started is not None and started.status == "running" and started.started_at
    finally:
        await store.close()


async def test_instances_opening_a_new_store_at_once_all_get_it(store_url: str) -> None:
    # Service replicas started together each migrate the new store; none may fail for it.
    probe = (
        "import asyncio, sys\n"
        "from orchestrator.store import RunStore\n"
        "async def main():\n"
        "    store = await RunStore.open(sys.argv[1])\n"
        "    await store.close()\n"
        "asyncio.run(main())\n"
    )
    opening = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", probe, store_url, stderr=asyncio.subprocess.PIPE
        )
        for _ in range(4)
    ]
    outcomes = await asyncio.gather(*(p.communicate() for p in opening))
    assert [p.returncode for p in opening] == [0] * 4, [err.decode()[-500:] for _, err in outcomes]
    store = await RunStore.open(store_url)
    try:
        assert (await store.list()).total == 0
    finally:
        await store.close()


def _database(store_url: str) -> str:
    return store_url.rsplit("/", 1)[1]


async def _probe(store_url: str) -> asyncpg.Connection:
    """A connection of the test's own to the store's PostgreSQL database."""
    return await asyncpg.connect(store_url.replace("postgresql+asyncpg://", "postgresql://"))


async def _backends(probe: asyncpg.Connection, store_url: str) -> set[int]:
    """The server processes connected to the store's database, besides the probe's own."""
    rows = await probe.fetch(
        "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
        _database(store_url),
    )
    return {row["pid"] for row in rows}


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_reads_at_once_reuse_the_stores_connections(store_url: str) -> None:
    # A service following many runs reads its store all at once, round after round. The
    # database must not see a new connection (a server process on PostgreSQL) per read of a
    # burst: SQLAlchemy's default pool kept 5 and opened and closed up to 10 more each time.
    store = await RunStore.open(store_url)
    await store.add(Submission("t"), RunMeta("r1", "s", {}))
    probe = await _probe(store_url)
    sessions = "SELECT sessions FROM pg_stat_database WHERE datname = $1"
    database = _database(store_url)
    try:
        before = await probe.fetchval(sessions, database)
        for _ in range(5):
            runs = await asyncio.gather(*(store.get("r1") for _ in range(DEFAULT_POOL_SIZE)))
            assert all(run is not None and run.id == "r1" for run in runs)
        # Counted when a session starts or ends; the store's stay open, the others are gone.
        opened = await probe.fetchval(sessions, database) - before
    finally:
        await probe.close()
        await store.close()
    assert opened <= DEFAULT_POOL_SIZE


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_a_store_keeps_as_many_connections_open_as_its_pool_size(store_url: str) -> None:
    store = await RunStore.open(store_url, pool_size=3)
    await store.add(Submission("t"), RunMeta("r1", "s", {}))
    probe = await _probe(store_url)
    try:
        await asyncio.gather(*(store.get("r1") for _ in range(8)))  # 5 beyond the pool
        # Those closed after use leave the server a moment later; the server's catalog is
        # the only place that says when (no event to wait on).
        try:
            async with asyncio.timeout(10):
                while len(await _backends(probe, store_url)) != 3:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
        except TimeoutError:
            held = len(await _backends(probe, store_url))
            pytest.fail(f"{held} connections to the store stay open (pool size 3)")
    finally:
        await probe.close()
        await store.close()


async def test_a_store_in_memory_opens_with_its_one_connection() -> None:
    store = await RunStore.open("sqlite+aiosqlite:///:memory:")
    try:
        await store.add(Submission("t"), RunMeta("r1", "s", {}))
        assert (await store.get("r1")).status == "queued"  # type: ignore[union-attr]
    finally:
        await store.close()


async def test_a_run_is_found_by_a_prefix_of_its_id_unless_it_is_ambiguous_or_short(
    store_url: str,
) -> None:
    store = await RunStore.open(store_url)
    try:
        for run_id, tenant in (
            ("abcdef0123456789", "acme"),
            ("abcdef0199999999", "globex"),
            ("fedcba0000000000", "acme"),
        ):
            await store.add(Submission("a task", tenant=tenant), RunMeta(run_id, "s", {}))
        found = await store.find("fedcba00")
        assert found is not None and found.id == "fedcba0000000000"
        found = await store.find("abcdef012")  # one run begins so
        assert found is not None and found.id == "abcdef0123456789"
        with pytest.raises(AmbiguousRunId) as ambiguous:
            await store.find("abcdef01")
        assert "abcdef0123456789, abcdef0199999999" in str(ambiguous.value)
        # For a tenant's key, the prefix names one of its runs: another's does not count
        # (an ambiguity would say that it exists).
        found = await store.find("abcdef01", tenant="globex")
        assert found is not None and found.id == "abcdef0199999999"
        assert await store.find("fedcba00", tenant="globex") is None
        assert await store.find("fedcb") is None  # under six characters: only a whole id
        assert await store.find("0123456") is None  # no run begins so
    finally:
        await store.close()


async def test_a_nul_character_is_kept_as_a_replacement_on_every_store(store_url: str) -> None:
    # PostgreSQL refuses U+0000 in text and JSON (a dropped connection, a 500); SQLite keeps it.
    # Both keep U+FFFD in its place; the six characters `\u0000` stay as they are.
    store = await RunStore.open(store_url)
    await store.add(Submission("what is 6 * 7"), RunMeta("r1", "default", {"name": "x"}))
    result = _result("r1")
    result = result.model_copy(update={"output": "4\x002", "error": None})
    spans = result.spans
    spans[0]["attributes"] = {**spans[0]["attributes"], "baton.tool.output": "a\x00b \\u0000"}
    await store.finish(result, spans)
    run = await store.get("r1")
    stored = {s["span_id"]: s for s in await store.spans("r1")}
    await store.close()
    assert run is not None and run.output == "4\ufffd2"
    assert stored["0000000000000002"]["attributes"]["baton.tool.output"] == "a\ufffdb \\u0000"


async def test_pruning_removes_old_finished_runs_with_every_row_of_theirs(
    store_url: str,
) -> None:
    store = await RunStore.open(store_url)
    for run_id in ("old", "newer", "newest", "running"):
        await store.add(Submission("what is 6 * 7"), RunMeta(run_id, "default", {}))
    for run_id in ("old", "newer", "newest"):
        await store.start(run_id)
        await store.finish(_result(run_id), _result(run_id).spans)
        await store.add_events(run_id, [(1, RunFinished(status=RunStatus.SUCCEEDED))])
        await store.push.put(run_id, "hook", "me", {"url": "https://hooks.example/x"})
    await store.start("running")
    # By count: the newest finished run stays, and the one still going.
    assert await store.prune(keep=2) == 1
    assert {r.id for r in (await store.list(limit=10)).runs} == {"newer", "newest", "running"}
    assert await store.spans("old") == [] and await store.events("old") == []
    assert await store.push.of("old") == []
    # By age: everything finished before now goes; the running one never does.
    assert await store.prune(older_than=time.time() + 1) == 2
    assert [r.id for r in (await store.list(limit=10)).runs] == ["running"]
    assert await store.spans("newest") == [] and await store.push.of("newest") == []
    await store.close()
