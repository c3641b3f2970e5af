"""Shared state is part of a run's step log: a run SIGKILLed with its service (its own local
Ray too) after a tool wrote the state resumes with that state; a fork from a later step begins
from the state of that moment, not from the run's start nor its end."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from tests.service import ServiceProcess, all_events, follow, kill_everything, submit

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.long, pytest.mark.heavy]

# The counter adds to the tally, rests (3 s: killed then), adds again, and answers.
CONFIG = """
name: tallying
limits: {deadline_s: 120}
state:
  schema: {type: object, properties: {tally: {type: integer}}}
  reducers: {tally: add}
agents:
  - name: counter
    tools: [tests.testkit:tally, tests.testkit:slow_step]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: tally, arguments: {}}]}
          - {tool_calls: [{name: slow_step, arguments: {seconds: 3}}]}
          - {tool_calls: [{name: tally, arguments: {}}]}
          - {content: counted}
"""


async def test_a_run_killed_after_writing_the_state_resumes_with_it_and_a_fork_begins_there(
    tmp_path: Path,
) -> None:
    config = tmp_path / "tallying.yaml"
    config.write_text(CONFIG)
    mark = f"tallying-{os.getpid()}-{tmp_path.name}"
    service = ServiceProcess(
        config, f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}", "", tmp_path / "serve.log",
        BATON_INSTANCE_ID="tallying-test", BATON_TEST_MARK=mark,
    )  # fmt: skip
    service._env.pop("RAY_ADDRESS")  # a local Ray of its own: it dies with the service
    service.start()
    try:
        run_id = (await submit(service.url, {"task": "count"})).json()["id"]
        async for _, kind, data in follow(service.url, run_id):
            if kind == "tool_started" and data["tool"] == "slow_step":
                break  # the tally was written (and recorded with its result) before this
        kill_everything(service, mark)
        service.start()
        events = await all_events(service.url, run_id)
        async with httpx.AsyncClient(base_url=service.url, timeout=60) as client:
            run = (await client.get(f"/v1/runs/{run_id}")).json()
            assert events[-1][2]["status"] == "succeeded", events[-1]
            assert run["resumes"] == 1
            # The second tally saw the first's write, which the resumed run took from the
            # record (without it the tally would have begun again at 0).
            assert run["state"] == {"tally": 2}, run["state"]
            # A fork from the second tally: everything before it from the record, the state
            # as it was then (the tally at 1), the rest live.
            second = [
                d["span_id"]
                for _, kind, d in events
                if kind == "tool_started" and d["tool"] == "tally"
            ][-1]
            forked = await client.post(f"/v1/runs/{run_id}/fork", json={"from_span": second})
            assert forked.status_code == 202, forked.text
            fork_id = forked.json()["id"]
            fork_events = await all_events(service.url, fork_id)
            fork = (await client.get(f"/v1/runs/{fork_id}")).json()
    finally:
        service.stop()
    assert fork_events[-1][2]["status"] == "succeeded", fork_events[-1]
    # The first write came from the record (applied again), the second was made live: had
    # the fork begun from the run's start state, it would end at 1; from its end state, at 3.
    assert fork["state"] == {"tally": 2}
    said = [d["state"] for _, kind, d in fork_events if kind == "state_changed"]
    assert said == [{"tally": 1}, {"tally": 2}], said
