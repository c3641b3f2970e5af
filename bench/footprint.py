"""Footprint: how long Baton takes to start and how much memory the default team holds.

1. Cold `baton run` of the default team on a fresh local Ray (the CLI starts Ray, the agents,
   runs the task, stops). Floor: a bare `ray.init()` + `ray.shutdown()` on a fresh local Ray
   in the same run; the figure is the wall time and its ratio to that floor.
2. Warm `baton run --server`: a `baton serve` on its own local Ray is up; the overhead is the
   CLI's wall time minus the run's own duration as the service recorded it.
3. Memory: the resident set of every process of that `baton serve` (the service, Ray's own
   processes, the ledger and the agent hosts), by kind.

Run: .venv/bin/python bench/footprint.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
BATON = [sys.executable, "-m", "orchestrator"]
TASK = "Research the history of the Ray project, check the facts, and calculate 17 * 23 + 4"
REPEATS = 3


def _env(store: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return {**env, "BATON_STORE_URL": f"sqlite+aiosqlite:///{store}", "BATON_NO_COLOR": "1"}


def _timed(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    began = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return time.perf_counter() - began, done.stdout


def cold(folder: Path) -> tuple[float, float]:
    """Median seconds of a bare Ray start and stop, and of a cold `baton run`."""
    env = _env(folder / "cold.db")
    floor = [
        _timed(
            [sys.executable, "-c", "import ray; ray.init(include_dashboard=False); ray.shutdown()"],
            env,
        )[0]
        for _ in range(REPEATS)
    ]
    runs = [_timed([*BATON, "run", TASK], env)[0] for _ in range(REPEATS)]
    return statistics.median(floor), statistics.median(runs)


def _kind(process: psutil.Process) -> str:
    try:
        line = " ".join(process.cmdline())
        name = process.name()
    except psutil.Error:
        return "gone"
    if "orchestrator serve" in line:
        return "baton serve (service)"
    for title in ("AgentHost", "LedgerActor"):
        if title in line or title in name:
            return f"ray::{title}"
    if "ray::IDLE" in line or "default_worker.py" in line:
        return "ray worker (idle)"
    for part in ("gcs_server", "raylet", "dashboard", "log_monitor", "runtime_env", "monitor"):
        if part in line:
            return f"ray {part}"
    return name


def warm_and_memory(folder: Path) -> tuple[float, dict[str, list[float]]]:
    env = _env(folder / "serve.db")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    service = subprocess.Popen(
        [*BATON, "serve", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        with httpx.Client() as probe:  # one client: each new one loads the CA bundle
            while True:
                try:
                    if probe.get(f"{url}/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError("baton serve did not become ready")
                time.sleep(0.2)
        overheads = []
        for _ in range(REPEATS):
            wall, out = _timed([*BATON, "run", "--server", url, "--json", TASK], env)
            overheads.append(wall - float(json.loads(out)["duration_s"]))
        memory: dict[str, list[float]] = defaultdict(list)
        root = psutil.Process(service.pid)
        for process in [root, *root.children(recursive=True)]:
            try:
                memory[_kind(process)].append(process.memory_info().rss / 2**20)
            except psutil.Error:
                pass
        return statistics.median(overheads), memory
    finally:
        service.terminate()
        service.wait(timeout=60)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        floor, run = cold(folder)
        overhead, memory = warm_and_memory(folder)
    print(
        f"cold baton run:   {run:6.2f} s   bare Ray start+stop {floor:5.2f} s   "
        f"ratio {run / floor:.2f}"
    )
    print(f"warm baton run:   {overhead:6.2f} s of overhead (CLI wall time - run duration)")
    print("resident memory of `baton serve` with the default team:")
    total = 0.0
    for kind, sizes in sorted(memory.items(), key=lambda item: -sum(item[1])):
        total += sum(sizes)
        print(f"  {kind:28s} {len(sizes):3d} processes  {sum(sizes):7.0f} MiB")
    print(f"  {'total':28s} {sum(map(len, memory.values())):3d} processes  {total:7.0f} MiB")


if __name__ == "__main__":
    main()
