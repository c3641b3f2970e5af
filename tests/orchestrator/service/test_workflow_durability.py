"""Workflows are durable as DBOS and Temporal workflows are: a workflow of four calls, killed
after its second (the service's processes SIGKILLed, or its agents' host), runs again from the
top once it is back, and the calls it had made take their results from the record (the provider,
one of ours on 127.0.0.1, never sees a model call twice). Changed to call in another order before
it resumes, it fails saying which call differs from the record."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.openai_server import FakeOpenAI
from tests.service import (
    ServiceProcess,
    all_events,
    follow,
    kill_everything,
    marked_processes,
    submit,
)

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.long, pytest.mark.heavy]

# The manager calls the worker four times in order; each worker call asks the provider twice
# (a 1.5 s tool between): eight model calls in an uninterrupted run.
CONFIG = """
name: flowing
limits: {{deadline_s: 120}}
agents:
  - name: manager
    description: Four steps, in order.
    workflow: tests.flows:{flow}
    delegates: [worker]
  - name: worker
    description: Does one step.
    tools: [tests.testkit:slow_step]
    model:
      name: openai/gpt-4o-mini
      params: {{api_base: "{base}", api_key: sk-test-not-a-key}}
"""
STEPS = ("first", "second", "third", "fourth")


@pytest.fixture
def provider() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI("slow_step", {"seconds": 1.5})
    yield fake
    fake.close()


def asked(fake: FakeOpenAI) -> list[str]:
    """Which step each model call the provider saw was for."""
    said = []
    for request in fake.requests:
        text = " ".join(str(m.get("content")) for m in request["body"]["messages"])
        said += [step for step in STEPS if f"step {step}" in text]
    return said


def service_for(tmp_path: Path, flow: str, fake: FakeOpenAI) -> ServiceProcess:
    config = tmp_path / "flowing.yaml"
    config.write_text(CONFIG.format(flow=flow, base=fake.base_url))
    service = ServiceProcess(
        config, f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}", "", tmp_path / "serve.log",
        BATON_INSTANCE_ID="flowing-test", BATON_TEST_MARK=f"flowing-{os.getpid()}-{tmp_path.name}",
    )  # fmt: skip
    service._env.pop("RAY_ADDRESS")  # a local Ray of its own: it dies with the service
    return service


async def until_third_call_works(service: ServiceProcess, run_id: str) -> None:
    """Until the workflow's third call is in its tool (the first two have ended)."""
    tools = 0
    async for _, kind, data in follow(service.url, run_id):
        tools += kind == "tool_started" and data["agent"] == "worker"
        if tools == 3:
            return


async def test_a_workflow_killed_with_its_service_goes_on_without_repeating_a_model_call(
    tmp_path: Path, provider: FakeOpenAI
) -> None:
    service = service_for(tmp_path, "counted", provider)
    service.start()
    try:
        run_id = (await submit(service.url, {"task": "count"})).json()["id"]
        await until_third_call_works(service, run_id)
        assert asked(provider) == ["first", "first", "second", "second", "third"]
        kill_everything(service, service._env["BATON_TEST_MARK"])
        service.start()
        events = await all_events(service.url, run_id)
        async with httpx.AsyncClient(base_url=service.url) as client:
            run = (await client.get(f"/v1/runs/{run_id}")).json()
    finally:
        service.stop()
    assert events[-1][2]["status"] == "succeeded", events[-1]
    assert run["resumes"] == 1
    # Each model call once: the third call's first one came from the record, its answer and the
    # fourth call's two were asked after the restart.
    assert asked(provider) == [
        "first", "first", "second", "second", "third", "third", "fourth", "fourth",
    ]  # fmt: skip
    assert run["output"].count("The tool said") == 4


async def test_a_workflow_whose_host_is_killed_goes_on_without_repeating_a_model_call(
    tmp_path: Path, provider: FakeOpenAI
) -> None:
    service = service_for(tmp_path, "counted", provider)
    service.start()
    try:
        run_id = (await submit(service.url, {"task": "count"})).json()["id"]
        await until_third_call_works(service, run_id)
        processes = marked_processes(service._env["BATON_TEST_MARK"])
        [host] = [p for p, name in processes.items() if "AgentHost" in name]
        host.send_signal(signal.SIGKILL)  # the workflow and its worker die with it
        events = await all_events(service.url, run_id)
    finally:
        service.stop()
    assert events[-1][2]["status"] == "succeeded", events[-1]
    assert "host_restarted" in [kind for _, kind, _ in events]
    assert asked(provider) == [
        "first", "first", "second", "second", "third", "third", "fourth", "fourth",
    ]  # fmt: skip


async def test_a_workflow_changed_to_call_in_another_order_fails_naming_both_calls(
    tmp_path: Path, provider: FakeOpenAI
) -> None:
    service = service_for(tmp_path, "counted", provider)
    service.start()
    try:
        run_id = (await submit(service.url, {"task": "count"})).json()["id"]
        await until_third_call_works(service, run_id)
        kill_everything(service, service._env["BATON_TEST_MARK"])
        # Its code changes (another version of the team) before the run resumes.
        service.config.write_text(CONFIG.format(flow="counted_swapped", base=provider.base_url))
        service.start()
        events = await all_events(service.url, run_id)
    finally:
        service.stop()
    end = events[-1][2]
    assert end["status"] == "failed"
    assert end["error"] == (
        "the workflow is not deterministic: its call 1 is worker ('step second'), where the "
        "recorded run called worker ('step first'); a workflow must make the same calls, in the "
        "same order, each time it runs"
    )
    assert "second" not in asked(provider)[5:]  # nothing was called past the difference
