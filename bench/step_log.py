"""The step log's cost: the same runs with and without durable steps, on SQLite and PostgreSQL.

Two workloads, instant built-in models, agents in one host (the default), tracing on:

- chain: a delegation chain of depth 16 (31 model calls, 15 delegations), as in
  delegation_overhead.py; each model reply is recorded (batched, not waited for);
- tools: one agent making 8 calls, one per model step, of a tool marked not idempotent (so that
  it must run at most once; 9 model calls); each call waits for its start to be stored first
  (the barrier).

Each run with the step log is timed against the same run without it, in turns in one process
(`interleaved_medians`), so the ratio is the log's cost. Runs are recorded in the store before
they start, as the service does (not timed). PostgreSQL runs when Debian's server is installed
(a throwaway instance, as in the tests).

Target: the chain at most 1.10x without the log, on SQLite and PostgreSQL.

Run: .venv/bin/python bench/step_log.py
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.core.messages import RunStatus
from agents.ray.pool import PoolOptions
from bench._common import interleaved_medians, start, system
from bench.delegation_overhead import chain_yaml
from orchestrator.engine import Engine, Execution, Submission
from orchestrator.store import RunMeta, RunStore, absolute_store_url

REPEATS = 40
WARMUP = 5
TOOL_CALLS = 8

_TOOL_STEP = '{tool_calls: [{name: word_count, arguments: {text: "x y"}}]}'
TOOLS_YAML = f"""
name: tools
limits: {{max_steps: {TOOL_CALLS + 2}}}
agents:
  - name: clerk
    tools: [{{function: "configs.tools:word_count", idempotent: false}}]
    model:
      name: baton/scripted
      params:
        replies: [{", ".join([_TOOL_STEP] * TOOL_CALLS)}, {{content: done}}]
"""


def _engine(yaml_text: str, url: str | None) -> Engine:
    built = Engine(system(yaml_text), PoolOptions(namespace="baton-bench", store_url=url))
    built.start()
    return built


async def _runs(store: RunStore, count: int) -> list[str]:
    ids = [uuid.uuid4().hex for _ in range(count)]
    for run_id in ids:
        await store.add(Submission("go"), RunMeta(run_id, "bench", {}))
    return ids


def _contender(engine: Engine, ids: list[str]) -> Callable[[], Awaitable[object]]:
    async def run() -> None:
        result = await engine.run(Submission("go"), Execution(ids.pop()))
        assert result.status == RunStatus.SUCCEEDED, result.error

    return run


async def _measure(name: str, yaml_text: str, store: RunStore, url: str) -> tuple[float, float]:
    """Median seconds per run without and with the step log."""
    plain = _engine(yaml_text.replace("name: ", "name: plain", 1), None)
    logged = _engine(yaml_text.replace("name: ", "name: logged", 1), absolute_store_url(url))
    ids = await _runs(store, WARMUP + REPEATS)
    without, with_log = await interleaved_medians(
        [_contender(plain, [uuid.uuid4().hex for _ in ids]), _contender(logged, ids)],
        warmup=WARMUP,
        repeats=REPEATS,
    )
    plain.stop()
    logged.stop()
    print(
        f"{name:>6} {without * 1000:>12.1f} {with_log * 1000:>12.1f} {with_log / without:>7.2f}",
        flush=True,
    )
    return without, with_log


@contextlib.contextmanager
def _stores() -> Iterator[list[tuple[str, str]]]:
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        found = [("sqlite", f"sqlite+aiosqlite:///{folder}/bench.db")]
        from tests.postgres import find_pg_bin, postgres_server

        bin_dir = find_pg_bin()
        if bin_dir is not None:
            found.append(("postgres", stack.enter_context(postgres_server(bin_dir))))
        else:
            print("(PostgreSQL is not installed: SQLite only)")
        yield found


async def main() -> None:
    start()
    with _stores() as stores:
        for kind, url in stores:
            store = await RunStore.open(url)
            print(f"\n{kind}: ms per run {'without':>12} {'with log':>12} {'ratio':>7}")
            chain = await _measure("chain", chain_yaml(16), store, url)
            tools = await _measure("tools", TOOLS_YAML, store, url)
            model_calls = 31
            per_model = (chain[1] - chain[0]) / model_calls * 1000
            per_tool = ((tools[1] - tools[0]) * 1000 - per_model * (TOOL_CALLS + 1)) / TOOL_CALLS
            print(
                f"{kind}: {per_model:.2f} ms per model call recorded; "
                f"{per_tool:.2f} ms per at-most-once tool call (its barrier)"
            )
            await store.close()
    print("target: chain with the log <= 1.10x without (SQLite and PostgreSQL)")


if __name__ == "__main__":
    asyncio.run(main())
