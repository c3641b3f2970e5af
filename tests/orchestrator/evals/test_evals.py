"""`baton eval`: a dataset of the default team run through it for real (on the session's Ray
cluster, in a `baton eval` process of its own), every expectation kind checked; a changed config
that breaks an interaction contract, shown with the diagrams' first difference; the results as
JUnit XML; a dataset with mistakes refused before any run; the cases run on a server."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from agents.core.messages import RunStatus
from orchestrator.cli import app
from orchestrator.evals import Expect, Interactions, load_dataset, parse_rule
from orchestrator.schemas.runs import DelegationNode
from tests.testkit import OtlpReceiver

ROOT = Path(__file__).resolve().parents[3]
DATASETS = ROOT / "configs" / "datasets"


def _node(agent: str, started_at: float, *children: DelegationNode) -> DelegationNode:
    return DelegationNode(
        agent=agent, status=RunStatus.SUCCEEDED, started_at=started_at, children=list(children)
    )


def test_contract_sentences_are_checked_against_who_asked_whom_in_what_order() -> None:
    tree = _node(
        "coordinator",
        0,
        _node("researcher", 1, _node("fact_checker", 2)),
        _node("analyst", 3),
        _node("analyst", 4),
    )
    seen = Interactions.of(tree)
    holding = [
        "coordinator asks researcher before analyst",
        "researcher asks fact_checker",
        "analyst is asked exactly twice",
        "fact_checker is asked at least once",
        "nobody asks writer",
        "writer is never asked",
        "coordinator never asks writer",
        "at most 3 levels deep",
    ]
    assert {s: parse_rule(s).broken(seen) for s in holding} == dict.fromkeys(holding)
    broken = {
        "coordinator asks analyst before researcher": "coordinator asked researcher before analyst",
        "coordinator asks writer": "coordinator never asked writer",
        "analyst is asked at most once": "analyst was asked 2 times",
        "coordinator never asks analyst": "coordinator asked analyst 2 times",
        "nobody asks fact_checker": "fact_checker was asked 1 times",
        "at most 2 levels deep": "the run went 3 levels deep",
    }
    assert {s: parse_rule(s).broken(seen) for s in broken} == broken
    with pytest.raises(ValueError, match="not a contract sentence: 'the coordinator is polite'"):
        parse_rule("the coordinator is polite")


def test_a_wrong_dataset_is_refused_with_every_mistake_located_before_any_run(
    tmp_path: Path,
) -> None:
    dataset = tmp_path / "wrong.yaml"
    dataset.write_text(
        """name: wrong
cases:
  - name: one
    agent: nobody
    task: calculate 6 * 7
    expect:
      answer: {regex: "(unclosed"}
      json_schema: {type: 17}
      check: configs.checks:no_such_check
      contract: [coordinator asks ghost, the coordinator is polite]
      diagram: missing.mmd
  - name: one
    task: again
    expect: {tools: {callde: [calculate]}}
