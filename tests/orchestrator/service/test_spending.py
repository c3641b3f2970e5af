"""Spending caps: a tenant's daily cap holds across two replicas sharing PostgreSQL and a ledger
of three shards under a burst, passed by no more than the calls under way when it is reached;
runs past it end `budget_exceeded` with what they did kept, and new ones are refused until the
next day."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agents.core.limits import SpendCap
from agents.ledger import shard_of
from agents.ledger.spend import SpendMeter, Spent, utc_day
from orchestrator.access import AccessFile, new_key
from tests.postgres import fresh_database
from tests.service import ServiceProcess, all_events

pytestmark = [pytest.mark.anyio]

# Six model calls a run (five tool calls, then the answer), each a little longer than the last;
# each tool call waits 0.4 s, so that the runs of a burst overlap however slowly they arrive.
TEAM = """
name: spenders
entry: spender
agents:
  - name: spender
    description: Waits five times, then answers.
    tools: [tests.testkit:slow_step]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: slow_step, arguments: {seconds: 0.4}}]}
          - {tool_calls: [{name: slow_step, arguments: {seconds: 0.4}}]}
          - {tool_calls: [{name: slow_step, arguments: {seconds: 0.4}}]}
          - {tool_calls: [{name: slow_step, arguments: {seconds: 0.4}}]}
          - {tool_calls: [{name: slow_step, arguments: {seconds: 0.4}}]}
          - {content: waited five times}
"""
BURST = 8


def test_a_cap_warns_once_then_stops_the_next_call_and_counts_the_day_from_the_store() -> None:
    meter = SpendMeter()
    day = utc_day()
    cap = SpendCap(scope="tenant:acme", tokens=100, warn_at=0.5)
    meter.seed(day, "tenant:acme", Spent(tokens=30))  # spent today before this ledger began
    meter.open("r1", "acme", "ci", (cap,))
    assert meter.check("r1") == (None, [])
    meter.record("r1", "a", "m", 15, 10, None)  # 55 of 100: past half
    reached, warnings = meter.check("r1")
    assert reached is None and [s for s, _ in warnings] == ["tenant:acme"]
    assert "55 tokens: passed 50% of its cap of 100" in warnings[0][1]
    row = meter.record("r1", "a", "m", 40, 10, 0.002)
    assert row is not None and (row.tenant, row.who, row.cost_usd) == ("acme", "ci", 0.002)
    reached, warnings = meter.check("r1")  # 105: spent, and warned only once
    assert warnings == [] and reached is not None and "tenant acme today" in reached
    # A run's own dollar cap counts only its own calls; a new run of the tenant is refused.
    meter.open("r2", "acme", "ops", (SpendCap(scope="run", usd=0.01),))
    meter.record("r2", "a", "m", 1, 1, 0.02)
    assert "the run spent $0.0200: reached its cap of $0.01" in str(meter.check("r2")[0])
    assert meter.over((cap,)) is not None and meter.over((SpendCap(scope="run", usd=1),)) is None


def test_calls_under_way_hold_what_a_reply_is_likely_to_cost_until_theirs_is_counted() -> None:
    meter, day = SpendMeter(), utc_day()
    cap = SpendCap(scope="tenant:acme", tokens=100)
    meter.seed(day, "tenant:acme", Spent())
    for run in ("a", "b", "c"):
        meter.open(run, "acme", run, (cap,))
    assert meter.check("a")[0] is None  # (nothing to go by yet: it holds nothing)
    meter.record("a", "x", "m", 30, 10, None)  # 40 spent; a reply is likely 40 now
    assert meter.check("a")[0] is None  # holds 40
    assert meter.check("b")[0] is None  # holds 40: 40 spent, 80 held
    # A third call would pass the cap once the two under way are counted: not made.
    reached = meter.check("c")[0]
    assert (
        reached
        == "tenant acme today spent 120 tokens: reached its cap of 100 (with the calls under way)"
    )
    meter.record("a", "x", "m", 20, 10, None)  # 70 spent, 40 held: still
    assert meter.check("c")[0] is not None
    meter.record("b", "x", "m", 10, 10, None)  # 90 spent, nothing under way
    assert meter.check("c")[0] is None
    # A run that ends with a call under way (its reply never came) lets go of what it held.
    meter.close("c")
    assert meter.check("a")[0] is None


@pytest.fixture(scope="module")
def capped(
    ray_address: str, tmp_path_factory: pytest.TempPathFactory, postgres_url: str
) -> Iterator[tuple[ServiceProcess, ServiceProcess, dict[str, str], Path]]:
    folder = tmp_path_factory.mktemp("spending")
    (folder / "team.yaml").write_text(TEAM)
    keys, access = {}, AccessFile()
    for name, tenant in (("acme-ci", "acme"), ("calib", "calib")):
        keys[name], entry = new_key(name, tenant, ["submit", "read"])
        access.keys.append(entry)
    access.write(folder / "access.yaml")
    store = fresh_database(postgres_url, "spending")
    a, b = (
        ServiceProcess(
            folder / "team.yaml",
            store,
            ray_address,
            folder / f"{name}.log",
            BATON_INSTANCE_ID=f"spending-{name}",
            BATON_ACCESS_FILE=str(folder / "access.yaml"),
            BATON_SPEND_WARN_AT="0.5",
            BATON_RATE_LIMIT_PER_S="10000",
            BATON_RATE_LIMIT_BURST="10000",
            # The tenant's runs all go to its shard, which alone counts its day.
            BATON_LEDGER_SHARDS="3",
        )
        for name in ("a", "b")
    )
    a.start(headers={"Authorization": f"Bearer {keys['calib']}"})
    b.start(headers={"Authorization": f"Bearer {keys['calib']}"})
    yield a, b, keys, folder
    a.stop()
    b.stop()


Ran = tuple[dict[str, Any], list[tuple[int, str, dict[str, Any]]]]


async def _run(url: str, key: str) -> Ran | None:
    """A run to its end, with its events; None: refused, its tenant's cap spent already."""
    auth = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, timeout=60, headers=auth) as client:
        made = await client.post("/v1/runs", json={"task": "stamp"})
        if made.status_code == 429:
            assert made.json()["error"]["code"] == "spending_cap_reached", made.text
            return None
        assert made.status_code == 202, made.text
        run_id = made.json()["id"]
        events = await all_events(url, run_id, Authorization=auth["Authorization"])
        return (await client.get(f"/v1/runs/{run_id}")).json(), events


