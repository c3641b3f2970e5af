"""What an agent is: the validated shape of one agent and of the run-wide limits.

These models are the boundary between a YAML file and the runtime; the loader in
`orchestrator.config` adds file locations and whole-system checks on top.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "DEFAULT_DEADLINE_S",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_PARALLEL_TOOLS",
    "DEFAULT_MAX_STEPS",
    "OFFLINE_MODEL",
    "AgentCard",
    "AgentSpec",
    "Limits",
    "ModelSpec",
    "RayOptions",
    "Timeouts",
    "ToolRef",
    "TraceOptions",
]

DEFAULT_MAX_DEPTH = 5
DEFAULT_MAX_STEPS = 10
DEFAULT_DEADLINE_S = 300.0
DEFAULT_MAX_PARALLEL_TOOLS = 8
OFFLINE_MODEL = "baton/offline"
DEFAULT_MAX_CONTENT_CHARS = 2000
# Span attribute values are bounded at this size whatever the config says (tracing.records).
MAX_CONTENT_CHARS = 16_384

AGENT_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,47}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSpec(_Strict):
    """A litellm model string plus the keyword arguments passed to `litellm.acompletion`."""

    name: str = Field(default=OFFLINE_MODEL, min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)


class Timeouts(_Strict):
    """Per-call time limits in seconds; the run deadline still caps each of them."""

    model: float = Field(default=120.0, gt=0)
    tool: float = Field(default=60.0, gt=0)


class RayOptions(_Strict):
    """How the agent's actors are placed and run on Ray."""

    replicas: int = Field(default=1, ge=1, le=256)
    num_cpus: float = Field(default=0.0, ge=0)
    num_gpus: float = Field(default=0.0, ge=0)
    resources: dict[str, float] = Field(default_factory=dict)
    max_concurrency: int = Field(default=1000, ge=2)
    max_restarts: int = Field(default=0, ge=-1)


class ToolRef(_Strict):
    """A function tool, and how it may be run again.

    A tool that is not idempotent runs at most once per call: Baton records that it is about
    to run before it runs, and never retries it, nor a delegation that had started it.
    """

    function: str = Field(min_length=1, description="`package.module:function`")
    idempotent: bool | None = Field(
        default=None,
        description="Safe to run again with the same arguments (default: what the function "
        "declares with `@agents.tools.idempotent`, else false).",
    )
    retries: int = Field(
        default=0, ge=0, le=10, description="Retries after an error (idempotent tools only)."
    )

    @model_validator(mode="after")
    def _retries_need_idempotence(self) -> ToolRef:
        if self.retries and self.idempotent is False:
            raise ValueError("retries need an idempotent tool (idempotent: true)")
        return self


class AgentCard(_Strict):
    """What other agents (and the router) see of an agent."""

    name: str = Field(pattern=AGENT_NAME_PATTERN)
    description: str = ""
    capabilities: tuple[str, ...] = ()


class AgentSpec(AgentCard):
    """One agent of a system, as written in the YAML."""

    model: ModelSpec = Field(default_factory=ModelSpec)
    instructions: str = ""
    tools: tuple[ToolRef, ...] = ()
    delegates: tuple[str, ...] | Literal["*"] = ()
    max_steps: int | None = Field(default=None, ge=1)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    ray: RayOptions = Field(default_factory=RayOptions)

    @field_validator("tools", mode="before")
    @classmethod
    def _tools_from_strings(cls, value: Any) -> Any:
        # `- pkg.mod:fn` is the common case; the mapping form adds a retry policy.
        if isinstance(value, list | tuple):
            return [{"function": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("model", mode="before")
    @classmethod
    def _model_from_string(cls, value: Any) -> Any:
        # `model: openai/gpt-4o-mini` is the common case; the mapping form adds params.
        return {"name": value} if isinstance(value, str) else value

    def card(self) -> AgentCard:
        return AgentCard(
            name=self.name, description=self.description, capabilities=self.capabilities
        )


class Limits(_Strict):
    """Run-wide limits. The token budget is shared by the whole delegation tree."""

    max_depth: int = Field(default=DEFAULT_MAX_DEPTH, ge=1, le=64)
    max_steps: int = Field(default=DEFAULT_MAX_STEPS, ge=1, le=1000)
    deadline_s: float = Field(default=DEFAULT_DEADLINE_S, gt=0)
    token_budget: int | None = Field(default=None, ge=1)
    max_parallel_tools: int = Field(default=DEFAULT_MAX_PARALLEL_TOOLS, ge=1, le=256)


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