"""
    )
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["eval", str(dataset)])
    assert result.exit_code == 2, result.output
    said = result.output
    # Every mistake in one pass: malformed fields, and what the rest says of the team.
    assert f"{dataset}:7:" in said and "answer: regex: missing ), unterminated subpattern" in said
    assert f"{dataset}:14:" in said and "unknown field 'callde'" in said
    for line, message in [
        (4, "cases[0].agent: unknown agent 'nobody'"),
        (8, "cases[0].expect.json_schema: not a JSON Schema: 17 is not valid"),
        (9, "cases[0].expect.check: cannot import configs.checks:no_such_check"),
        (10, "cases[0].expect.contract[0]: unknown agent 'ghost'"),
        (10, "cases[0].expect.contract[1]: not a contract sentence"),
        (11, "cases[0].expect.diagram: cannot read"),
        (12, "cases[1].name: another case is named 'one'"),
    ]:
        assert f"{dataset}:{line}:" in said and message in said, (line, message, said)


def _flat(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """The spans of a `GET /v1/runs/{id}/trace` answer, each once."""
    spans, stack = [], list(trace["spans"])
    while stack:
        span = stack.pop()
        spans.append(span)
        stack += span.get("children") or []
    return spans


def _eval(
    ray_address: str, tmp_path: Path, *args: str, **more: str
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        **more,
        "RAY_ADDRESS": ray_address,
        "BATON_NAMESPACE": "baton-tests",
        "BATON_STORE_URL": f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}",
        "COLUMNS": "200",
    }
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", "eval", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
        cwd=ROOT,
    )


@pytest.mark.ray
@pytest.mark.heavy
@pytest.mark.long
def test_the_default_dataset_passes_replays_live_only_where_changed_and_shows_a_broken_contract(
    ray_address: str, tmp_path: Path
) -> None:
    junit = tmp_path / "results.xml"
    receiver = OtlpReceiver()  # a trace backend: the evaluations reach it with the runs' spans
    try:
        done = _eval(
            ray_address, tmp_path, "configs/datasets/default.yaml", "--junit", str(junit),
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
        )  # fmt: skip
    finally:
        receiver.close()
    assert done.returncode == 0, done.stdout + done.stderr
    cases = yaml.safe_load((DATASETS / "default.yaml").read_text())["cases"]
    kinds = {kind for case in cases for kind in case.get("expect", {})}
    # Every kind of expectation but those of JSON answers (the support team's dataset has them).
    assert len(cases) >= 10 and kinds == set(Expect.model_fields) - {"json_schema", "model"}
    assert f"{len(cases)}/{len(cases)} passed" in done.stdout
    # JUnit XML as CI systems read it: one suite, a test case per case, each with its run.
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("name"), suite.get("tests"), suite.get("failures")) == (
        "default-team",
        str(len(cases)),
        "0",
    )
    runs = [p.get("value") for p in suite.iter("property") if p.get("name") == "run_id"]
    assert len(set(runs)) == len(cases)
    # Exported as the GenAI conventions' evaluation results, on a span of each run's trace
    # (no explanations: the default team's tracing records no content).
    evaluations = {s["name"]: s for s in receiver.spans if s["name"].startswith("evaluation ")}
    assert set(evaluations) == {f"evaluation {case['name']}" for case in cases}
    judged = evaluations["evaluation explains what it calculated"]
    results = {e["gen_ai.evaluation.name"]: e for e in judged["event_attributes"]}
    assert set(results) == {"status", "answer", "rubric"}
    assert results["rubric"]["gen_ai.evaluation.score.label"] == "pass"
    assert 0.4 <= results["rubric"]["gen_ai.evaluation.score.value"] < 1
    assert not any("gen_ai.evaluation.explanation" in e for e in results.values())
    [judge] = [s for s in receiver.spans if s["parent_span_id"] == judged["span_id"]]
    assert judge["name"] == "chat offline" and judge["trace_id"] == judged["trace_id"]
    [experiment] = re.findall(r"experiment ([0-9a-f]{32})", done.stderr)

    # A stored run made into a case: its interaction is its contract, its answer expected.
    exported = tmp_path / "exported.yaml"
    store = {"BATON_STORE_URL": f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"}
    made = CliRunner(env=store).invoke(app, ["runs", "export", runs[0], "--dataset", str(exported)])
    assert made.exit_code == 0, made.output
    [case] = load_dataset(exported, ["coordinator", "analyst", "writer", "researcher"])[0].cases
    assert case.task == "calculate 6 * 7" and case.agent == "coordinator"
    assert case.expect.answer is not None and "42" in (case.expect.answer.equals or "")
    assert case.expect.contract == ("coordinator asks analyst", "at most 2 levels deep")

    # The same cases replayed from that experiment's runs with the analyst's instruction
    # changed: only the analyst's model calls are made (its requests differ), the rest come
    # from the record; the cases still pass (the offline model does not read instructions).
    config = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    analyst = next(a for a in config["agents"] if a["name"] == "analyst")
    analyst["instructions"] = "Compute exactly, and say which tool you used."
    (tmp_path / "instructed.yaml").write_text(yaml.safe_dump(config))
    done = _eval(
        ray_address, tmp_path, "configs/datasets/default.yaml", "--replay", experiment,
        "-c", str(tmp_path / "instructed.yaml"), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    replayed = {r["case"]: r for r in json.loads(done.stdout)}
    live = {case: set(r["live_calls"]) for case, r in replayed.items()}
    assert live["multiplies"] == {"analyst"} and live["writes a summary"] == set()
    assert set().union(*live.values()) == {"analyst"}
    assert {r["run_id"] for r in replayed.values()}.isdisjoint(runs)  # new runs (forks)

    # `--compare`: the two experiments case by case (nothing got worse).
    [second] = re.findall(r"experiment ([0-9a-f]{32})", done.stderr)
    compared = CliRunner(env={**store, "COLUMNS": "200"}).invoke(
        app, ["eval", "--compare", experiment, second]
    )
    assert compared.exit_code == 0, compared.output
    said = compared.output
    assert "worse" not in said and f"{len(cases)}/{len(cases)} passed (100%)" in said

    # A changed instruction: the analyst no longer says it calculates, so the coordinator stops
    # asking it; the contract says so, and the diagram's first difference is marked.
    config = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    analyst = next(a for a in config["agents"] if a["name"] == "analyst")
    analyst.update(description="Describes data sets.", capabilities=["statistics"])
    (tmp_path / "changed.yaml").write_text(yaml.safe_dump(config))
    one = {"name": "one", "cases": [cases[0]]}
    (tmp_path / "one.yaml").write_text(yaml.safe_dump(one))
    shutil.copytree(DATASETS / "diagrams", tmp_path / "diagrams")
    done = _eval(
        ray_address, tmp_path, str(tmp_path / "one.yaml"), "-c", str(tmp_path / "changed.yaml")
    )
    assert done.returncode == 1, done.stdout + done.stderr
    said = done.stdout
    assert "✗ coordinator asks analyst: coordinator never asked analyst" in said
    assert "✗ diagram: line " in said and "differs (expected | this run):" in said
    assert ">> " in said and "0/1 passed" in said


@pytest.mark.ray
@pytest.mark.heavy
@pytest.mark.long
def test_structured_answers_are_checked_against_their_schema_and_model(
    ray_address: str, tmp_path: Path
) -> None:
    done = _eval(
        ray_address, tmp_path, "configs/datasets/support.yaml", "-c", "configs/support.yaml",
        "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    results = {r["case"]: r for r in json.loads(done.stdout)}
    checked = {v["name"] for v in results["a verdict in its schema"]["verdicts"]}
    assert {"json_schema", "model"} <= checked


@pytest.mark.ray
@pytest.mark.heavy
@pytest.mark.long
def test_cases_run_on_a_server(api: str, ray_address: str, tmp_path: Path) -> None:
    dataset = tmp_path / "server.yaml"
    dataset.write_text(
        """name: on-a-server