async def _caps_in_force(url: str, key: str) -> list[dict[str, Any]]:
    """The caps `GET /v1/usage` says hold the key's tenant, once it names one (within 30 s)."""
    auth = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, timeout=30, headers=auth) as client:
        deadline = asyncio.get_running_loop().time() + 30
        while not (caps := (await client.get("/v1/usage")).json()["caps"]):
            assert asyncio.get_running_loop().time() < deadline, "the cap is not in force"
            await asyncio.sleep(0.1)  # (the file is looked at once a second: nothing to await)
        return list(caps)


@pytest.mark.ray
@pytest.mark.heavy
async def test_a_tenants_daily_cap_holds_across_two_replicas_under_a_burst(
    capped: tuple[ServiceProcess, ServiceProcess, dict[str, str], Path],
) -> None:
    a, b, keys, folder = capped
    # What one run spends, call by call (another tenant's run, uncapped).
    calibration = await _run(a.url, keys["calib"])
    assert calibration is not None
    run, events = calibration
    calls = [d["tokens"] for _, kind, d in events if kind == "model_finished"]
    assert run["status"] == "succeeded" and len(calls) == 6
    whole, largest = sum(calls), max(calls)
    # acme may spend three runs' worth today (the access file is read again as it changes).
    cap = 3 * whole
    access = yaml.safe_load((folder / "access.yaml").read_text())
    access["tenants"] = {"acme": {"daily_tokens": cap}}
    (folder / "access.yaml").write_text(yaml.safe_dump(access))
    # Both replicas say the cap is in force before the burst (each looks at the file at most
    # once a second, and a run submitted before would not be held to it).
    for replica in (a, b):
        assert await _caps_in_force(replica.url, keys["acme-ci"]) == [
            {
                "scope": "tenant:acme",
                "tokens": cap,
                "usd": None,
                "left_tokens": cap,
                "left_usd": None,
            }
        ]

    # A burst of eight runs, half through each replica (those submitted once the cap is spent
    # are refused).
    answers = await asyncio.gather(
        *(_run((a, b)[i % 2].url, keys["acme-ci"]) for i in range(BURST))
    )
    ended = [x for x in answers if x is not None]
    statuses = [r["status"] for r, _ in ended]
    stopped = [r for r, _ in ended if r["status"] == "budget_exceeded"]
    # (Whether a run of the burst finishes before the cap is spent depends on how they
    # interleave: eight overlapping runs may all be stopped mid-way.)
    assert stopped and set(statuses) <= {"succeeded", "budget_exceeded"}, statuses
    assert all("spending cap: tenant acme today spent" in r["error"] for r in stopped)
    # What they did before is kept: their tree, and the usage of those stopped mid-way.
    assert all(r["tree"] for r in stopped)
    assert any(r["usage"]["model_calls"] >= 1 for r in stopped), stopped
    warned = [e for _, evs in ended for _, kind, e in evs if kind == "spend_warning"]
    assert warned and all(e["scope"] == "tenant:acme" for e in warned)
    assert {shard_of(r["id"], 3) for r, _ in ended} == {shard_of("tenant:acme", 3)}

    # Past the cap by no more than the calls under way when it was reached: at most one a run.
    # (Each call that starts holds what a reply is likely to cost until its reply is counted,
    # so the replies' moment on their way to the ledger lets no more calls through.)
    auth = {"Authorization": f"Bearer {keys['acme-ci']}"}
    async with httpx.AsyncClient(base_url=b.url, timeout=30, headers=auth) as client:
        usage = (await client.get("/v1/usage")).json()
        spent = usage["total"]["input_tokens"] + usage["total"]["output_tokens"]
        assert cap <= spent <= cap + BURST * largest < BURST * whole, (spent, cap, largest)
        assert usage["caps"][0]["left_tokens"] == 0
        assert {line["tenant"] for line in usage["lines"]} == {"acme"}
        assert {line["key"] for line in usage["lines"]} == {"acme-ci"}
        assert usage["total"]["calls"] == sum(r["usage"]["model_calls"] for r, _ in ended)
        # A new run cannot make a call today: refused at once, with when to come back.
        refused = await client.post("/v1/runs", json={"task": "stamp"})
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "spending_cap_reached"
        assert 0 < int(refused.headers["Retry-After"]) <= 86401
        other = await client.get("/v1/usage", params={"tenant": "calib"})
        assert other.status_code == 404
        # A day that is not on the calendar is no day without spending.
        nonday = await client.get("/v1/usage", params={"day": "2026-13-45"})
        assert nonday.status_code == 422, nonday.text
        assert nonday.json()["error"]["message"].startswith("query.day: ")
