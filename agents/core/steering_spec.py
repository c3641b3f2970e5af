"""Step rules as the YAML declares them: on a step, change the model, tools or instructions."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["StepRule", "StepUse", "StepWhen"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StepWhen(_Strict):
    """When a rule applies: every condition given holds (at least one)."""

    step: int | None = Field(default=None, ge=1, description="On this model step (from 1).")
    after_tool: str | None = Field(
        default=None, description="Once this tool has been called in the invocation."
    )
    budget_below: int | None = Field(
        default=None, ge=1, description="When the run's token budget has fewer tokens left."
    )

    @model_validator(mode="after")
    def _something(self) -> StepWhen:
        if self.step is None and self.after_tool is None and self.budget_below is None:
            raise ValueError("give step, after_tool or budget_below")
        return self


class StepUse(_Strict):
    """What changes for that model call."""

    model: Any = Field(default=None, description="Another model (a string, or {name, params}).")
    tools: tuple[str, ...] | None = Field(
        default=None, description="Offer only these tools (by name; [] for none)."
    )
    force_tool: str | None = Field(default=None, description="The model must call this tool.")
    instruction: str | None = Field(default=None, description="Added to the system message.")

    @model_validator(mode="after")
    def _something(self) -> StepUse:
        if all(v is None for v in (self.model, self.tools, self.force_tool, self.instruction)):
            raise ValueError("give model, tools, force_tool or instruction")
        return self


class StepRule(_Strict):
    """A change to the model call when its condition holds (rules apply in order)."""

    when: StepWhen
    use: StepUse
