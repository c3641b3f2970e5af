"""Soak: a steady stream of runs through HTTP for minutes, and what grows meanwhile.

Runs of the default team (offline model) are submitted at a fixed rate (open loop: one every
1/RATE s whatever the service does) to a real `baton serve` on 127.0.0.1 with a retention policy
(`BATON_RETENTION_MAX_RUNS`), each followed over SSE to `run_finished`. Ray is started as
Baton starts a local instance (its GCS keeping the events of the newest tasks only).

Prints: runs and errors; p50/p99 latency (submitted to finished) in the first and the last
minute, and the drift; each process's memory (RSS) at the start and the end and its growth per
1,000 runs; the store's size per 1,000 runs.

Run: .venv/bin/python bench/soak.py [RATE runs/s, default 10] [MINUTES, default 10]
[SWEEP_S, the retention sweep's period, default 60]
"""

from __future__ import annotations

import asyncio
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp
import psutil
import ray

from bench.http_throughput import NO_TIMEOUT, percentile, serve, wait_ready
from orchestrator.cli.client import parse_sse
from orchestrator.cluster import TASK_EVENTS_KEPT
from tests.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
KEPT_RUNS = 1000
SAMPLE_S = 30.0
WINDOW_S = 5.0  # the windows whose p99s measure the drift


