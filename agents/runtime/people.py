"""An agent's waits for a person: a call to approve (`confirm`), a question to answer (`ask_user`).

Both are one mechanism (`agents.core.waits`): the wait is opened in the run's record and
announced, the invocation waits (bounded) for its resolution, and the resolution is kept in the
step log before the agent goes on, so that a run resumed after a crash neither asks again nor
repeats an approved call. A question is also written to the step log before it is announced.
What each kind adds is what it asks and how its resolution reads as the call's result.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace

from agents.core.events import ApprovalRequested, InputRequested, WaitOpened
from agents.core.ports import Waits
from agents.core.steps import StepKind, answer_key, approval_key, question_key
from agents.core.waits import Resolution, WaitKind
from agents.models.base import ToolCall
from agents.runtime.invocation import Invocation
from agents.runtime.reporting import Reporter
from agents.tools.ask import MAX_CHOICES
from agents.tools.base import ToolOutput
from tracing import attributes as attr
from tracing import span_ids

__all__ = ["MAX_QUESTION_CHARS", "People"]

MAX_QUESTION_CHARS = 4000
# How much of a call's arguments a person sees when asked to approve it.
_APPROVAL_ARGUMENTS_CHARS = 4000

# Per kind: the span events a wait adds, the attribute naming the wait, the step kind its
# resolution is kept as, and the word for what is waited on.
_KINDS: dict[WaitKind, tuple[str, str, str, StepKind, str]] = {
    "approval": (
        attr.EVENT_APPROVAL_REQUESTED,
        attr.EVENT_APPROVAL_DECIDED,
        attr.BATON_APPROVAL_ID,
        "approval",
        "decision",
    ),
    "question": (
        attr.EVENT_INPUT_REQUESTED,
        attr.EVENT_INPUT_PROVIDED,
        attr.BATON_QUESTION_ID,
        "answer",
        "answer",
    ),
}


def _shown(value: Any, room: list[int] | None = None) -> Any:
    """The arguments as a person sees them: still an object, long strings cut (`…`).

    At most `_APPROVAL_ARGUMENTS_CHARS` characters of strings in all, so that the event stays
    small whatever the model wrote.
    """
    room = [_APPROVAL_ARGUMENTS_CHARS] if room is None else room
    if isinstance(value, str):
        kept = value[: max(room[0], 0)]
        room[0] -= len(kept)
        return kept if len(kept) == len(value) else kept + "…"
    if isinstance(value, dict):
        return {k: _shown(v, room) for k, v in value.items()}
    if isinstance(value, list):
        return [_shown(v, room) for v in value]
    return value


def _question_id(invocation: str, key: str) -> str:
    """The same id for the same question whenever the run executes (so a resume finds it)."""
    return "q-" + hashlib.sha256(f"{invocation}/{key}".encode()).hexdigest()[:12]


@dataclass
class People:
    """Asks a person, for one agent's invocations, and waits for the word (within the deadline).

    Args:
        reporter: where events and steps go.
        waits: where a run waits for a person (None: no one to ask, as in a bare runtime).
    """

    reporter: Reporter
    waits: Waits | None

    async def approve(
        self,
        inv: Invocation,
        call: ToolCall,
        arguments: dict[str, Any],
        parameters: dict[str, Any] | None = None,
    ) -> tuple[ToolOutput | None, dict[str, Any]]:
        """Wait for a person to approve the call (or take the decision recorded before).

        `parameters`: the tool's JSON Schema, shown with the call (an edit must fit it).
        Returns what the model is told of a denial (a tool result, so that the model can change
        course; None if approved), and the arguments to call with: the person's, if they edited
        them, else the model's.
        """
        key = approval_key(inv.steps, call.id)
        decision = self._settled(inv, key, "approval", call.name)
        if decision is None:
            ctx = inv.ctx
            wait_s = max(0.0, min(ctx.limits.approval_timeout_s, ctx.time_left()))
            event = self.reporter.event(
                inv,
                ApprovalRequested,
                call_id=call.id,  # made unique by the ledger
                tool=call.name,
                tool_call_id=call.id,
                arguments=json.dumps(_shown(arguments), default=str),
                parameters=parameters,
                expires_at=time.time() + wait_s,
                record_key=key if self.reporter.logs_steps(inv) else None,
                **span_ids(trace.get_current_span()),
            )
            expiry = Resolution.expired("approval", f"no decision within {wait_s:.0f}s")
            decision = await self._wait(inv, event, key, wait_s, expiry)
        if isinstance(decision, ToolOutput):
            return decision, arguments
        if decision["approved"]:
            edited = decision.get("arguments")
            return None, edited if isinstance(edited, dict) else arguments
        reason = "denied by a person" if decision["by"] == "person" else "approval expired"
        denial = {
            "error": "not_approved",
            "tool": call.name,
            "reason": reason,
            "message": decision.get("message") or "",
        }
        return ToolOutput(json.dumps(denial), is_error=True), arguments

    async def ask(self, inv: Invocation, call: ToolCall, arguments: dict[str, Any]) -> ToolOutput:
        """The person's answer to the call's question (`ask_user`), as the call's result."""
        question = str(arguments.get("question") or "").strip()
        if not question:
            return ToolOutput("error: ask_user needs a question", is_error=True)
        choices = [str(c) for c in arguments.get("choices") or []][:MAX_CHOICES]
        asked_at, answer_at = question_key(inv.steps, call.id), answer_key(inv.steps, call.id)
        answer = self._settled(inv, answer_at, "question", call.name)
        if answer is None:
            question_id = _question_id(inv.id, asked_at)
            logs = self.reporter.logs_steps(inv)
            wait_s = max(0.0, inv.ctx.time_left())
            event = self.reporter.event(
                inv,
                InputRequested,
                call_id=question_id,
                question=question[:MAX_QUESTION_CHARS],
                choices=choices,
                expires_at=time.time() + wait_s,
                record_key=answer_at if logs else None,
                **span_ids(trace.get_current_span()),
            )
            asked_before = inv.recorded.get(asked_at) is not None
            if logs and not asked_before:
                # Written before it is announced: a run resumed after a crash does not ask twice.
                asked = {"id": question_id, "question": event.question}
                await self.reporter.commit(inv, asked_at, "question", asked)
            expiry = Resolution.expired("question")
            answer = await self._wait(inv, event, answer_at, wait_s, expiry, again=asked_before)
            if not isinstance(answer, ToolOutput) and answer["by"] == "expiry":
                inv.unanswered = question
        if isinstance(answer, ToolOutput):
            return answer
        if answer.get("by") == "expiry":
            unanswered = {
                "error": "no_answer",
                "reason": "no answer came before the run's deadline",
            }
            return ToolOutput(json.dumps(unanswered), is_error=True)
        return ToolOutput(str(answer.get("answer", "")))

    def _settled(
        self, inv: Invocation, key: str, kind: WaitKind, tool: str
    ) -> dict[str, Any] | ToolOutput | None:
        """The word to go on with, if no one need be asked; None: ask.

        The word recorded before (the run resumed, or replays), or what the model is told when
        no one can be asked.
        """
        recorded = inv.recorded.get(key)
        if recorded is not None:
            trace.get_current_span().set_attribute(attr.BATON_REPLAYED, True)
            return recorded.data
        word = _KINDS[kind][4]
        if inv.ctx.replay_only:
            return ToolOutput(f"error: replay: no {word} on {tool} recorded", is_error=True)
        if self.waits is None:
            needs = "a person's approval" if kind == "approval" else "a person's answer"
            return ToolOutput(
                f"error: {tool} needs {needs}, and this run has no one to ask (submit it to the "
                "Baton service)",
                is_error=True,
            )
        return None

    async def _wait(
        self,
        inv: Invocation,
        event: WaitOpened,
        key: str,
        wait_s: float,
        expiry: Resolution,
        again: bool = False,
    ) -> dict[str, Any]:
        """Open the wait and await its resolution; keep it in the step log before going on.

        `expiry` resolves it when no word comes in time.
        """
        assert self.waits is not None
        run_id, span = inv.ctx.run_id, trace.get_current_span()
        opened, resolved, id_attribute, step_kind, _ = _KINDS[event.kind]
        wait_id = await self.waits.open_wait(run_id, event, again)
        span.add_event(opened, {id_attribute: wait_id})
        resolution = await self.waits.await_resolution(run_id, wait_id, wait_s)
        if resolution is None:  # the time is up, unless a person's word got there first
            _, resolution = await self.waits.resolve(run_id, wait_id, expiry)
        assert resolution is not None
        seen: dict[str, Any] = {"by": str(resolution["by"]), "who": str(resolution["who"])}
        if event.kind == "approval":
            seen |= {"approved": bool(resolution["approved"]), "edited": "arguments" in resolution}
        span.add_event(resolved, seen)
        if self.reporter.logs_steps(inv):
            # Stored by the ledger as it was resolved; here again in case that write was lost.
            # Not stored (the run moved on): an approval counts as expired, never as given.
            stored = await self.reporter.commit(
                inv, key, step_kind, {**resolution, "at": time.time()}
            )
            if not stored and event.kind == "approval":
                resolution = {**resolution, "approved": False, "by": "expiry"}
        return resolution
