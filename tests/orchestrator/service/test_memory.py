"""Long-term memory through a real service: what an agent remembers in one thread another
recalls in another thread (its tenant's only, per user by the shared state), over HTTP it is
read, searched, written and forgotten per tenant, and it outlives the service. A thread's
`memory: thread` agent sees its earlier turns' tool results. The models are an OpenAI-compatible
server of ours, so litellm is exercised over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from orchestrator.access import AccessFile, new_key
from tests.openai_server import FakeOpenAI
from tests.service import ServiceProcess, all_events
from tests.testkit import OtlpReceiver

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.heavy]

TEAM = """
name: keepers
entry: keeper
agents:
  - name: keeper
    description: Keeps what it is told, for each user.
    long_term_memory: {{namespace: "users.{{state.user}}"}}
    model: {{name: openai/gpt-4o-mini, params: {{api_base: "{keep}", api_key: sk-test-not-a-key}}}}
  - name: finder
    description: Finds what was kept for the user.
    long_term_memory: {{namespace: "users.{{state.user}}", read_only: true}}
    model: {{name: openai/gpt-4o-mini, params: {{api_base: "{find}", api_key: sk-test-not-a-key}}}}
  - name: clerk
    description: Works sums out, and remembers them in the thread.
    memory: thread
    tools: [configs.tools:calculate]
    model: {{name: openai/gpt-4o-mini, params: {{api_base: "{calc}", api_key: sk-test-not-a-key}}}}
