"""A provider gate's shape: how often, how much and how many at once a model may be called.

A gate holds for the whole cluster: every replica of the service and every agent on any node
takes from the same one (`agents.ray.gate_actor`).
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["GateSpec", "gate_for"]


class GateSpec(BaseModel):
    """Limits on calls to the models it matches, and how a refused call is retried.

    Providers state their limits per minute (`per_s: 60`); a shorter window paces calls more
    evenly under the same rate.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    models: tuple[str, ...] = Field(
        min_length=1,
        description="The model strings it holds for, as glob patterns (`openai/*`); a model "
        "takes the first gate that matches it.",
    )
    name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_./:*-]{0,63}$",
        description="How spans, events and metrics name it (its first pattern if unset).",
    )
    requests: int | None = Field(default=None, ge=1, description="Calls per window.")
    tokens: int | None = Field(
        default=None,
        ge=1,
        description="Tokens per window: a call counts its prompt (and `max_tokens` when set) "
        "until its reply says what it used.",
    )
    per_s: float = Field(default=60.0, gt=0, le=86_400, description="The window, in seconds.")
    concurrency: int | None = Field(default=None, ge=1, description="Calls under way at once.")
    max_wait_s: float = Field(
        default=30.0,
        ge=0,
        description="Longest a call waits at the gate: past it, the model's next fallback is "
        "asked (or the call fails, saying why). The run's deadline bounds it too.",
    )
    retries: int = Field(
        default=3,
        ge=0,
        le=20,
        description="How often a call the provider refuses for load (429, 503, 529) or loses "
        "(a dropped connection) is asked again: after the provider's `Retry-After`, during "
        "which the whole gate pauses, else after a jittered backoff.",
    )
    backoff_s: float = Field(
        default=1.0, gt=0, le=60, description="The first backoff; it doubles with each retry."
    )

    @model_validator(mode="after")
    def _limits_something(self) -> GateSpec:
        if self.requests is None and self.tokens is None and self.concurrency is None:
            raise ValueError("a gate needs at least one of requests, tokens or concurrency")
        return self

    @property
    def label(self) -> str:
        """Its name, or its first pattern."""
        return self.name or self.models[0]

    def holds_for(self, model: str) -> bool:
        """Whether calls to `model` go through it."""
        return any(fnmatchcase(model, pattern) for pattern in self.models)


def gate_for(gates: tuple[GateSpec, ...], model: str) -> GateSpec | None:
    """The gate calls to `model` go through: the first that matches it."""
    return next((gate for gate in gates if gate.holds_for(model)), None)
