"""What a failed expectation says: what was expected, and what came."""

from __future__ import annotations

from typing import Any

import pytest

from agents.core.messages import RunStatus
from orchestrator.evals.dataset import Case, LoadedCase
from orchestrator.evals.scoring import Observed, score


def _verdict(expect: dict[str, Any], output: str | None) -> str:
    case = Case.model_validate({"name": "c", "task": "t", "expect": expect})
    observed = Observed("r", RunStatus.SUCCEEDED, output, None, 0, 0.0, 0.0, None)
    [answer] = [v for v in score(LoadedCase(case), observed) if v.name == "answer"]
    assert not answer.passed
    return answer.detail


@pytest.mark.parametrize(
    ("expect", "output", "said"),
    [
        ({"contains": "42"}, "it is 41", "expected an answer containing '42'; got 'it is 41'"),
        ({"equals": "yes"}, "no\n  way", "expected an answer equal to 'yes'; got 'no way'"),
        ({"regex": r"^\d+$"}, "many", r"expected an answer matching /^\d+$/; got 'many'"),
        ({"contains": "42"}, None, "expected an answer containing '42'; got no answer"),
    ],
)
def test_a_failed_answer_says_what_was_expected_and_what_came(
    expect: dict[str, str], output: str | None, said: str
) -> None:
    assert _verdict({"answer": expect}, output) == said
