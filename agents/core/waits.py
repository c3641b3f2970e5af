"""Waiting for a person: one mechanism for every kind of wait.

A run waits for a person when a call needs approval (`confirm`) or an agent asks a question
(`ask_user`). Each wait is opened with an event (a `WaitOpened` in `agents.core.events`), kept
by the run's ledger until a person's word (or its expiry) resolves it, and the resolution is
kept in the run's step log under the wait's `record_key`: a run resumed after a crash takes it
from there and does not ask again. What differs between kinds is only what is asked and what
the word carries (`Resolution`); a new kind of wait is a new `WaitOpened` subclass and a branch
where its word is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Outcome", "Resolution", "WaitKind", "Waiting"]

# The kinds of wait: a call for a decision, a question for an answer.
WaitKind = Literal["approval", "question"]

# What a run waits for from a person now: an answer, a decision, or nothing (its stored status
# says so: `input_required`, `waiting_for_approval`, `running`).
Waiting = Literal["input", "approval"] | None

# What a resolution did: taken, too late (resolved already), or no such wait.
Outcome = Literal["decided", "already_decided", "unknown"]


@dataclass(frozen=True)
class Resolution:
    """How a wait ends: a person's word, or its expiry.

    Attributes:
        kind: the kind of wait it resolves (a decision never answers a question).
        by: a person, or the expiry.
        who: who gave it (an API key's name, a door).
        approved: an approval's verdict.
        message: an approval's message (why it was denied, say).
        arguments: the arguments a person approved instead of the call's own.
        answer: a question's answer.
    """

    kind: WaitKind
    by: Literal["person", "expiry"] = "person"
    who: str = ""
    approved: bool = False
    message: str = ""
    arguments: dict[str, Any] | None = None
    answer: str = ""

    @classmethod
    def decision(
        cls,
        approved: bool,
        message: str = "",
        *,
        who: str = "",
        arguments: dict[str, Any] | None = None,
        by: Literal["person", "expiry"] = "person",
    ) -> Resolution:
        """A decision on a call waiting for approval."""
        return cls("approval", by, who, approved, message, arguments if approved else None)

    @classmethod
    def reply(
        cls, answer: str, *, who: str = "", by: Literal["person", "expiry"] = "person"
    ) -> Resolution:
        """An answer to a question."""
        return cls("question", by, who, answer=answer)

    @classmethod
    def expired(cls, kind: WaitKind, message: str = "") -> Resolution:
        """No word came in time: a call is denied, a question goes unanswered."""
        return cls(kind, "expiry", message=message)

    def record(self) -> dict[str, Any]:
        """As the ledger and the step log keep it (what the waiting agent reads)."""
        if self.kind == "question":
            return {"answer": self.answer, "by": self.by, "who": self.who}
        kept: dict[str, Any] = {
            "approved": self.approved,
            "message": self.message,
            "by": self.by,
            "who": self.who,
        }
        if self.arguments is not None:
            kept["arguments"] = self.arguments
        return kept