@dataclass
class Soak:
    """What the soak saw: each run's end (time, latency), errors, and memory samples."""

    ended: list[tuple[float, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    samples: list[tuple[int, dict[str, float], float]] = field(default_factory=list)


def rss_mib(service_pid: int) -> dict[str, float]:
    """Resident memory (MiB) of Baton's and Ray's main processes, by role."""
    used: dict[str, float] = {}
    for process in psutil.process_iter():
        try:
            if process.pid == service_pid:
                role = "baton serve"
            else:
                line = " ".join(process.cmdline())
                role = next(
                    (
                        name
                        for key, name in (
                            ("LedgerActor", "ledger actor"),
                            ("AgentHost", "agent host"),
                            ("gcs_server", "ray gcs"),
                            ("raylet", "raylet"),
                        )
                        if key in line
                    ),
                    "",
                )
            if role:
                used[role] = used.get(role, 0.0) + process.memory_info().rss / 2**20
        except psutil.Error:
            continue
    return used


async def one_run(client: aiohttp.ClientSession, url: str, soak: Soak) -> None:
    began = time.monotonic()
    try:
        async with client.post(f"{url}/v1/runs", json={"task": TASK}) as answer:
            if answer.status != 202:
                soak.errors.append(f"submit {answer.status}: {await answer.text()}")
                return
            run_id = (await answer.json())["id"]
        async with client.get(f"{url}/v1/runs/{run_id}/events", timeout=NO_TIMEOUT) as stream:
            lines = (line.decode().rstrip("\r\n") async for line in stream.content)
            async for event in parse_sse(lines):
                if event.event == "run_finished":
                    status = event.json()["status"]
                    if status != "succeeded":
                        soak.errors.append(f"run {run_id} {status}")
                    break
        soak.ended.append((time.monotonic(), time.monotonic() - began))
    except Exception as exc:  # a dropped connection, a timeout: an error of the soak
        soak.errors.append(f"{type(exc).__name__}: {exc}")


TASK = "Research the history of the Ray project, check the facts, and calculate 17 * 23 + 4"


async def drive(
    url: str,
    rate: float,
    seconds: float,
    service_pid: int,
    store: Path,
    sample_s: float = SAMPLE_S,
    memory: Callable[[int], dict[str, float]] = rss_mib,
) -> Soak:
    """Runs at `rate` for `seconds`; memory (`memory(service_pid)`) sampled every `sample_s`."""
    soak = Soak()
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as client:
        running: set[asyncio.Task[None]] = set()
        began = time.monotonic()
        next_sample = began
        n = 0
        while (now := time.monotonic()) - began < seconds:
            if now >= next_sample:
                soak.samples.append((len(soak.ended), memory(service_pid), _size_mib(store)))
                next_sample += sample_s
            task = asyncio.create_task(one_run(client, url, soak))
            running.add(task)
            task.add_done_callback(running.discard)
            n += 1
            await asyncio.sleep(max(0.0, began + n / rate - time.monotonic()))
        await asyncio.gather(*running)
        soak.samples.append((len(soak.ended), memory(service_pid), _size_mib(store)))
    return soak


def p99_drift(soak: Soak, since: float = 30.0) -> tuple[float, float, float]:
    """The p99 latency of the first minute after `since` s and of the last minute, and the drift
    from one to the other.

    Each minute is cut into 5-second windows. A minute's p99 is the median of its windows' p99s.
    The drift is the median of the ratios of every window of the last minute to every window of
    the first (Hodges-Lehmann's estimate of a shift), less one. A window's p99 is about its
    slowest run, so one burst of slow runs (a pause of a small machine) lifts a window or two.
    The medians pass those by, while a service that slows down lifts every window after a point.
    """
    start, end = soak.ended[0][0] + since, soak.ended[-1][0]
    first, last = _window_p99s(soak, start, start + 60.0), _window_p99s(soak, end - 60.0, end)
    shift = statistics.median(math.log(b / a) for a in first for b in last)
    return statistics.median(first), statistics.median(last), math.exp(shift) - 1


def _window_p99s(soak: Soak, start: float, end: float) -> list[float]:
    p99s = []
    at = start
    while at + WINDOW_S <= end + 1e-9:
        if kept := [lat for ended, lat in soak.ended if at <= ended < at + WINDOW_S]:
            p99s.append(percentile(kept, 0.99))
        at += WINDOW_S
    return p99s


def _size_mib(store: Path) -> float:
    files = [store, store.with_name(store.name + "-wal")]
    return sum(f.stat().st_size for f in files if f.exists()) / 2**20


def report(soak: Soak, rate: float, minutes: float) -> None:
    runs = len(soak.ended)
    print(f"soak: {rate:g} runs/s for {minutes:g} min: {runs} runs, {len(soak.errors)} errors")
    for error in soak.errors[:5]:
        print(f"  error: {error}")
    start = soak.ended[0][0] if soak.ended else 0.0
    first = [lat for at, lat in soak.ended if at - start < 60]
    last = [lat for at, lat in soak.ended if at > soak.ended[-1][0] - 60]
    for name, values in (("first minute", first), ("last minute", last)):
        print(
            f"  {name}: p50 {statistics.median(values):.2f} s, "
            f"p99 {percentile(values, 0.99):.2f} s ({len(values)} runs)"
        )
    before, after, drift = p99_drift(soak)
    print(
        f"  p99 (the median of 5-s windows'), the minute after the first 30 s: {before:.3f} s, "
        f"the last minute: {after:.3f} s, drift {drift:+.0%} (target under +20%)"
    )
    (runs0, rss0, size0), (runs1, rss1, size1) = soak.samples[1], soak.samples[-1]
    per_k = 1000 / max(runs1 - runs0, 1)
    print(f"  memory (MiB), after {runs0} runs and at the end; growth per 1,000 runs after:")
    for role in sorted(rss1):
        grown = (rss1[role] - rss0.get(role, rss1[role])) * per_k
        print(f"    {role:14} {rss0.get(role, 0):7.0f} {rss1[role]:7.0f}  {grown:+6.1f}")
    print(
        f"  store: {size1:.1f} MiB at the end, {(size1 - size0) * per_k:+.1f} MiB per 1,000 runs "
        f"(retention keeps the newest {KEPT_RUNS})"
    )


async def main() -> None:
    rate = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    minutes = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    sweep_s = sys.argv[3] if len(sys.argv) > 3 else "60"
    ray.init(
        namespace="baton-bench",
        include_dashboard=False,
        logging_level="ERROR",
        log_to_driver=False,
        _system_config={"task_events_max_num_task_in_gcs": TASK_EVENTS_KEPT},
    )
    address = ray.get_runtime_context().gcs_address
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "runs.db"
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = serve(
            ROOT / "configs" / "default.yaml",
            store,
            address,
            port,
            BATON_RETENTION_MAX_RUNS=str(KEPT_RUNS),
            BATON_RETENTION_SWEEP_S=sweep_s,
            BATON_MAX_QUEUED_RUNS="100000",
        )
        try:
            await wait_ready(url)
            soak = await drive(url, rate, minutes * 60, server.pid, store)
        finally:
            server.terminate()
            server.wait(timeout=60)
    report(soak, rate, minutes)


if __name__ == "__main__":
    asyncio.run(main())
