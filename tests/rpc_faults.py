"""A team's runs on a Ray of their own whose actor calls fail now and then, as Ray's own fault
tests make them fail (`RAY_testing_rpc_failure`: a call's request lost before it reaches its
actor, or its reply lost after the actor ran it).

Run as a process of its own (`python -m tests.rpc_faults FAULTS RUNS FOLDER`): FAULTS is the JSON
Ray reads (set before this process starts Ray, so every process of it has it). It writes
FOLDER/result.json: each run's status and error, what the at-most-once tool and the idempotent
tool wrote (FOLDER/parcels.txt, FOLDER/keys.txt), and the runs' events as stored.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import ray

from agents.ray.pool import PoolOptions
from orchestrator.engine import Engine, Execution, Submission
from orchestrator.store import RunMeta, RunStore, absolute_store_url
from tests.testkit import config

# The boss delegates to the helper, which counts parcels (at most once), calls a flaky
# idempotent service (its first try of each call fails; the retry must reuse the call's key),
# takes a slow step and answers.
TEAM = """
name: rpc-faults
env: [PARCELS_FILE]
agents:
  - name: boss
    delegates: [helper]
    description: boss
    model:
      name: baton/scripted
      params:
        replies:
          - {{tool_calls: [{{name: delegate_to_helper, arguments: {{task: help}}}}]}}
          - {{content: done}}
  - name: helper
    description: helps
    tools:
      - tests.testkit:count_parcels
      - {{function: "tests.testkit:flaky", idempotent: true, retries: 2}}
      - {{function: "tests.testkit:slow_step", idempotent: true}}
    model:
      name: baton/scripted
      params:
        replies:
          - {{tool_calls: [{{name: count_parcels, arguments: {{task: parcels}}}}]}}
          - {{tool_calls: [{{name: flaky, arguments: {{path: "{keys}"}}}}]}}
          - {{tool_calls: [{{name: slow_step, arguments: {{seconds: 0.2}}}}]}}
          - {{content: helped}}
"""


async def _runs(count: int, folder: Path) -> dict[str, object]:
    store_url = f"sqlite+aiosqlite:///{folder / 'runs.db'}"
    store = await RunStore.open(store_url)
    system = config(TEAM.format(keys=folder / "keys.txt"))
    options = PoolOptions(
        namespace="rpc-faults",
        env={"PARCELS_FILE": str(folder / "parcels.txt")},
        store_url=absolute_store_url(store_url),
    )
    engine = Engine(system, options)
    ended: dict[str, dict[str, object]] = {}
    try:
        engine.start()
        ids = [f"run-{n}" for n in range(count)]
        for run_id in ids:
            await store.add(Submission("help"), RunMeta(run_id, system.config.name, {}))
        results = await asyncio.wait_for(
            asyncio.gather(
                *(engine.run(Submission("help"), Execution(run_id)) for run_id in ids),
                return_exceptions=True,
            ),
            timeout=300,
        )
        for run_id, result in zip(ids, results, strict=True):
            if isinstance(result, BaseException):
                ended[run_id] = {"status": "raised", "error": repr(result)}
            else:
                events = [e.type for _, e in await store.events(run_id)]
                ended[run_id] = {
                    "status": result.status.value,
                    "error": result.error,
                    "output": result.output,
                    "events": events,
                }
    finally:
        engine.stop()
        await store.close()
    return ended


def main() -> None:
    faults, count, folder = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    ray.init(
        address="local",  # a Ray of its own, beside the session's
        namespace="rpc-faults",
        include_dashboard=False,
        logging_level="ERROR",
        log_to_driver=False,
        _system_config={"testing_rpc_failure": faults},
    )
    try:
        ended = asyncio.run(_runs(count, folder))
    finally:
        ray.shutdown()

    def lines(name: str) -> list[str]:
        path = folder / name
        return path.read_text().splitlines() if path.exists() else []

    result = {"runs": ended, "parcels": lines("parcels.txt"), "keys": lines("keys.txt")}
    (folder / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
