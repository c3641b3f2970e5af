"""Threads over HTTP: turns that see the turns before them, each multitask strategy under a
concurrent submission, and a deleted thread that leaves nothing of itself in the store."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from agents.core.events import RunStarted
from orchestrator.engine import Submission
from orchestrator.store import RunMeta, RunStore
from tests.service import KEYS, ServiceProcess, all_events

pytestmark = [pytest.mark.ray, pytest.mark.anyio]


async def new_thread(client: httpx.AsyncClient, **metadata: Any) -> str:
    # (No body at all: an empty thread.)
    body = {"json": {"metadata": metadata}} if metadata else {}
    made = await client.post("/v1/threads", **body)
    assert made.status_code == 201, made.text
    assert made.headers["Location"] == f"/v1/threads/{made.json()['id']}"
    return str(made.json()["id"])


async def turn(
    client: httpx.AsyncClient,
    thread: str,
    task: str,
    agent: str,
    strategy: str = "reject",
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    body = {"task": task, "agent": agent, "multitask_strategy": strategy}
    return await client.post(f"/v1/threads/{thread}/runs", json=body, headers=headers)


async def ended(api: str, run_id: str) -> dict[str, Any]:
    """The run's `run_finished` event's data (followed to the end)."""
    events = await all_events(api, run_id)
    assert events[-1][1] == "run_finished", events[-1]
    return events[-1][2]


async def test_each_turn_of_a_thread_sees_the_turns_before_it(api: str) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=60) as client:
        thread = await new_thread(client, user="ada")
        answers = []
        for task in ("remember the number 7", "and add 3", "what was the first thing I said?"):
            submitted = await turn(client, thread, task, "parrot")
            assert submitted.status_code == 202, submitted.text
            assert submitted.headers["Multitask-Strategy"] == "reject"
            run = submitted.json()
            assert run["thread_id"] == thread
            answers.append((await ended(api, run["id"]))["output"])
        # The scripted model answers by its place in the conversation: the third turn had the
        # two before it (without them, every turn would get the first answer).
        assert answers == ["first answer", "second answer", "third answer"]
        # The service's turn limit (3 here) says so, and what to do.
        full = await turn(client, thread, "and one more", "parrot")
        assert full.status_code == 409 and full.json()["error"]["code"] == "thread_full"
        said = full.json()["error"]
        assert "has 3 turns, and a thread takes 3 at most" in said["message"]
        assert "start a new thread" in said["message"]
        assert (said["details"]["turns"], said["details"]["max_turns"]) == (3, 3)
        read = (await client.get(f"/v1/threads/{thread}")).json()
        assert read["metadata"] == {"user": "ada"}
        assert [t["task"] for t in read["turns"]] == [
            "remember the number 7",
            "and add 3",
            "what was the first thing I said?",
        ]
        assert [t["output"] for t in read["turns"]] == answers
        # A turn that ended well offers neither a cancel nor a resume.
        assert {(t["links"]["cancel"], t["links"]["resume"]) for t in read["turns"]} == {
            (None, None)
        }
        last = read["turns"][-1]["run_id"]
        trace = (await client.get(f"/v1/runs/{last}/trace")).json()
        spans = _flat(trace["spans"])
        # Every span of a turn names its thread (the GenAI conventions' conversation id).
        assert {
            s["attributes"]["gen_ai.conversation.id"]
            for s in spans
            if "gen_ai.conversation.id" in s["attributes"]
        } == {thread}
        [chat] = [s for s in spans if s["name"].startswith("chat ")]
        sent = json.loads(chat["attributes"]["gen_ai.input.messages"])
        said = [p["content"] for m in sent for p in m["parts"] if "content" in p]
        assert said[:4] == ["remember the number 7", "first answer", "and add 3", "second answer"]
        listed = (await client.get("/v1/threads", params={"limit": 200})).json()
        [mine] = [t for t in listed["threads"] if t["id"] == thread]
        assert (mine["turn_count"], mine["title"]) == (3, "remember the number 7")
        assert mine["last_turn_at"] == read["turns"][-1]["created_at"] == read["last_turn_at"]
        assert mine["turns"] is None


async def test_an_agent_with_thread_memory_sees_its_own_earlier_exchanges(api: str) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=60) as client:
        thread = await new_thread(client)
        said = []
        for task in ("keep a note of the rent", "keep a note of the gas"):
            run = (await turn(client, thread, task, "notary")).json()
            said.append((await ended(api, run["id"]))["output"])
        # The scribe's second call in the thread saw its first exchange (a scripted model
        # answers by its place in its conversation); a run outside the thread starts fresh.
        alone = (await client.post("/v1/runs", json={"task": said[0], "agent": "notary"})).json()
        fresh = (await ended(api, alone["id"]))["output"]
    assert "- scribe: first note" in said[0] and "- scribe: second note" in said[1], said
    assert "- scribe: first note" in fresh


async def test_the_next_turn_goes_on_with_the_agent_that_answered_the_last(api: str) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=60) as client:
        # A thread whose turns go on with whoever answered last (ADK keeps that agent).
        made = await client.post("/v1/threads", json={"agent": "last"})
        assert made.status_code == 201 and made.json()["agent"] == "last", made.text
        kept = made.json()["id"]
        first = (await turn(client, kept, "refund my order", "desk")).json()
        await ended(api, first["id"])
        second = await client.post(f"/v1/threads/{kept}/runs", json={"task": "and shipping?"})
        assert second.status_code == 202, second.text
        await ended(api, second.json()["id"])
        view = (await client.get(f"/v1/threads/{kept}")).json()
        # The desk handed the first turn over to refunds, which answered: the next is its own.
        assert [(t["entry_agent"], t["answered_by"]) for t in view["turns"]] == [
            ("desk", "refunds"),
            ("refunds", "refunds"),
        ]
        # A thread without the option: one turn asks for it (`agent: last`).
        plain = await new_thread(client)
        first = (await turn(client, plain, "refund my order", "desk")).json()
        await ended(api, first["id"])
        again = (await turn(client, plain, "and shipping?", "last")).json()
        await ended(api, again["id"])
        assert (await client.get(f"/v1/runs/{again['id']}")).json()["entry_agent"] == "refunds"
        # Without it, a turn enters at the team's entry agent again.
        other = await client.post(f"/v1/threads/{plain}/runs", json={"task": "and then?"})
        await ended(api, other.json()["id"])
        turns = (await client.get(f"/v1/threads/{plain}")).json()["turns"]
        assert turns[-1]["entry_agent"] not in ("refunds", "last"), turns[-1]
        # A word the field does not take names the ones it does.
        wrong = await client.post("/v1/threads", json={"agent": "nobody"})
        assert wrong.status_code == 422 and "'last'" in wrong.text, wrong.text


async def test_a_thread_keeps_its_state_across_turns_and_a_change_names_its_version(
    api: str,
) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=60) as client:
        thread = await new_thread(client)
        runs = []
        for _ in range(2):
            run = (await turn(client, thread, "add to the tally", "keeper")).json()
            await ended(api, run["id"])
            runs.append((await client.get(f"/v1/runs/{run['id']}")).json())
        # Each turn began with the state the one before ended with (the tally adds up).
        said = [_flat([r["tree"]])[0]["children"] for r in runs]
        assert [r["state"] for r in runs] == [{"tally": 1}, {"tally": 2}], said
        view = (await client.get(f"/v1/threads/{thread}")).json()
        assert (view["state"], view["state_version"]) == ({"tally": 2}, 2)
        # A person changes it, naming the version read; the next turn begins with it.
        changed = await client.patch(
            f"/v1/threads/{thread}/state",
            json={"values": {"tally": 10, "note": "hi"}, "version": 2},
        )
        assert changed.status_code == 200, changed.text
        assert (changed.json()["state"], changed.json()["state_version"]) == (
            {"tally": 10, "note": "hi"},
            3,
        )
        stale = await client.patch(
            f"/v1/threads/{thread}/state", json={"values": {"note": "late"}, "version": 2}
        )
        assert stale.status_code == 409 and stale.json()["error"]["code"] == "state_conflict"
        assert stale.json()["error"]["details"]["current_version"] == 3
        wrong = await client.patch(
            f"/v1/threads/{thread}/state", json={"values": {"tally": "ten"}, "version": 3}
        )
        assert wrong.status_code == 422 and wrong.json()["error"]["code"] == "invalid_state"
        assert "state key 'tally'" in wrong.json()["error"]["message"]
        third = (await turn(client, thread, "add to the tally", "keeper")).json()
        await ended(api, third["id"])
        view = (await client.get(f"/v1/threads/{thread}")).json()
        assert view["state"] == {"tally": 11, "note": "hi"}


async def test_another_tenant_can_neither_read_nor_change_a_threads_state(
    tenanted: ServiceProcess, access_keys: dict[str, str]
) -> None:
    acme = {"Authorization": f"Bearer {access_keys['acme']}"}
    globex = {"Authorization": f"Bearer {access_keys['globex']}"}
    async with httpx.AsyncClient(base_url=tenanted.url, timeout=60) as client:
        thread = (await client.post("/v1/threads", headers=acme)).json()["id"]
        run = (await turn(client, thread, "add to the tally", "keeper", headers=acme)).json()
        assert (
            "run_finished" in (await client.get(f"/v1/runs/{run['id']}/events", headers=acme)).text
        )
        assert (await client.get(f"/v1/threads/{thread}", headers=acme)).json()["state"] == {
            "tally": 1
        }
        read = await client.get(f"/v1/threads/{thread}", headers=globex)
        patched = await client.patch(
            f"/v1/threads/{thread}/state",
            json={"values": {"tally": 0}, "version": 1},
            headers=globex,
        )
        assert (read.status_code, patched.status_code) == (404, 404)
        kept = (await client.get(f"/v1/threads/{thread}", headers=acme)).json()
        assert kept["state"] == {"tally": 1}


def _flat(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for n in nodes for s in [n, *_flat(n["children"])]]


async def test_a_burst_of_twenty_to_one_thread_starts_exactly_one(api: str) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=60) as client:
        thread = await new_thread(client)
        answers = await asyncio.gather(*(turn(client, thread, "doze", "dozer") for _ in range(20)))
        codes = Counter(a.status_code for a in answers)
        assert codes == {202: 1, 409: 19}, codes
        busy = next(a for a in answers if a.status_code == 409).json()["error"]
        assert busy["code"] == "thread_busy" and "multitask_strategy" in busy["message"]
        refused = next(a for a in answers if a.status_code == 409)
        assert refused.headers["Multitask-Strategy"] == "reject"
        assert busy["details"]["multitask_strategies"] == ["enqueue", "interrupt", "rollback"]
        [accepted] = [a.json()["id"] for a in answers if a.status_code == 202]
        await client.post(f"/v1/runs/{accepted}/cancel")
        assert (await ended(api, accepted))["status"] == "cancelled"


async def test_a_retried_turn_gets_its_run_while_it_is_under_way(api: str) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=60) as client:
        thread = await new_thread(client)
        key = {"Idempotency-Key": uuid.uuid4().hex}
        first = await turn(client, thread, "doze", "dozer", headers=key)
        again = await turn(client, thread, "doze", "dozer", headers=key)
        # Not "thread_busy": the retry is the same submission, and gets the same run.
        assert (first.status_code, again.status_code) == (202, 202), again.text
        assert first.json()["id"] == again.json()["id"]
        await client.post(f"/v1/runs/{first.json()['id']}/cancel")
        assert (await ended(api, first.json()["id"]))["status"] == "cancelled"


async def test_a_burst_to_one_thread_through_two_replicas_starts_exactly_one(
    api: str, guarded: ServiceProcess
) -> None:
    async with (
        httpx.AsyncClient(base_url=api, timeout=60) as here,
        httpx.AsyncClient(
            base_url=guarded.url, timeout=60, headers={"Authorization": f"Bearer {KEYS[1]}"}
        ) as there,
    ):
        # Six threads, each sent two turns at once, one through each replica (the replicas'
        # in-process locks do not see each other's submissions).
        threads = [await new_thread(here) for _ in range(6)]
        answers = await asyncio.gather(
            *(turn(c, t, "doze", "dozer") for t in threads for c in (here, there))
        )
        accepted = [a.json()["id"] for a in answers if a.status_code == 202]
        for run_id in accepted:
            await here.post(f"/v1/runs/{run_id}/cancel")
        # The thread is held in the store while a submission is decided: whichever replica
        # takes one, the other sees its run (the guarded replica may refuse by its rate limit).
        pairs = zip(answers[::2], answers[1::2], strict=True)
        for thread, pair in zip(threads, pairs, strict=True):
            codes = sorted(a.status_code for a in pair)
            assert codes in ([202, 409], [202, 429], [409, 429]), (thread, codes)
        for run_id in accepted:
            assert (await ended(api, run_id))["status"] == "cancelled"


async def test_an_enqueued_turn_starts_when_the_one_before_it_ends(api: str) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=60) as client:
        thread = await new_thread(client)
        first = (await turn(client, thread, "wait", "sleeper")).json()
        second = await turn(client, thread, "calculate 2 + 2", "analyst", "enqueue")
        assert second.status_code == 202 and second.headers["Multitask-Strategy"] == "enqueue"
        assert (await ended(api, second.json()["id"]))["status"] == "succeeded"
        runs = [
            (await client.get(f"/v1/runs/{r}")).json() for r in (first["id"], second.json()["id"])
        ]
        assert runs[0]["status"] == "succeeded" and runs[0]["output"] == "rested"
        assert runs[1]["started_at"] >= runs[0]["finished_at"]


async def test_an_interrupting_turn_cancels_the_one_under_way_and_sees_it(api: str) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=60) as client:
        thread = await new_thread(client)
        first = (await turn(client, thread, "doze", "dozer")).json()
        second = await turn(client, thread, "remember this instead", "parrot", "interrupt")
        assert second.status_code == 202, second.text
        # The interrupted turn is kept, recorded as cancelled, and is part of the conversation.
        assert (await ended(api, second.json()["id"]))["output"] == "second answer"
        turns = (await client.get(f"/v1/threads/{thread}")).json()["turns"]
        assert [(t["run_id"], t["status"]) for t in turns] == [
            (first["id"], "cancelled"),
            (second.json()["id"], "succeeded"),
        ]


async def test_a_rolled_back_turn_is_cancelled_and_removed(api: str) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=60) as client:
        thread = await new_thread(client)
        first = (await turn(client, thread, "doze", "dozer")).json()
        second = await turn(client, thread, "start over", "parrot", "rollback")
        assert second.status_code == 202, second.text
        assert (await ended(api, second.json()["id"]))["output"] == "first answer"
        assert (await client.get(f"/v1/runs/{first['id']}")).status_code == 404
        turns = (await client.get(f"/v1/threads/{thread}")).json()["turns"]
        assert [t["run_id"] for t in turns] == [second.json()["id"]]


async def test_a_deleted_thread_leaves_none_of_its_rows(api: str, service_dir: Path) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=60) as client:
        thread = await new_thread(client)
        ids = []
        for task in ("one", "two"):
            run = (await turn(client, thread, task, "parrot")).json()
            await ended(api, run["id"])
            ids.append(run["id"])
        assert (await client.delete(f"/v1/threads/{thread}")).status_code == 204
        assert (await client.get(f"/v1/threads/{thread}")).status_code == 404
        assert (await client.delete(f"/v1/threads/{thread}")).status_code == 404
        assert (await turn(client, thread, "three", "parrot")).status_code == 404
        for run_id in ids:
            assert (await client.get(f"/v1/runs/{run_id}")).status_code == 404
    marks = ",".join("?" * len(ids))
    with sqlite3.connect(service_dir / "api.db") as db:
        for table in ("runs", "run_events", "spans", "run_steps"):
            column = "id" if table == "runs" else "run_id"
            left = db.execute(f"SELECT count(*) FROM {table} WHERE {column} IN ({marks})", ids)
            assert left.fetchone()[0] == 0, table
        assert db.execute("SELECT count(*) FROM threads WHERE id = ?", (thread,)).fetchone()[0] == 0


async def test_deleting_a_thread_removes_its_rows_on_every_store(store_url: str) -> None:
    store = await RunStore.open(store_url)
    try:
        await store.threads.create("t1", {})
        await store.threads.create("t2", {})
        for run_id, thread in (("r1", "t1"), ("r2", "t1"), ("r3", "t2")):
            await store.add(Submission("task", thread_id=thread), RunMeta(run_id, "s", {}))
            await store.add_events(run_id, [(1, RunStarted(agent="a"))])
        assert [r.id for r in await store.threads.turns("t1")] == ["r1", "r2"]
        assert await store.threads.delete("t1")
        assert not await store.threads.delete("t1")
        assert await store.get("r1") is None and await store.get("r2") is None
        assert await store.events("r1", 0) == [] and len(await store.events("r3", 0)) == 1
        assert await store.get("r3") is not None  # another thread's run stays
        assert await store.threads.get("t1") is None and await store.threads.get("t2") is not None
    finally:
        await store.close()


async def test_a_thread_is_held_by_one_submission_at_a_time_on_every_store(
    store_url: str,
) -> None:
    # What makes a thread's strategy hold across replicas: the store lets one hold it at once
    # (the replicas' burst above rarely races within the milliseconds this guards).
    store = await RunStore.open(store_url)
    try:
        await store.threads.create("held", {})
        assert await store.threads.hold("held", 30)
        assert not await store.threads.hold("held", 30)  # another replica's submission waits
        await store.threads.release("held")
        assert await store.threads.hold("held", 0)  # a hold that ran out (its holder died)...
        assert await store.threads.hold("held", 30)  # ...is taken over
        assert not await store.threads.hold("missing", 30)
        await store.add(Submission("task", thread_id="held"), RunMeta("h1", "s", {}))
        assert await store.threads.states("held") == [("h1", False)]
        assert await store.threads.states("missing") is None
    finally:
        await store.close()


async def test_an_mcp_client_continues_a_thread_by_its_id(api: str) -> None:
    from mcp import Client

    async with Client(f"{api}/mcp") as client:
        first = await client.call_tool(
            "submit_task", {"task": "hello", "agent": "parrot", "thread": "new"}
        )
        opened = json.loads(first.content[0].text)  # type: ignore[union-attr]
        assert opened["output"] == "first answer" and opened["thread_id"]
        second = await client.call_tool(
            "submit_task", {"task": "again", "agent": "parrot", "thread": opened["thread_id"]}
        )
        went_on = json.loads(second.content[0].text)  # type: ignore[union-attr]
    assert went_on["output"] == "second answer"
    assert went_on["thread_id"] == opened["thread_id"]
