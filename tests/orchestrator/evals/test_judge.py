"""A rubric's judge over real HTTP (litellm to an OpenAI-compatible server on 127.0.0.1), its
verdicts as the GenAI conventions' evaluation results on a run's trace, and JSON Lines datasets."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.core.errors import ConfigError
from agents.core.spec import ModelSpec
from orchestrator.evals import load_dataset
from orchestrator.evals.dataset import RubricExpect
from orchestrator.evals.judge import Judge
from orchestrator.evals.runner import evaluation_results
from orchestrator.evals.scoring import Verdict
from tests.openai_server import FakeOpenAI
from tests.ports import free_port
from tracing import Redactor
from tracing import attributes as attr
from tracing.evaluations import evaluation_spans
from tracing.redaction import secret_values_from_env

TASK = ("what is 6 * 7?",)


class FakeJudge(FakeOpenAI):
    """Answers every request with `said` (a judge's reply)."""

    def __init__(self, said: str) -> None:
        super().__init__("unused", {})
        self.said = said

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = super().reply(body)
        answer["choices"][0]["message"] = {"role": "assistant", "content": self.said}
        answer["choices"][0]["finish_reason"] = "stop"
        return answer


@pytest.fixture
def judge_server() -> Iterator[FakeJudge]:
    server = FakeJudge(json.dumps({"reasoning": "It gives 42, the product.", "score": 0.8}))
    yield server
    server.close()


def _rubric(url: str, min_score: float = 0.5) -> RubricExpect:
    model = {"name": "openai/grader", "params": {"api_base": url, "api_key": "sk-none"}}
    return RubricExpect(criteria="gives the product", min_score=min_score, model=model)


def test_a_judge_model_scores_the_answer_and_its_call_and_reasoning_are_kept(
    judge_server: FakeJudge,
) -> None:
    judge = Judge(ModelSpec())
    verdict = asyncio.run(judge.verdict(_rubric(judge_server.base_url), TASK, "It is 42."))
    assert (verdict.passed, verdict.error, verdict.score) == (True, False, 0.8)
    assert verdict.detail == "score 0.80 (passes from 0.50): It gives 42, the product."
    call = verdict.judge
    assert call is not None and call.model == "grader"
    assert (call.input_tokens, call.output_tokens) == (11, 7) and call.ended_ns >= call.started_ns
    # What the judge was asked: the task, the rubric and the answer.
    [request] = judge_server.requests
    asked = request["body"]["messages"][-1]["content"]
    assert "what is 6 * 7?" in asked and "gives the product" in asked and "It is 42." in asked
    # Below its min_score the rubric fails, saying the score and the reasoning.
    strict = asyncio.run(judge.verdict(_rubric(judge_server.base_url, 0.9), TASK, "It is 42."))
    assert not strict.passed and not strict.error
    assert strict.detail.startswith("score 0.80 (passes from 0.90): It gives 42")


@pytest.mark.parametrize(
    ("said", "why"),
    [
        ("Looks right to me!", "did not answer JSON: 'Looks right to me!'"),
        ('{"reasoning": "fine", "score": 7}', "gave no score from 0 to 1"),
    ],
)
def test_a_judge_that_does_not_answer_as_asked_is_an_error_not_a_failure(
    said: str, why: str
) -> None:
    server = FakeJudge(said)
    try:
        verdict = asyncio.run(Judge(ModelSpec()).verdict(_rubric(server.base_url), TASK, "42"))
    finally:
        server.close()
    assert verdict.error and not verdict.passed
    assert verdict.detail.startswith(f"the judge openai/grader {why}"), verdict.detail


def test_a_judge_that_cannot_be_reached_is_an_error_saying_why() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    verdict = asyncio.run(Judge(ModelSpec()).verdict(_rubric(url), TASK, "42"))
    assert verdict.error and verdict.judge is None
    assert verdict.detail.startswith("the judge openai/grader failed: ")
    assert "Connection" in verdict.detail, verdict.detail


def test_the_offline_judge_scores_the_share_of_the_rubrics_words_the_answer_has() -> None:
    rubric = RubricExpect(criteria="names the analyst and gives the total")
    verdict = asyncio.run(
        Judge(ModelSpec()).verdict(rubric, TASK, "the analyst found a total of 42")
    )
    assert verdict.passed and verdict.score == 0.5, verdict.detail
    assert "it lacks give, name" in verdict.detail


def test_verdicts_are_the_conventions_evaluation_results_on_a_span_under_the_runs_root() -> None:
    judge_call = Verdict("rubric", True, "cites the key sk-proj-abcdefghijklmnop1234", score=0.7)
    verdicts = [Verdict("status", True), Verdict("answer", False, "answer: 41"), judge_call]
    root = {
        "trace_id": "ab" * 16,
        "span_id": "cd" * 8,
        "parent_span_id": None,
        "name": attr.WORKFLOW_SPAN,
        "attributes": {attr.BATON_RUN_ID: "e" * 32},
        "resource": {"service.name": "baton"},
    }

    def spans(explain: bool) -> list[Any]:
        return evaluation_spans(
            root,  # type: ignore[arg-type]
            dataset="smoke",
            case="adds",
            outcome="fail",
            results=evaluation_results(verdicts),
            redact=Redactor(),
            explain=explain,
        )

    [span] = spans(explain=True)
    assert (span["name"], span["parent_span_id"], span["trace_id"]) == (
        "evaluation adds",
        "cd" * 8,
        "ab" * 16,
    )
    assert span["attributes"][attr.BATON_EVALUATION_OUTCOME] == "fail"
    assert span["attributes"][attr.OPENINFERENCE_SPAN_KIND] == "EVALUATOR"
    results = {e["attributes"]["gen_ai.evaluation.name"]: e["attributes"] for e in span["events"]}
    assert {e["name"] for e in span["events"]} == {"gen_ai.evaluation.result"}
    assert results["status"] == {
        "gen_ai.evaluation.name": "status",
        "gen_ai.evaluation.score.value": 1.0,
        "gen_ai.evaluation.score.label": "pass",
    }
    assert results["answer"]["gen_ai.evaluation.score.label"] == "fail"
    assert results["answer"]["gen_ai.evaluation.explanation"] == "answer: 41"
    assert results["rubric"]["gen_ai.evaluation.score.value"] == 0.7
    assert "sk-proj" not in results["rubric"]["gen_ai.evaluation.explanation"]  # redacted
    # A run whose tracing keeps no content keeps no explanation (it may quote the answer).
    [quiet] = spans(explain=False)
    assert not any("gen_ai.evaluation.explanation" in e["attributes"] for e in quiet["events"])


def test_a_json_lines_dataset_is_a_case_a_line_with_mistakes_located_at_their_line(
    tmp_path: Path,
) -> None:
    good = tmp_path / "smoke.jsonl"
    good.write_text(
        '{"name": "adds", "task": "calculate 2 + 2", "expect": {"answer": {"contains": "4"}}}\n'
        "\n"
        '{"name": "chats", "turns": ["my name is Ada", "what is my name?"]}\n'
    )
    dataset, cases = load_dataset(good, ["coordinator"])
    assert dataset.name == "smoke" and [c.case.name for c in cases] == ["adds", "chats"]
    assert cases[1].case.asked == ("my name is Ada", "what is my name?")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"name": "adds", "task": "calculate 2 + 2"}\n'
        '{"name": "both", "task": "x", "turns": ["y"]}\n'
        '{"name": "broken", "task": \n'
        '{"name": "lost", "task": "x", "agent": "nobody"}\n'
    )
    with pytest.raises(ConfigError) as refused:
        load_dataset(bad, ["coordinator"])
    said = str(refused.value)
    assert f"{bad}:3:" in said and "not JSON" in said
    bad.write_text(bad.read_text().replace('"task": \n', '"task": "z"}\n'))
    with pytest.raises(ConfigError) as refused:
        load_dataset(bad, ["coordinator"])
    said = str(refused.value)
    assert f"{bad}:2:1: error: cases[1]: give a task or turns (a thread), not both" in said
    bad.write_text(bad.read_text().replace(', "turns": ["y"]', ""))
    with pytest.raises(ConfigError) as refused:
        load_dataset(bad, ["coordinator"])
    assert f"{bad}:4:1: error: cases[3].agent: unknown agent 'nobody'" in str(refused.value)


