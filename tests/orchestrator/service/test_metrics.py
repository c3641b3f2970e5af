"""`/metrics`: what a Prometheus scraper reads from a real `baton serve`, parsed with
prometheus_client's own parser."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.service import ServiceProcess, all_events

pytestmark = [pytest.mark.ray, pytest.mark.anyio]

ROOT = Path(__file__).resolve().parents[3]


async def scrape(url: str, **headers: str) -> dict[str, list[Any]]:
    """The scrape's samples by metric family name."""
    async with httpx.AsyncClient(timeout=30) as client:
        answer = await client.get(f"{url}/metrics", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return {f.name: f.samples for f in text_string_to_metric_families(answer.text)}


def value(samples: list[Any], name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels`."""
    return sum(
        s.value
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


async def test_a_run_shows_in_the_genai_instruments_and_the_services_own(api: str) -> None:
    before = await scrape(api)
    async with httpx.AsyncClient(timeout=30) as client:
        asked = {"task": "count me", "agent": "parrot"}
        ran = (await client.post(f"{api}/v1/runs", json=asked)).json()
    events = await all_events(api, ran["id"])
    finished = [d for _, kind, d in events if kind == "model_finished"]
    after = await scrape(api)

    tokens = "gen_ai_client_token_usage"
    model = {"gen_ai_request_model": "scripted", "gen_ai_agent_name": "parrot"}
    for kind, field in (("input", "input_tokens"), ("output", "output_tokens")):
        labels = {**model, "gen_ai_token_type": kind}
        grew = value(after[tokens], f"{tokens}_sum", **labels) - value(
            before.get(tokens, []), f"{tokens}_sum", **labels
        )
        assert grew == sum(d[field] for d in finished), kind
    calls = "gen_ai_client_operation_duration_seconds"
    assert value(after[calls], f"{calls}_count", **model) - value(
        before.get(calls, []), f"{calls}_count", **model
    ) == len(finished)
    ended = value(after["baton_runs"], "baton_runs_total", baton_run_status="succeeded")
    assert (
        ended
        - value(before.get("baton_runs", []), "baton_runs_total", baton_run_status="succeeded")
        >= 1
    )
    states = {s.labels["baton_run_state"] for s in after["baton_runs_active"]}
    assert states == {"queued", "running"}
    assert "baton_sse_followers" in after


async def test_the_scrape_takes_an_admin_key(
    tenanted: ServiceProcess, access_keys: dict[str, str]
) -> None:
    async with httpx.AsyncClient(base_url=tenanted.url, timeout=30) as client:
        for name in ("reader", "acme"):
            key = {"Authorization": f"Bearer {access_keys[name]}"}
            answer = await client.get("/metrics", headers=key)
            assert answer.status_code == 403 and "'admin' role" in answer.text
        assert (await client.get("/metrics")).status_code == 401
    admin = f"Bearer {access_keys['root']}"
    assert "baton_runs_active" in await scrape(tenanted.url, Authorization=admin)


@pytest.mark.parametrize("reason", ["overloaded", "spending_cap_reached"])
def test_refusals_and_spend_are_counted_by_reason_and_tenant(reason: str) -> None:
    from agents.core.messages import Usage
    from orchestrator.service.metrics import ServiceMetrics

    metrics = ServiceMetrics("test")
    metrics.refused(reason)
    metrics.ended("budget_exceeded", "acme", Usage(cost_usd=0.25))
    metrics.ended("succeeded", "acme", None)
    found = {
        f.name: f.samples for f in text_string_to_metric_families(metrics.prometheus().decode())
    }
    refusals = "baton_admission_refusals"
    assert value(found[refusals], f"{refusals}_total", baton_refusal_reason=reason) == 1
    assert value(found["baton_spend_USD"], "baton_spend_USD_total", baton_tenant="acme") == 0.25
    assert value(found["baton_runs"], "baton_runs_total", baton_tenant="acme") == 2
    metrics.close()


def test_the_grafana_dashboard_reads_only_metrics_the_service_exports() -> None:
    from agents.core.events import ModelFinished
    from agents.core.messages import Usage
    from orchestrator.service.metrics import ServiceMetrics

    metrics = ServiceMetrics("test")  # one of each instrument's figures
    metrics.saw(
        ModelFinished(
            agent="a", model="openai/x", step=1, tool_calls=0, tokens=3, input_tokens=1,
            output_tokens=2, start_ns=0, end_ns=10**9, gate_wait_s=0.5, answered_by="openai/y",
        )
    )  # fmt: skip
    metrics.ended("succeeded", "acme", Usage(cost_usd=0.1))
    metrics.refused("overloaded")
    samples = [
        s for f in text_string_to_metric_families(metrics.prometheus().decode()) for s in f.samples
    ]
    metrics.close()
    exported = {s.name for s in samples} | {label for s in samples for label in s.labels}
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "baton.json").read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    variables = [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    read = {m for q in queries + variables for m in re.findall(r"\b(?:baton|gen_ai)_\w+", q)}
    assert len(queries) >= 9 and read - exported == set()  # metric and label names alike
