"""What waits for a person in a run, in the HTTP API: calls to approve, questions to answer."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agents.core.events import ApprovalRequested, InputRequested
from agents.core.storable import nul_refusal

__all__ = [
    "Approval",
    "ApprovalDecision",
    "ApprovalResult",
    "Denial",
    "InputAnswer",
    "InputResult",
    "PendingApproval",
    "PendingQuestion",
]


class _Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message: str = Field(
        default="",
        max_length=2000,
        description="Told to the model with a denial (and recorded either way).",
    )


class Approval(_Decision):
    """A person approves a call waiting in a run, as the model asked it or with edits."""

    approve: Literal[True] = Field(description="true runs the call.")
    arguments: dict[str, Any] | None = Field(
        default=None,
        description="Make the call with these arguments instead of the model's (the edit is "
        "recorded, with who made it).",
    )

    @field_validator("arguments")
    @classmethod
    def _edits_fit(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and len(json.dumps(value)) > 100_000:
            raise ValueError("edited arguments are over 100,000 characters of JSON")
        return value


class Denial(_Decision):
    """A person denies a call waiting in a run (it is not made; the model is told)."""

    approve: Literal[False] = Field(description="false denies the call.")


# A person's answer to a call waiting for approval: `approve` says which (edited arguments come
# only with an approval, so the schema itself says so). A plain union (`anyOf`): schemathesis
# cannot generate for an OpenAPI discriminator on a boolean.
ApprovalDecision = Approval | Denial


class PendingApproval(BaseModel):
    """A call waiting for a person's decision."""

    call_id: str = Field(description="Approve or deny it at .../approvals/{call_id}.")
    agent: str
    tool: str
    arguments: dict[str, Any] | None = Field(
        description="The call's arguments, as an approval's `arguments` edit them (redacted; "
        "long strings cut). null: not an object the service can show."
    )
    parameters: dict[str, Any] | None = Field(
        default=None, description="The tool's JSON Schema: edited arguments must fit it."
    )
    chain: list[str]
    ts: float = Field(description="When it was asked (Unix seconds).")
    expires_at: float = Field(description="When it is denied without a decision.")

    @classmethod
    def of(cls, event: ApprovalRequested) -> PendingApproval:
        """The call as its `approval_requested` event tells it."""
        try:
            arguments = json.loads(event.arguments)
        except json.JSONDecodeError:  # (kept cut by an older version)
            arguments = None
        return cls(
            call_id=event.call_id,
            agent=event.agent,
            tool=event.tool,
            arguments=arguments if isinstance(arguments, dict) else None,
            parameters=event.parameters,
            chain=event.chain,
            ts=event.ts,
            expires_at=event.expires_at,
        )


class ApprovalResult(BaseModel):
    """The decision taken."""

    call_id: str
    approved: bool
    message: str
    by: Literal["person", "expiry"]
    who: str = Field(default="", description="Who decided (an API key's name, or the address).")
    arguments: dict[str, Any] | None = Field(
        default=None, description="The arguments approved instead of the model's, if edited."
    )


class PendingQuestion(BaseModel):
    """A question an agent asks the person (`ask_user`); the run waits for the answer."""

    question_id: str = Field(description="Answer it with POST .../input (this id, or none).")
    agent: str
    question: str
    choices: list[str] = Field(description="Answers it suggests (any answer is taken).")
    chain: list[str]
    ts: float = Field(description="When it was asked (Unix seconds).")
    expires_at: float = Field(description="When the run stops waiting (its deadline).")

    @classmethod
    def of(cls, event: InputRequested) -> PendingQuestion:
        """The question as its `input_requested` event tells it."""
        return cls(
            question_id=event.call_id,
            agent=event.agent,
            question=event.question,
            choices=event.choices,
            chain=event.chain,
            ts=event.ts,
            expires_at=event.expires_at,
        )


class InputAnswer(BaseModel):
    """The person's answer to a run's question."""

    model_config = ConfigDict(extra="forbid")

    answer: str = Field(
        max_length=20_000,
        description="What the agent is told (no U+0000).",
        json_schema_extra={"pattern": "^[^\\u0000]*$"},
    )
    question_id: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.:-]{1,128}$",
        description="The question answered (needed only when the run asks several at once).",
    )

    @field_validator("answer")
    @classmethod
    def _storable(cls, answer: str) -> str:
        if refusal := nul_refusal(answer, "the answer"):
            raise ValueError(refusal)
        return answer


class InputResult(BaseModel):
    """The answer taken."""

    question_id: str
    answer: str
    by: Literal["person", "expiry"]
    who: str = Field(default="", description="Who answered (an API key's name, or the address).")
