"""A rubric's judge: a model asked how well a run's answer meets the rubric's criteria.

The judge answers JSON (`reasoning`, `score` from 0 to 1); the rubric passes when the score
reaches its `min_score`. Its reasoning is kept with the verdict, and its call (model, tokens,
cost, time) goes on the run's trace with the evaluation. A judge that cannot be reached or does
not answer as asked makes the verdict an error (the case is `error`, not `fail`), saying why.

A verdict's text is redacted where it is made (the judge's credentials, the environment's
secrets, key shapes): whatever keeps or prints it (the experiment, `--json`, JUnit XML, the
API, the trace) has no credential to leak, even from a provider that quotes the request.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agents.core.errors import describe_error
from agents.core.spec import ModelSpec
from agents.models.offline import ANSWER_HEADING, JUDGMENT, RUBRIC_HEADING
from orchestrator.evals.dataset import RubricExpect
from orchestrator.evals.scoring import Verdict
from tracing import Redactor
from tracing.evaluations import JudgeCall
from tracing.redaction import secret_values_in

if TYPE_CHECKING:  # litellm (2.4 s) loads when a rubric is judged, not with the evaluations
    from agents.models.client import LiteLLMClient

__all__ = ["Judge"]

_INSTRUCTIONS = (
    "You grade the answer an AI team gave to a task, against a rubric. Read the task, the "
    "rubric and the answer, then reply with JSON only: reasoning (why, briefly, citing the "
    "answer) and score (a number from 0, the rubric is not met at all, to 1, it is fully met)."
)
_SHAPE = {
    "type": "object",
    "properties": {"reasoning": {"type": "string"}, "score": {"type": "number"}},
    "required": ["reasoning", "score"],
    "additionalProperties": False,
}
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")
# A judge's call takes no longer than this (a judge that hangs is an error, not a stuck eval).
_TIMEOUT_S = 120.0


class Judge:
    """Asks judge models about answers; `default`: the model of rubrics that name none."""

    def __init__(self, default: ModelSpec, secrets: Iterable[str] = ()) -> None:
        """`secrets`: what verdicts never say, besides the judges' own credentials."""
        self._default = default
        self._clients: dict[str, LiteLLMClient] = {}
        self._redactor = Redactor(secrets)

    def _client(self, spec: ModelSpec) -> LiteLLMClient:
        from agents.models.client import LiteLLMClient

        key = spec.model_dump_json()
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = LiteLLMClient(spec)
            self._redactor.add(secret_values_in(spec.params))
        return client

    async def verdict(self, rubric: RubricExpect, asked: tuple[str, ...], answer: str) -> Verdict:
        """The rubric's verdict on `answer` to the task `asked` (a thread's turns, in order)."""
        found = await self._judged(rubric, asked, answer)
        return replace(found, detail=self._redactor.text(found.detail))

    async def _judged(self, rubric: RubricExpect, asked: tuple[str, ...], answer: str) -> Verdict:
        client = self._client(rubric.model or self._default)
        task = "\n\n".join(asked)
        request = (
            f"## Task\n{task}\n\n{RUBRIC_HEADING}\n{rubric.criteria}\n\n{ANSWER_HEADING}\n{answer}"
        )
        messages = [
            {"role": "system", "content": _INSTRUCTIONS},
            {"role": "user", "content": request},
        ]
        shape = None
        if client.supports_json_schema():
            shape = {"type": "json_schema", "json_schema": {"name": JUDGMENT, "schema": _SHAPE}}
        started = time.time_ns()
        try:
            async with asyncio.timeout(_TIMEOUT_S):
                reply = await client.complete(messages, [], response_format=shape)
        except Exception as exc:  # the judge failed: the case is an error, saying why
            return Verdict(
                "rubric",
                False,
                f"the judge {client.model} failed: {describe_error(exc)}",
                error=True,
            )
        call = JudgeCall(
            model=reply.response_model or client.model,
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            cost_usd=reply.cost_usd,
            started_ns=started,
            ended_ns=time.time_ns(),
        )
        try:
            reasoning, score = _judgment(reply.content or "")
        except ValueError as exc:
            return Verdict(
                "rubric", False, f"the judge {client.model} {exc}", error=True, judge=call
            )
        passed = score >= rubric.min_score
        detail = f"score {score:.2f} (passes from {rubric.min_score:.2f}): {reasoning}"
        return Verdict("rubric", passed, detail, score=score, judge=call)


def _judgment(text: str) -> tuple[str, float]:
    """The judge's reasoning and score (ValueError saying what is wrong with its reply)."""
    try:
        said: Any = json.loads(_FENCE.sub("", text.strip()))
    except json.JSONDecodeError:
        raise ValueError(f"did not answer JSON: {text[:200]!r}") from None
    score = said.get("score") if isinstance(said, dict) else None
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        raise ValueError(f"gave no score from 0 to 1: {text[:200]!r}")
    return str(said.get("reasoning") or ""), float(score)
