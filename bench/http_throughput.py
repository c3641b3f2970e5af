"""Throughput through HTTP: 200 tasks, each a two-level delegation whose model calls take 50 ms,
submitted 50 at a time to a real `baton serve` on 127.0.0.1; each client follows its run's
events (SSE) to `run_finished`, fetches the run, then submits the next.

Prints tasks/s as a ratio to the ideal (50 in flight / the 150 ms critical path: three 50 ms
model calls in a row), p50/p99 submit latency, p50/p99 lag of events (received - emitted), and
the same workload run straight on the engine in this process (no HTTP, no store), measured in
the same run, as a baseline for what HTTP, the store and the event stream cost. For each, the
CPU milliseconds per task of every process, and the ceiling they set: the tasks per second this
machine's cores could give if they did nothing but this (all cores / CPU per task).

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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench._common import cpu_ceiling, cpu_ms_per_task, cpu_seconds, start, system
from orchestrator.client import parse_sse
from orchestrator.engine import Engine

TASKS = 200
CONCURRENCY = 50
MODEL_MS = 50
CRITICAL_PATH_S = 3 * MODEL_MS / 1000

CONFIG = f"""
name: bench-http
limits: {{deadline_s: 300}}
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


async def one_task(client: httpx.AsyncClient, submits: list[float], lags: list[float]) -> None:
    began = time.perf_counter()
    answer = await client.post("/v1/runs", json={"task": "go"})
    submits.append(time.perf_counter() - began)
    answer.raise_for_status()
    run_id = answer.json()["id"]
    async with client.stream("GET", f"/v1/runs/{run_id}/events", timeout=None) as stream:
        async for event in parse_sse(stream.aiter_lines()):
            lags.append(time.time() - event.json()["ts"])
            if event.event == "run_finished":
                assert event.json()["status"] == "succeeded", event.data
                break
    record = await client.get(f"/v1/runs/{run_id}")
    assert record.json()["output"] == "done", record.text


async def http_round(url: str, tasks: int) -> tuple[float, list[float], list[float]]:
    submits: list[float] = []
    lags: list[float] = []
    queue = list(range(tasks))
    limits = httpx.Limits(max_connections=2 * CONCURRENCY)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def worker() -> None:
            while queue:
                queue.pop()
                await one_task(client, submits, lags)

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        return time.perf_counter() - began, submits, lags


async def engine_round(engine: Engine, tasks: int) -> float:
    queue = list(range(tasks))

    async def worker() -> None:
        while queue:
            queue.pop()
            result = await engine.run("go")
            assert result.status == "succeeded", result.error

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return time.perf_counter() - began


def serve(config: Path, store: Path, address: str, port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "RAY_ADDRESS": address,
        "BATON_STORE_URL": f"sqlite+aiosqlite:///{store}",
        "BATON_NAMESPACE": "baton-bench",
        "BATON_RATE_LIMIT_PER_S": "100000",
        "BATON_RATE_LIMIT_BURST": "100000",
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


async def main() -> None:
    start()
    import ray

    address = ray.get_runtime_context().gcs_address
    ideal = CONCURRENCY / CRITICAL_PATH_S
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "bench.yaml"
        config.write_text(CONFIG)
        port = 8700 + os.getpid() % 200
        url = f"http://127.0.0.1:{port}"
        server = serve(config, Path(tmp) / "runs.db", address, port)
        try:
            await wait_ready(url)
            await http_round(url, 50)  # warm up
            before = cpu_seconds(server.pid)
            wall, submits, lags = await http_round(url, TASKS)
            after = cpu_seconds(server.pid)
            http_cpu = cpu_ms_per_task(before, after, TASKS)
            http_ceiling = cpu_ceiling(before, after, TASKS)
        finally:
            server.terminate()
            server.wait(timeout=60)

    engine = Engine(system(CONFIG), namespace="baton-bench")
    engine.start()
    await engine_round(engine, 50)
    before = cpu_seconds()
    direct = await engine_round(engine, TASKS)
    after = cpu_seconds()
    direct_cpu = cpu_ms_per_task(before, after, TASKS)
    direct_ceiling = cpu_ceiling(before, after, TASKS)
    engine.stop()

    rate, direct_rate = TASKS / wall, TASKS / direct
    print(f"tasks: {TASKS}, {CONCURRENCY} at a time, model calls {MODEL_MS} ms")
    print(
        f"ideal:            {ideal:7.1f} tasks/s  (critical path {CRITICAL_PATH_S * 1000:.0f} ms)"
    )
    print(
        f"through HTTP:     {rate:7.1f} tasks/s  ratio to ideal {rate / ideal:.2f}  (target 0.35)"
    )
    print(
        f"engine directly:  {direct_rate:7.1f} tasks/s  ratio to ideal "
        f"{direct_rate / ideal:.2f}  (target 0.5)"
    )
    print(f"HTTP / direct:    {rate / direct_rate:.2f}")
    print(
        f"submit latency:   p50 {percentile(submits, 0.5) * 1000:.1f} ms  "
        f"p99 {percentile(submits, 0.99) * 1000:.1f} ms"
    )
    print(
        f"event lag:        p50 {percentile(lags, 0.5) * 1000:.1f} ms  "
        f"p99 {percentile(lags, 0.99) * 1000:.1f} ms  (target: within 250 ms)"
    )
    print(f"events received:  {len(lags)} (mean {statistics.mean(lags) * 1000:.1f} ms lag)")
    print(f"CPU ms per task, through HTTP:    {http_cpu}")
    print(f"CPU ms per task, engine directly: {direct_cpu}")
    print(
        f"CPU-bound ceiling ({os.cpu_count()} cores): through HTTP {http_ceiling:.1f} tasks/s "
        f"({http_ceiling / ideal:.2f} of ideal), engine directly {direct_ceiling:.1f} "
        f"({direct_ceiling / ideal:.2f})"
    )


if __name__ == "__main__":
    asyncio.run(main())
