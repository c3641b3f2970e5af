"""An agent's question to the person (`ask_user`): asked once, waited for, answered.

The question is written to the run's step log before it is announced, and the answer is stored
by the ledger as it comes: a run resumed after a crash waits for the same question without
asking it again, and takes an answer given before the crash from the log.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace

from agents.core.events import InputRequested
from agents.core.ports import Approvals
from agents.core.steps import answer_key, question_key
from agents.models.base import ToolCall
from agents.runtime.invocation import Invocation
from agents.runtime.reporting import Reporter
from agents.tools.ask import MAX_CHOICES
from agents.tools.base import ToolOutput
from tracing import attributes as attr
from tracing import span_ids

__all__ = ["MAX_QUESTION_CHARS", "Questions"]

MAX_QUESTION_CHARS = 4000


def _question_id(invocation: str, key: str) -> str:
    """The same id for the same question whenever the run executes (so a resume finds it)."""
    return "q-" + hashlib.sha256(f"{invocation}/{key}".encode()).hexdigest()[:12]


@dataclass
class Questions:
    """Asks the person an agent's questions and waits for the answers (within the deadline).

    Args:
        reporter: where events and steps go.
        people: where a run waits for a person (None: no one to ask, as in a bare runtime).
    """

    reporter: Reporter
    people: Approvals | None

    async def ask(self, inv: Invocation, call: ToolCall, arguments: dict[str, Any]) -> ToolOutput:
        """The person's answer to the call's question, as the call's result."""
        question = str(arguments.get("question") or "").strip()
        if not question:
            return ToolOutput("error: ask_user needs a question", is_error=True)
        choices = [str(c) for c in arguments.get("choices") or []][:MAX_CHOICES]
        asked_at, answer_at = question_key(inv.steps, call.id), answer_key(inv.steps, call.id)
        recorded = inv.recorded.get(answer_at)
        if recorded is not None:
            trace.get_current_span().set_attribute(attr.BATON_REPLAYED, True)
            return self._result(recorded.data)
        if inv.ctx.replay_only:
            return ToolOutput("error: replay: no answer to the question recorded", is_error=True)
        if self.people is None:
            return ToolOutput(
                "error: there is no one to ask in this run (submit it to the Baton service)",
                is_error=True,
            )
        decision = await self._wait_for_answer(inv, call, question, choices, asked_at, answer_at)
        if self.reporter.logs_steps(inv):
            # Stored by the ledger as it was answered; here again in case that write was lost.
            await self.reporter.commit(inv, answer_at, "answer", {**decision, "at": time.time()})
        return self._result(decision)

    async def _wait_for_answer(
        self,
        inv: Invocation,
        call: ToolCall,
        question: str,
        choices: list[str],
        asked_at: str,
        answer_at: str,
    ) -> dict[str, Any]:
        ctx, span = inv.ctx, trace.get_current_span()
        assert self.people is not None
        logs = self.reporter.logs_steps(inv)
        question_id = _question_id(inv.id, asked_at)
        wait = max(0.0, ctx.time_left())
        event = self.reporter.event(
            inv,
            InputRequested,
            call_id=question_id,
            question=question[:MAX_QUESTION_CHARS],
            choices=choices,
            expires_at=time.time() + wait,
            record_key=answer_at if logs else None,
            **span_ids(span),
        )
        asked_before = inv.recorded.get(asked_at) is not None
        if logs and not asked_before:
            # Written before it is announced: a run resumed after a crash does not ask twice.
            await self.reporter.commit(
                inv, asked_at, "question", {"id": question_id, "question": event.question}
            )
        await self.people.ask(ctx.run_id, event, asked_before)
        span.add_event(attr.EVENT_INPUT_REQUESTED, {attr.BATON_QUESTION_ID: question_id})
        decision = await self.people.await_decision(ctx.run_id, question_id, wait)
        if decision is None:  # the deadline came: stop waiting, unless the answer got there first
            _, decision = await self.people.answer(ctx.run_id, question_id, "", "expiry")
        assert decision is not None
        span.add_event(attr.EVENT_INPUT_PROVIDED, {"by": str(decision["by"])})
        if decision["by"] == "expiry":
            inv.unanswered = question
        return decision

    @staticmethod
    def _result(decision: dict[str, Any]) -> ToolOutput:
        if decision.get("by") == "expiry":
            return ToolOutput(
                json.dumps(
                    {"error": "no_answer", "reason": "no answer came before the run's deadline"}
                ),
                is_error=True,
            )
        return ToolOutput(str(decision.get("answer", "")))
