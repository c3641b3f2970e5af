"""Versions that roll, for real: a `baton serve` process is given a new version of its team
while runs are in flight; they finish on the version they started on, new runs go to the new
one, and the old version's agents stop once it holds no run."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import ray

from orchestrator.cli.discovery import find_server
from orchestrator.store import absolute_store_url
from orchestrator.system.config import load_config
from tests.service import ServiceProcess, follow

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.heavy]


def team(release: str, *, broken: bool = False) -> str:
    """The team at a release: each agent's answer says which release gave it."""
    return f"""
name: rollout
release: {release}
limits: {{deadline_s: 60, approval_timeout_s: 120}}
agents:
  - name: clerk
    description: Makes payments, once a person approves.
    tools: [{{function: tests.testkit:stamp, confirm: true}}]
    model:
      name: baton/scripted
      params:
        replies:
          - {{tool_calls: [{{name: stamp, arguments: {{text: payment 42 EUR}}}}]}}
          - {{content: paid on {release}}}
  - name: sleeper
    description: Rests a while, then answers.
    instructions: Rest, then say so. ({release})
    tools: [tests.testkit:slow_step]
    model:
      name: baton/scripted
      params:
        replies:
          - {{tool_calls: [{{name: slow_step, arguments: {{seconds: 4}}}}]}}
          - {{content: rested on {release}}}
  - name: greeter
    description: Says hello.
    {"delegates: [nobody]" if broken else ""}
    model: {{name: baton/scripted, params: {{replies: [{{content: hello from {release}}}]}}}}
"""


@pytest.fixture
def service(ray_address: str, tmp_path: Path) -> Iterator[ServiceProcess]:
    config = tmp_path / "team.yaml"
    config.write_text(team("v1"))
    served = ServiceProcess(
        config, f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}", ray_address, tmp_path / "serve.log"
    )
    served.start()
    yield served
    served.stop()


async def until(url: str, run_id: str, kind: str) -> dict[str, Any]:
    """The data of the run's first event of this kind (followed over SSE)."""
    async with asyncio.timeout(60):
        async for _, seen, data in follow(url, run_id):
            if seen == kind:
                return data
    raise AssertionError(f"the run ended without {kind}")