"""


@pytest.fixture(scope="module")
def providers() -> Iterator[dict[str, FakeOpenAI]]:
    fakes = {
        "keep": FakeOpenAI("remember", {"key": "favourite_city", "value": "Lisbon"}),
        "find": FakeOpenAI("recall", {"query": "which city"}),
        "calc": FakeOpenAI("calculate", {"expression": "6 * 7"}),
    }
    yield fakes
    for fake in fakes.values():
        fake.close()


@pytest.fixture(scope="module")
def backend() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()  # a trace backend
    yield receiver
    receiver.close()


@pytest.fixture(scope="module")
def served(
    ray_address: str,
    tmp_path_factory: pytest.TempPathFactory,
    providers: dict[str, FakeOpenAI],
    backend: OtlpReceiver,
) -> Iterator[tuple[ServiceProcess, dict[str, dict[str, str]]]]:
    folder = tmp_path_factory.mktemp("memory")
    (folder / "team.yaml").write_text(TEAM.format(**{k: f.base_url for k, f in providers.items()}))
    auth, access = {}, AccessFile()
    for name, tenant in (("acme-app", "acme"), ("globex-app", "globex")):
        key, entry = new_key(name, tenant, ["submit", "read"])
        access.keys.append(entry)
        auth[tenant] = {"Authorization": f"Bearer {key}"}
    access.write(folder / "access.yaml")
    service = ServiceProcess(
        folder / "team.yaml",
        f"sqlite+aiosqlite:///{folder / 'runs.db'}",
        ray_address,
        folder / "serve.log",
        BATON_INSTANCE_ID="memory-test",
        BATON_ACCESS_FILE=str(folder / "access.yaml"),
        OTEL_EXPORTER_OTLP_ENDPOINT=backend.endpoint,
    )
    service.start(headers=auth["acme"])
    yield service, auth
    service.stop()


async def _turn(
    client: httpx.AsyncClient, url: str, thread: str, task: str, agent: str
) -> dict[str, Any]:
    """A turn of a thread, followed to its end: its run."""
    made = await client.post(f"/v1/threads/{thread}/runs", json={"task": task, "agent": agent})
    assert made.status_code == 202, made.text
    run_id = made.json()["id"]
    await all_events(url, run_id, Authorization=client.headers["Authorization"])
    return dict((await client.get(f"/v1/runs/{run_id}")).json())


async def _thread_of(client: httpx.AsyncClient, user: str) -> str:
    """A new thread whose shared state names its user (as ADK's session state would)."""
    thread = (await client.post("/v1/threads")).json()["id"]
    patched = await client.patch(
        f"/v1/threads/{thread}/state", json={"values": {"user": user}, "version": 0}
    )
    assert patched.status_code == 200, patched.text
    return str(thread)


def _spans(nodes: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for node in nodes:
        yield node
        yield from _spans(node.get("children") or [])


async def test_what_one_thread_remembers_another_recalls_for_its_tenant_and_user_only(
    served: tuple[ServiceProcess, dict[str, dict[str, str]]], backend: OtlpReceiver
) -> None:
    service, auth = served
    url = service.url
    async with (
        httpx.AsyncClient(base_url=url, timeout=60, headers=auth["acme"]) as acme,
        httpx.AsyncClient(base_url=url, timeout=60, headers=auth["globex"]) as globex,
    ):
        kept = await _turn(acme, url, await _thread_of(acme, "alice"), "I love Lisbon", "keeper")
        assert kept["status"] == "succeeded" and "remembered 'favourite_city'" in kept["output"]
        item = (await acme.get("/v1/memory/users.alice/favourite_city")).json()
        assert item["value"] == "Lisbon" and item["written_by"] == f"run:{kept['id']}"

        # Another thread of the same user finds it; each recall is a span of the run's trace.
        found = await _turn(acme, url, await _thread_of(acme, "alice"), "my city?", "finder")
        assert found["status"] == "succeeded" and "Lisbon" in found["output"], found
        trace = (await acme.get(f"/v1/runs/{found['id']}/trace")).json()
        recalls = [s for s in _spans(trace["spans"]) if s["name"] == "baton.memory recall"]
        assert [
            (s["attributes"]["baton.memory.namespace"], s["attributes"]["baton.memory.found"])
            for s in recalls
        ] == [("users.alice", 1)]
        # Another user of the tenant, and another tenant's same user, find nothing.
        bob = await _turn(acme, url, await _thread_of(acme, "bob"), "my city?", "finder")
        assert "nothing remembered matches" in bob["output"]
        other = await _turn(globex, url, await _thread_of(globex, "alice"), "my city?", "finder")
        assert "nothing remembered matches" in other["output"]
        assert (await globex.get("/v1/memory/users.alice/favourite_city")).status_code == 404

        # Over HTTP: each tenant writes its own; a search reaches under the namespace.
        written = await globex.put("/v1/memory/users.alice/favourite_city", json={"value": "Oslo"})
        assert written.status_code == 201 and written.json()["written_by"] == "globex-app"
        replaced = await globex.put("/v1/memory/users.alice/favourite_city", json={"value": "Rome"})
        assert replaced.status_code == 200
        searched = (await acme.get("/v1/memory/users", params={"q": "lisbon"})).json()
        assert [(i["namespace"], i["value"]) for i in searched["items"]] == [
            ("users.alice", "Lisbon")
        ]
        assert (await globex.get("/v1/memory/users", params={"q": "lisbon"})).json()["items"] == []
        # Each of those is a span of its own at the trace backend, its tenant's and what it did
        # (sent in the background: until they are there).
        for _ in range(200):
            put = [s for s in backend.spans if s["name"] == "baton.memory put"]
            searches = [s for s in backend.spans if s["name"] == "baton.memory search"]
            if len(put) == 2 and len(searches) == 2:
                break
            await asyncio.sleep(0.05)
        assert [
            (s["attributes"]["baton.tenant"], s["attributes"]["baton.memory.key"]) for s in put
        ] == [("globex", "favourite_city")] * 2
        [search] = [s for s in searches if s["attributes"]["baton.tenant"] == "acme"]
        assert search["attributes"]["baton.memory.found"] == "1"
        refused = await acme.put("/v1/memory/users/essay", json={"value": "x" * 70_000})
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_memory"
        bad = await acme.get("/v1/memory/users..alice/city")
        assert bad.status_code == 422
        assert (
            await acme.get("/v1/memory/users.alice/x", params={"tenant": "globex"})
        ).status_code == 404

        # A new service on the same store: the items are there; then one is forgotten.
        service.stop()
        service.start(headers=auth["acme"])
        again = await acme.get("/v1/memory/users.alice/favourite_city")
        assert again.status_code == 200 and again.json()["value"] == "Lisbon"
        assert (await acme.delete("/v1/memory/users.alice/favourite_city")).status_code == 204
        assert (await acme.get("/v1/memory/users.alice/favourite_city")).status_code == 404
        assert (await acme.delete("/v1/memory/users.alice/favourite_city")).status_code == 404
        theirs = (await globex.get("/v1/memory/users.alice/favourite_city")).json()
        assert theirs["value"] == "Rome"


async def test_a_thread_memory_agent_sees_its_earlier_turns_tool_results(
    served: tuple[ServiceProcess, dict[str, dict[str, str]]], providers: dict[str, FakeOpenAI]
) -> None:
    service, auth = served
    calc = providers["calc"]
    async with httpx.AsyncClient(base_url=service.url, timeout=60, headers=auth["acme"]) as acme:
        thread = (await acme.post("/v1/threads")).json()["id"]
        first = await _turn(acme, service.url, thread, "what is 6 * 7?", "clerk")
        assert first["status"] == "succeeded" and first["output"] == "The tool said 42"
        asked = len(calc.requests)
        second = await _turn(acme, service.url, thread, "and what did the tool say?", "clerk")
    # Its conversation held the first turn's tool call and result (the provider, seeing a tool
    # result, answered at once without calling the tool again).
    assert second["status"] == "succeeded" and second["usage"]["model_calls"] == 1, second
    messages = calc.requests[asked]["body"]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert messages[2]["content"] == "42"
    assert messages[1]["tool_calls"][0]["id"] == messages[2]["tool_call_id"] != "call_fake_1"
