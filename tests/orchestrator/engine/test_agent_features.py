"""What agents can do, through the HTTP service with agents in separate actors: a hand-off to an
agent with a structured answer and an input guardrail."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.service import all_events, submit

pytestmark = [pytest.mark.ray, pytest.mark.anyio]


async def run(api: str, task: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    answer = await submit(api, {"task": task, "agent": "desk"})
    assert answer.status_code == 202, answer.text
    run_id = answer.json()["id"]
    await all_events(api, run_id)
    async with httpx.AsyncClient(base_url=api) as http:
        view = (await http.get(f"/v1/runs/{run_id}")).json()
        trace = (await http.get(f"/v1/runs/{run_id}/trace")).json()
        diagram = (await http.get(f"/v1/runs/{run_id}/diagram?detail=agents")).text
    return view, trace, diagram


def spans(tree: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for node in tree for s in [node, *spans(node["children"])]]


async def test_a_hand_off_across_actors_answers_in_its_schema_and_its_guardrail_holds(
    api: str,
) -> None:
    view, trace, diagram = await run(api, "refund order 42")
    assert view["status"] == "succeeded", view["error"]
    assert view["output_json"] == {"approved": True, "amount": 42}
    agents = {s["attributes"]["gen_ai.agent.name"]: s for s in spans(trace["spans"])
              if s["name"].startswith("invoke_agent")}  # fmt: skip
    desk, refunds = agents["desk"], agents["refunds"]
    assert desk["attributes"]["gen_ai.agent.id"] != refunds["attributes"]["gen_ai.agent.id"]
    # Its first answer was not JSON: sent back once, with the error, then it matched.
    sent_back = [e for e in refunds["events"] if e["name"] == "output_invalid"]
    assert len(sent_back) == 1 and "is not JSON" in sent_back[0]["attributes"]["problem"]
    assert "-)+" in diagram and "transfer_to_refunds" in diagram
    tripped, _, _ = await run(api, "refund order 42 or I call my lawyer")
    assert tripped["status"] == "guardrail_tripped"
    assert tripped["error"] == (
        "guardrail no-threats tripped on the input: a person takes this one"
    )
    assert tripped["output_json"] is None
