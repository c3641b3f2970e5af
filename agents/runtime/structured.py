"""Structured output: an agent whose final answer must be JSON of a declared shape.

The shape is an inline JSON Schema or a pydantic model. The model is asked for it natively
(`response_format`, where litellm says the model supports it) or through its instructions; an
answer that does not match is sent back with the validation error, a bounded number of times.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from agents.core.imports import import_object
from agents.core.json_schema import value_problems
from agents.core.spec import AgentSpec

__all__ = ["OutputContract", "load_output_model"]

# A JSON answer wrapped in a Markdown code fence, as models often write it.
_FENCED = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.S)


def load_output_model(path: str) -> type[BaseModel]:
    """The pydantic model named `package.module:Model` (ValueError when it is not one)."""
    found = import_object(path)  # (an ImportProblem is a ValueError)
    if not (isinstance(found, type) and issubclass(found, BaseModel)):
        raise ValueError(f"{path} is not a pydantic model")
    return found


@dataclass(frozen=True)
class OutputContract:
    """The shape an agent's final answer must have, and how to ask for it."""

    name: str
    schema: dict[str, Any]
    model: type[BaseModel] | None
    retries: int
    native: bool

    @classmethod
    def of(cls, spec: AgentSpec, supports_native: bool) -> OutputContract | None:
        """The agent's contract (None: its answer is free text)."""
        declared = spec.output_schema
        if declared is None:
            return None
        model = load_output_model(declared) if isinstance(declared, str) else None
        schema = model.model_json_schema() if model is not None else dict(declared)  # type: ignore[arg-type]
        native = spec.output_mode == "native" or (spec.output_mode == "auto" and supports_native)
        name = model.__name__ if model is not None else f"{spec.name}_output"
        return cls(name, schema, model, spec.output_retries, native)

    def response_format(self) -> dict[str, Any] | None:
        """What litellm is passed in native mode (None: the prompt says it instead)."""
        if not self.native:
            return None
        return {"type": "json_schema", "json_schema": {"name": self.name, "schema": self.schema}}

    def instructions(self) -> str:
        """The part of the system message that asks for the shape.

        In native mode too, as a reminder: some providers take the schema only as a hint.
        """
        return (
            "Your final answer must be only a JSON value matching this JSON Schema, with no "
            f"other text:\n{json.dumps(self.schema, separators=(',', ':'))}"
        )

    def check(self, text: str) -> tuple[Any, str | None]:
        """The answer parsed and validated, or None and what is wrong with it."""
        fenced = _FENCED.match(text)
        try:
            value = json.loads(fenced.group(1) if fenced else text)
        except json.JSONDecodeError as exc:
            return None, f"the answer is not JSON ({exc})"
        if self.model is not None:
            try:
                return self.model.model_validate(value).model_dump(mode="json"), None
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in exc.errors()
                )
                return None, problems
        misfits = value_problems(self.schema, value)
        return (None, "; ".join(misfits)) if misfits else (value, None)

    def retry(self, problem: str) -> dict[str, Any]:
        """The message that sends an answer back."""
        return {
            "role": "user",
            "content": f"Your answer does not match the required JSON Schema: {problem}. "
            "Answer again with only JSON that matches it.",
        }