cases:
  - name: multiplies
    task: calculate 6 * 7
    expect: {answer: {contains: "42"}, contract: [coordinator asks analyst]}
  - name: never sleeps
    task: calculate 6 * 7
    expect: {contract: [coordinator asks sleeper]}
  - name: judged in a thread
    turns: [calculate 6 * 7, calculate 7 * 8]
    expect: {rubric: {criteria: the analyst and 56, min_score: 0.5}}
"""
    )
    done = _eval(ray_address, tmp_path, str(dataset), "--server", api, "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    results = {r["case"]: r for r in json.loads(done.stdout)}
    assert results["multiplies"]["outcome"] == "pass"
    assert results["never sleeps"]["outcome"] == "fail"
    [broken] = [v for v in results["never sleeps"]["verdicts"] if not v["passed"]]
    assert broken["detail"] == "coordinator never asked sleeper"
    # A thread of two turns: the second run is the case's, a turn of the first one's thread.
    judged = results["judged in a thread"]
    assert judged["outcome"] == "pass", judged
    [rubric] = [v for v in judged["verdicts"] if v["name"] == "rubric"]
    assert rubric["score"] == 1.0 and rubric["judge"]["input_tokens"] > 0
    run = httpx.get(f"{api}/v1/runs/{judged['run_id']}", timeout=30).json()
    turns = httpx.get(f"{api}/v1/threads/{run['thread_id']}", timeout=30).json()["turns"]
    assert [t["task"] for t in turns] == ["calculate 6 * 7", "calculate 7 * 8"]
    # Each case's verdicts are on its run's trace: an `evaluation` span under the run's root,
    # an evaluation result per expectation (explained: the service records content), and the
    # judge's call under it.
    for name, result in results.items():
        spans = _flat(httpx.get(f"{api}/v1/runs/{result['run_id']}/trace", timeout=30).json())
        [evaluation] = [s for s in spans if s["name"] == f"evaluation {name}"]
        root = next(s for s in spans if s["name"] == "invoke_workflow baton")
        assert evaluation["parent_span_id"] == root["span_id"]
        assert evaluation["attributes"]["baton.evaluation.outcome"] == result["outcome"]
        told = {
            e["attributes"]["gen_ai.evaluation.name"]: e["attributes"] for e in evaluation["events"]
        }
        assert set(told) == {v["name"] for v in result["verdicts"]}
    assert told["rubric"]["gen_ai.evaluation.score.label"] == "pass"  # (the last case's)
    assert told["rubric"]["gen_ai.evaluation.explanation"].startswith("score 1.00")
    [chat] = [s for s in spans if s["parent_span_id"] == evaluation["span_id"]]
    assert chat["name"] == "chat offline" and chat["attributes"]["gen_ai.usage.input_tokens"] > 0
    # The experiment is kept by the server, beside its runs, and replayed there.
    [experiment] = re.findall(r"experiment ([0-9a-f]{32})", done.stderr)
    kept = httpx.get(f"{api}/v1/experiments/{experiment[:12]}", timeout=30).json()
    assert (kept["dataset"], kept["passed"], kept["total"]) == ("on-a-server", 2, 3)
    served = httpx.get(f"{api}/v1/service", timeout=30).json()
    assert kept["config_digest"] == served["system_version"]  # the version that ran them
    assert [r["run_id"] for r in kept["results"]] == [r["run_id"] for r in results.values()]
    done = _eval(
        ray_address, tmp_path, str(dataset), "--server", api, "--json", "--replay", experiment
    )
    replayed = {r["case"]: r for r in json.loads(done.stdout)}
    assert {r["outcome"] for r in replayed.values()} == {"pass", "fail"}
    # All from the record: the thread's turn too (its fork saw the turns before the original).
    assert all(r["live_calls"] == [] for r in replayed.values())
    # and the fork is no turn of that thread.
    again = httpx.get(f"{api}/v1/threads/{run['thread_id']}", timeout=30).json()["turns"]
    assert [t["run_id"] for t in again] == [t["run_id"] for t in turns]
    # A team file beside --server is refused, not ignored: the server runs its own team.
    refused = _eval(ray_address, tmp_path, str(dataset), "--server", api, "-c", "team.yaml")
    assert refused.returncode == 2 and "--config names a team here, but --server" in refused.stderr