async def finished(client: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    """The run once it has ended, with its root span."""
    await until(str(client.base_url), run_id, "run_finished")
    run = (await client.get(f"/v1/runs/{run_id}")).json()
    [root] = (await client.get(f"/v1/runs/{run_id}/trace")).json()["spans"]
    return {**run, "root": root["attributes"]}


async def versions(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    served = (await client.get("/v1/service")).json()
    return list(served["versions"])


async def eventually(check: Callable[[], Awaitable[bool]], timeout_s: float = 60) -> None:
    """Wait until `check` holds (what the service does in the background: asked again)."""
    async with asyncio.timeout(timeout_s):
        while not await check():  # noqa: ASYNC110 (a condition in another process)
            await asyncio.sleep(0.1)


def named_actors(prefix: str) -> set[str]:
    found = ray.util.list_named_actors(all_namespaces=True)
    return {a["name"] for a in found if a["name"].startswith(prefix)}


async def test_runs_in_flight_finish_on_their_version_and_new_runs_take_the_new_one(
    service: ServiceProcess, tmp_path: Path
) -> None:
    v1 = load_config(service.config)
    prefix = v1.actor_prefix(absolute_store_url(f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"))
    assert len(named_actors(prefix)) > 1  # its hosts and its ledger
    async with httpx.AsyncClient(base_url=service.url, timeout=60) as client:
        # On v1: a payment waiting for its approval, and a rest under way.
        paying = (await client.post("/v1/runs", json={"task": "pay", "agent": "clerk"})).json()
        asked = await until(service.url, paying["id"], "approval_requested")
        resting = (await client.post("/v1/runs", json={"task": "rest", "agent": "sleeper"})).json()
        await until(service.url, resting["id"], "tool_started")

        # v2 is written over the file and the service reads it again.
        service.config.write_text(team("v2"))
        rolled = await client.post("/v1/service/versions")
        assert rolled.status_code == 200, rolled.text
        now = rolled.json()
        v2 = load_config(service.config).version
        assert (now["version"], now["previous"]) == (v2, v1.version)
        by_version = {v["version"]: v for v in now["running"]}
        assert by_version[v2]["current"] and not by_version[v1.version]["current"]
        assert by_version[v1.version]["runs"] >= 1  # the payment waits on it

        # New runs go to v2, and say so.
        greeted = (await client.post("/v1/runs", json={"task": "hi", "agent": "greeter"})).json()
        greeting = await finished(client, greeted["id"])
        assert greeting["output"] == "hello from v2"
        assert greeting["version"] == greeting["root"]["baton.system.version"] == v2
        served = (await client.get("/v1/service")).json()
        assert served["system_version"] == v2
        # `baton run` on this machine uses the server with v2's config, no longer with v1's.
        store = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
        found = await asyncio.to_thread(find_server, load_config(service.config), store, False)
        assert found == service.url
        assert await asyncio.to_thread(find_server, v1, store, False) is None

        # The rest that was under way finished on v1.
        rest = await finished(client, resting["id"])
        assert rest["output"] == "rested on v1"
        assert rest["version"] == rest["root"]["baton.system.version"] == v1.version

        # The payment waited across the rollout; approved now, it is paid on v1.
        approved = await client.post(
            f"/v1/runs/{paying['id']}/approvals/{asked['call_id']}", json={"approve": True}
        )
        assert approved.status_code == 200, approved.text
        payment = await finished(client, paying["id"])
        assert payment["status"] == "succeeded" and payment["output"] == "paid on v1"
        assert payment["version"] == payment["root"]["baton.system.version"] == v1.version

        # Holding no run, v1 is retired: its agents stop (its ledger serves v2).
        async def retired() -> bool:
            return [v["version"] for v in await versions(client)] == [v2]

        async def stopped() -> bool:
            return named_actors(prefix) == {f"{prefix}.ledger"}

        await eventually(retired)
        await eventually(stopped)

        # The same config again changes nothing.
        again = (await client.post("/v1/service/versions")).json()
        assert (again["version"], again["previous"]) == (v2, None)

        # A broken config is refused where it is wrong, and v2 goes on serving.
        refused = await client.post(
            "/v1/service/versions",
            content=team("v3", broken=True),
            headers={"Content-Type": "application/yaml"},
        )
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["code"] == "version_refused" and "nobody" in error["message"]
        assert any("<request body>:" in issue for issue in error["details"]["issues"])
        assert [v["version"] for v in await versions(client)] == [v2]

        # SIGHUP reads the file again: v3 takes new runs.
        service.config.write_text(team("v3"))
        v3 = load_config(service.config).version
        service.signal(signal.SIGHUP)

        async def serving_v3() -> bool:
            return bool((await client.get("/v1/service")).json()["system_version"] == v3)

        await eventually(serving_v3)
        # ...and says so in its log.
        said = f"SIGHUP: version {v3} serves new runs (was {v2})"

        async def logged() -> bool:
            return said in service.log.read_text()

        await eventually(logged, 10)
        greeted = (await client.post("/v1/runs", json={"task": "hi", "agent": "greeter"})).json()
        assert (await finished(client, greeted["id"]))["output"] == "hello from v3"

        # A fork may choose a version that runs here (v3's instructions differ: it goes live);
        # one that does not is refused.
        forked = await client.post(f"/v1/runs/{rest['id']}/fork", json={"version": v1.version})
        assert forked.status_code == 409, forked.text
        assert forked.json()["error"]["code"] == "version_not_running"
        forked = await client.post(f"/v1/runs/{rest['id']}/fork", json={"version": v3})
        assert forked.status_code == 202, forked.text
        refork = await finished(client, forked.json()["id"])
        assert refork["output"] == "rested on v3" and refork["version"] == v3
