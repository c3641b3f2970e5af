"""Throughput through HTTP: 200 tasks, each a two-level delegation whose model calls take 50 ms,
submitted 50 at a time to a real `baton serve` on 127.0.0.1; each client follows its run's
events (SSE) to `run_finished`, fetches the run, then submits the next.

Prints tasks/s as a ratio to the ideal (50 in flight / the 150 ms critical path: three 50 ms
model calls in a row), p50/p99 submit latency, p50/p99 lag of events (received - emitted), and
the same workload run straight on the engine in this process (no HTTP, no store), measured in
the same run, as a baseline for what HTTP, the store and the event stream cost; and as the
stack's own floor, the model calls alone in this process: each task three plain
`litellm.acompletion` calls of the same model in a row, 50 tasks at a time, no orchestration.
For each, the CPU milliseconds per task of every process, and the ceiling they set: the tasks
per second this machine's cores could give if they did nothing but this (all cores / CPU per
task).

Both are measured with the team's shared host in one process (the default) and in one replica
per core (`shared_host: {replicas: N}`).

Run: .venv/bin/python bench/http_throughput.py
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp
import httpx

from agents.ray.pool import PoolOptions
from bench._common import PlainModel, cpu_ceiling, cpu_ms_per_task, cpu_seconds, start, system
from orchestrator.cli.client import parse_sse
from orchestrator.engine import Engine, Submission
from orchestrator.store import absolute_store_url
from tests.ports import free_port

TASKS = 200
CONCURRENCY = 50
MODEL_MS = 50
CRITICAL_PATH_S = 3 * MODEL_MS / 1000
NO_TIMEOUT = aiohttp.ClientTimeout(total=None)

CONFIG = f"""
name: bench-http
limits: {{deadline_s: 300}}
shared_host: {{replicas: REPLICAS}}
agents:
  - name: lead
    delegates: [helper]
    model:
      name: baton/scripted
      params:
        latency_ms: {MODEL_MS}
        replies:
          - {{tool_calls: [{{name: delegate_to_helper, arguments: {{task: part}}}}]}}
          - {{content: done}}
  - name: helper
    model: {{name: baton/scripted, params: {{latency_ms: {MODEL_MS}, replies: [{{content: ok}}]}}}}
"""


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


async def one_task(
    client: aiohttp.ClientSession, url: str, submits: list[float], lags: list[float]
) -> None:
    began = time.perf_counter()
    async with client.post(f"{url}/v1/runs", json={"task": "go"}) as answer:
        submits.append(time.perf_counter() - began)
        answer.raise_for_status()
        run_id = (await answer.json())["id"]
    async with client.get(f"{url}/v1/runs/{run_id}/events", timeout=NO_TIMEOUT) as stream:
        lines = (line.decode().rstrip("\r\n") async for line in stream.content)
        async for event in parse_sse(lines):
            lags.append(time.time() - event.json()["ts"])
            if event.event == "run_finished":
                assert event.json()["status"] == "succeeded", event.data
                break
    async with client.get(f"{url}/v1/runs/{run_id}") as record:
        assert (await record.json())["output"] == "done", await record.text()


async def http_round(
    url: str, tasks: int, in_flight: int = CONCURRENCY
) -> tuple[float, list[float], list[float]]:
    submits: list[float] = []
    lags: list[float] = []
    queue = list(range(tasks))
    # aiohttp, not httpx: the client shares this machine's cores with Baton, and aiohttp
    # costs about a quarter of its CPU per task (bench/README.md).
    connector = aiohttp.TCPConnector(limit=2 * in_flight)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:

        async def worker() -> None:
            while queue:
                queue.pop()
                await one_task(client, url, submits, lags)

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return time.perf_counter() - began, submits, lags


async def concurrently(task: Callable[[], Awaitable[None]], tasks: int) -> float:
    """Seconds to run `tasks` tasks, CONCURRENCY at a time."""
    queue = list(range(tasks))

    async def worker() -> None:
        while queue:
            queue.pop()
            await task()

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return time.perf_counter() - began


async def engine_round(engine: Engine, tasks: int) -> float:
    async def task() -> None:
        result = await engine.run(Submission("go"))
        assert result.status == "succeeded", result.error

    return await concurrently(task, tasks)


async def litellm_alone() -> tuple[float, float]:
    """Tasks/s and CPU ms per task of the model calls alone, in this process."""
    model = PlainModel({"latency_ms": MODEL_MS, "replies": [{"content": "ok"}]})

    async def task() -> None:
        for _ in range(3):
            await model.complete([{"role": "user", "content": "go"}])

    await concurrently(task, CONCURRENCY)
    before = time.process_time()
    wall = await concurrently(task, TASKS)
    return TASKS / wall, (time.process_time() - before) * 1000 / TASKS


def serve(
    config: Path, store: Path, address: str, port: int, **settings: str
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "RAY_ADDRESS": address,
        "BATON_STORE_URL": f"sqlite+aiosqlite:///{store}",
        "BATON_NAMESPACE": "baton-bench",
        "BATON_RATE_LIMIT_PER_S": "100000",
        "BATON_RATE_LIMIT_BURST": "100000",
        **settings,
    }
    args = [sys.executable, "-m", "orchestrator", "serve", "--config", str(config)]
    return subprocess.Popen(
        [*args, "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def wait_ready(url: str) -> None:
    async with httpx.AsyncClient(base_url=url) as client:
        for _ in range(600):
            try:
                if (await client.get("/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
    raise TimeoutError("baton serve did not become ready")


@dataclass
class Measured:
    """One way through: tasks per second, CPU per task by process, the ceiling it sets."""

    rate: float
    cpu: str
    ceiling: float

    @classmethod
    def of(cls, wall: float, before: dict[str, float], after: dict[str, float]) -> Measured:
        return cls(
            TASKS / wall, cpu_ms_per_task(before, after, TASKS), cpu_ceiling(before, after, TASKS)
        )


_Reading = TypeVar("_Reading")


@dataclass
class Round(Generic[_Reading]):
    """One round of tasks through a service: how long it took, what it read before and after."""

    tasks: int
    wall: float
    submits: list[float]
    lags: list[float]
    before: _Reading
    after: _Reading


async def served_round(
    config_text: str,
    address: str,
    read: Callable[[int], _Reading],
    tasks: int = TASKS,
    **settings: str,
) -> tuple[float, list[float], list[float], _Reading, _Reading]:
    """`tasks` tasks through a `baton serve` of `config_text` (with `settings` in its
    environment), after a warm-up: the seconds they took, submit latencies, event lags, and
    `read(service pid)` before and after them. The service's actors are stopped after."""
    (only,) = await served_rounds(config_text, address, read, [(tasks, CONCURRENCY)], **settings)
    return only.wall, only.submits, only.lags, only.before, only.after