def test_a_judge_whose_provider_quotes_the_request_says_no_credential() -> None:
    """A provider that answers 401 quoting the key and the whole request (its path, every
    header): the verdict, kept in experiments, printed and written to JUnit, says neither."""
    secrets = {
        "key": "judge-key-0123456789abcdef",  # by name (api_key), not shaped like a key
        "header": "hdr-secret-0123456789",  # by position (a header's value)
        "query": "azure-code-0123456789",  # a URL's query value
        "environment": "env-token-0123456789",  # the environment's (by a secret's name)
    }
    server = FakeOpenAI("unused", {}, reject_always=True)
    try:
        params = {
            "api_base": f"{server.base_url}?code={secrets['query']}",
            "api_key": secrets["key"],
            "extra_headers": {"X-Custom": secrets["header"], "X-Env": secrets["environment"]},
        }
        rubric = RubricExpect(criteria="c", model={"name": "openai/grader", "params": params})
        judge = Judge(ModelSpec(), secret_values_from_env({"MY_TOKEN": secrets["environment"]}))
        verdict = asyncio.run(judge.verdict(rubric, TASK, "It is 42."))
    finally:
        server.close()
    assert verdict.error and "the judge" in verdict.detail
    assert "Incorrect API key provided" in verdict.detail  # the provider's words are kept
    [request] = server.requests  # (the provider did see them)
    assert request["auth"] == f"Bearer {secrets['key']}"
    leaked = [form for form, value in secrets.items() if value in verdict.detail]
    assert leaked == [], verdict.detail
