"""The system-wide settings every part reads: run limits and trace options.

Each has a named default; limits are checked before acting (the guard refuses a delegation
past `max_depth` before it is dispatched).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DEFAULT_DEADLINE_S",
    "DEFAULT_MAX_CONTENT_CHARS",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_PARALLEL_TOOLS",
    "DEFAULT_MAX_STEPS",
    "MAX_CONTENT_CHARS",
    "Limits",
    "SpendCap",
    "TraceOptions",
]

DEFAULT_MAX_DEPTH = 5
DEFAULT_MAX_STEPS = 10
DEFAULT_DEADLINE_S = 300.0
DEFAULT_MAX_PARALLEL_TOOLS = 8
DEFAULT_MAX_CONTENT_CHARS = 2000
# Span attribute values are bounded at this size whatever the config says (tracing.records).
MAX_CONTENT_CHARS = 16_384


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Limits(_Strict):
    """Run-wide limits. The token budget is shared by the whole delegation tree."""

    max_depth: int = Field(default=DEFAULT_MAX_DEPTH, ge=1, le=64)
    max_steps: int = Field(default=DEFAULT_MAX_STEPS, ge=1, le=1000)
    deadline_s: float = Field(default=DEFAULT_DEADLINE_S, gt=0)
    token_budget: int | None = Field(default=None, ge=1)
    cost_budget_usd: float | None = Field(
        default=None,
        gt=0,
        description="Dollars the whole delegation tree may spend (priced by litellm's map; an "
        "unpriced model's calls count tokens only).",
    )
    max_parallel_tools: int = Field(default=DEFAULT_MAX_PARALLEL_TOOLS, ge=1, le=256)
    max_visits: int = Field(
        default=5,
        ge=1,
        le=1000,
        description="In how many steps one turn of an agent may hand work to the same agent "
        "(calls made at once count once): a supervisor and a worker handing control back and "
        "forth stop here, the run limit_exceeded. A workflow's calls are not counted: its "
        "code bounds them.",
    )
    approval_timeout_s: float = Field(
        default=600.0,
        gt=0,
        description="A call waiting for approval is denied after this long (the run's deadline "
        "still applies).",
    )


class SpendCap(_Strict):
    """A ceiling on spending: a run's own, or a tenant's or a key's in a UTC day.

    Checked before each model call of a run it applies to: once spent, the next call is refused
    and the run ends `budget_exceeded`. At `warn_at` of it, the run is told once (an event).
    """

    scope: str = Field(description="`run`, `tenant:<name>` or `key:<name>`.")
    usd: float | None = Field(default=None, gt=0)
    tokens: int | None = Field(default=None, ge=1)
    warn_at: float = Field(default=0.8, gt=0, le=1)

    @property
    def daily(self) -> bool:
        """Whether it counts a UTC day's spending of its tenant or key (else the run's own)."""
        return self.scope != "run"


class TraceOptions(_Strict):
    """What a run's trace records. Message contents are opt-in; secrets are never recorded."""

    enabled: bool = Field(
        default=True, description="Record spans; false turns a run's trace (and diagram) off."
    )
    capture_content: bool = Field(
        default=False,
        description="Record prompts, replies, tool arguments and tool results on spans.",
    )
    max_content_chars: int = Field(default=DEFAULT_MAX_CONTENT_CHARS, ge=16, le=MAX_CONTENT_CHARS)