async def served_rounds(
    config_text: str,
    address: str,
    read: Callable[[int], _Reading],
    loads: list[tuple[int, int]],
    **settings: str,
) -> list[Round[_Reading]]:
    """Rounds of (tasks, in flight) through one `baton serve`, after a warm-up (see
    `served_round`)."""
    rounds: list[Round[_Reading]] = []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "bench.yaml"
        config.write_text(config_text)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = serve(config, Path(tmp) / "runs.db", address, port, **settings)
        try:
            await wait_ready(url)
            await http_round(url, 50)  # warm up
            for tasks, in_flight in loads:
                before = read(server.pid)
                wall, submits, lags = await http_round(url, tasks, in_flight)
                rounds.append(Round(tasks, wall, submits, lags, before, read(server.pid)))
        finally:
            server.terminate()
            server.wait(timeout=60)
        # The service's agents and ledger are detached (they outlive it): found by name (its
        # store's among it), and stopped.
        store_url = absolute_store_url(f"sqlite+aiosqlite:///{Path(tmp) / 'runs.db'}")
        found = Engine(system(config_text), PoolOptions("baton-bench", store_url=store_url))
        found.start()
        found.stop()
    return rounds


async def through_http(config_text: str, address: str) -> tuple[Measured, list[float], list[float]]:
    wall, submits, lags, before, after = await served_round(config_text, address, cpu_seconds)
    return Measured.of(wall, before, after), submits, lags


async def through_engine(config_text: str) -> Measured:
    # A system of its own (another name): not the service's actors, whose ledger keeps a log.
    own = system(config_text.replace("bench-http", "bench-engine"))
    engine = Engine(own, PoolOptions(namespace="baton-bench"))
    engine.start()
    await engine_round(engine, 50)
    before = cpu_seconds()
    wall = await engine_round(engine, TASKS)
    after = cpu_seconds()
    engine.stop()
    return Measured.of(wall, before, after)


async def main() -> None:
    start()
    import ray

    address = ray.get_runtime_context().gcs_address
    ideal = CONCURRENCY / CRITICAL_PATH_S
    cores = os.cpu_count() or 1
    print(f"tasks: {TASKS}, {CONCURRENCY} at a time, model calls {MODEL_MS} ms")
    print(
        f"ideal:            {ideal:7.1f} tasks/s  (critical path {CRITICAL_PATH_S * 1000:.0f} ms)"
    )
    alone, alone_cpu = await litellm_alone()
    print(
        f"litellm alone:    {alone:7.1f} tasks/s  ratio to ideal {alone / ideal:.2f}  "
        f"({alone_cpu:.1f} ms of CPU per task: the model calls in one process, no orchestration)"
    )
    for replicas in sorted({1, cores}):
        config = CONFIG.replace("REPLICAS", str(replicas))
        http, submits, lags = await through_http(config, address)
        direct = await through_engine(config)
        print(f"-- shared host in {replicas} process{'es' if replicas > 1 else ''}")
        print(
            f"through HTTP:     {http.rate:7.1f} tasks/s  ratio to ideal "
            f"{http.rate / ideal:.2f}  (target 0.35)"
        )
        print(
            f"engine directly:  {direct.rate:7.1f} tasks/s  ratio to ideal "
            f"{direct.rate / ideal:.2f}  (target 0.5)"
        )
        print(f"HTTP / direct:    {http.rate / direct.rate:.2f}")
        print(
            f"submit latency:   p50 {percentile(submits, 0.5) * 1000:.1f} ms  "
            f"p99 {percentile(submits, 0.99) * 1000:.1f} ms"
        )
        print(
            f"event lag:        p50 {percentile(lags, 0.5) * 1000:.1f} ms  "
            f"p99 {percentile(lags, 0.99) * 1000:.1f} ms  (target: within 250 ms)"
        )
        print(f"events received:  {len(lags)} (mean {statistics.mean(lags) * 1000:.1f} ms lag)")
        print(f"CPU ms per task, through HTTP:    {http.cpu}")
        print(f"CPU ms per task, engine directly: {direct.cpu}")
        print(
            f"CPU-bound ceiling ({cores} cores): through HTTP {http.ceiling:.1f} tasks/s "
            f"({http.ceiling / ideal:.2f} of ideal), engine directly {direct.ceiling:.1f} "
            f"({direct.ceiling / ideal:.2f})"
        )


if __name__ == "__main__":
    asyncio.run(main())
