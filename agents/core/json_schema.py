"""Values checked against a JSON Schema, with the place of each problem in words.

One checker for a tool's arguments (before the call, and a person's edit of them), a
structured answer, and a schema read from a config or an MCP server. The draft is the one the
schema's `$schema` names; 2020-12 otherwise (as MCP says for tools' `inputSchema`).
jsonschema is imported on first use (0.1 s).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = ["schema_problem", "value_problems"]


def schema_problem(schema: Any) -> str | None:
    """Why `schema` is not a JSON Schema that values can be checked against, or None."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    if not isinstance(schema, dict | bool):
        return f"a JSON Schema is an object, not {type(schema).__name__}"
    try:
        validator_for(schema, default=_draft()).check_schema(schema)
    except SchemaError as exc:
        where = _place(exc.absolute_path)
        return f"{exc.message}" + (f" (at {where})" if where else "")
    return None


def value_problems(schema: dict[str, Any], value: Any, limit: int = 5) -> list[str]:
    """What in `value` does not fit `schema` (a checked schema), each with its place first.

    `["text: 5 is not of type 'string'"]`; `(top)` for the value itself. At most `limit`.
    """
    errors = sorted(_validator(json.dumps(schema, sort_keys=True)).iter_errors(value), key=str)
    return [f"{_place(e.absolute_path) or '(top)'}: {e.message}" for e in errors[:limit]]


def _draft() -> type[Validator]:
    from jsonschema import Draft202012Validator

    draft: type[Validator] = Draft202012Validator
    return draft


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Validator:
    """A compiled validator per schema (tools are called with the same schema many times)."""
    from jsonschema.validators import validator_for

    schema = json.loads(schema_json)
    return validator_for(schema, default=_draft())(schema)


def _place(path: Any) -> str:
    """`items[2].name` for the path `("items", 2, "name")`."""
    place = ""
    for part in path:
        place += f"[{part}]" if isinstance(part, int) else f".{part}" if place else str(part)
    return place
