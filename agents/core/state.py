"""A run's shared state: a JSON object its agents, tools, hooks and workflows read and change.

As LangGraph's graph state and ADK's session state. Each invocation starts from its caller's
state as it was when the call was made; what it changes travels back up with its result as
updates (`StateChange`), which each caller applies to its own state, in call order once the
step's calls are done: parallel writers to one key merge by the key's reducer (`replace`, the
last writer in call order wins; `append`, `add`, `merge`), as LangGraph's reducers do. A tool's
changes are recorded with its result in the step log, so a resumed, replayed or forked run sees
the same state at the same point. A thread keeps its state across turns.

A team may type the state (`state.schema`, a JSON Schema of an object): every write is checked
against the key's schema and a bad one refused naming the key; a key's `default` there fills
an instruction's `{state.key}` when the state has none.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agents.core.json_schema import schema_problem, value_problems

__all__ = [
    "Reducer",
    "State",
    "StateChange",
    "StateError",
    "StateSpec",
    "apply_changes",
    "fill_instructions",
    "placeholders",
]

Reducer = Literal["replace", "append", "add", "merge"]

_PLACEHOLDER = re.compile(r"\{state\.([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*)\}")


class StateError(ValueError):
    """A write the state's schema or reducer refuses, or a placeholder with nothing to fill."""


class StateSpec(BaseModel):
    """How a team's shared state is typed and merged (the team file's `state:`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_: dict[str, Any] | None = Field(
        default=None,
        alias="schema",
        description="A JSON Schema of the state object: each write is checked against its key's "
        "`properties` entry (and unknown keys refused with `additionalProperties: false`).",
    )
    reducers: dict[str, Reducer] = Field(
        default_factory=dict,
        description="How writes to a key merge: `replace` (the default: the last writer in "
        "call order wins), `append` (to a list: an item, or a list's items), `add` (numbers) "
        "or `merge` (objects, key by key).",
    )

    @field_validator("schema_")
    @classmethod
    def _a_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is not None and (problem := schema_problem(schema)):
            raise ValueError(f"not a JSON Schema: {problem}")
        return schema

    def reducer(self, key: str) -> Reducer:
        """How writes to `key` merge."""
        return self.reducers.get(key, "replace")

    def default(self, key: str) -> tuple[bool, Any]:
        """Whether the schema gives `key` a default, and which."""
        props = (self.schema_ or {}).get("properties", {})
        entry = props.get(key)
        if isinstance(entry, dict) and "default" in entry:
            return True, entry["default"]
        return False, None

    def problems(self, key: str, value: Any) -> list[str]:
        """What is wrong with `value` as the state's `key` (after its reducer), if anything."""
        schema = self.schema_
        if schema is None:
            return []
        props = schema.get("properties", {})
        if key not in props:
            if schema.get("additionalProperties") is False:
                return [f"the state has no key {key!r} (its schema lists {sorted(props)})"]
            return []
        return value_problems(props[key], value)


class StateChange(BaseModel):
    """One write to the state: the key, the value given, and who gave it."""

    model_config = ConfigDict(frozen=True)

    key: str
    value: Any
    by: str = Field(description="The agent whose tool, hook or answer (`save_as`) wrote it.")


def _reduced(reducer: Reducer, old: Any, value: Any, key: str) -> Any:
    if reducer == "replace" or old is None:
        if reducer == "append" and not isinstance(value, list):
            return [value]
        return copy.deepcopy(value)
    if reducer == "append":
        if not isinstance(old, list):
            raise StateError(f"state key {key!r}: append needs a list there, not {old!r}")
        return [*old, *(value if isinstance(value, list) else [value])]
    if reducer == "add":
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (old, value)):
            raise StateError(f"state key {key!r}: add needs numbers, not {old!r} and {value!r}")
        return old + value
    if not isinstance(old, dict) or not isinstance(value, dict):
        raise StateError(f"state key {key!r}: merge needs objects, not {old!r} and {value!r}")
    return {**old, **copy.deepcopy(value)}


def apply_changes(
    state: Mapping[str, Any], changes: Iterable[StateChange], spec: StateSpec | None
) -> dict[str, Any]:
    """The state with the changes applied in order, each by its key's reducer and checked.

    Raises:
        StateError: a change the reducer cannot apply or the schema refuses (naming the key).
    """
    spec = spec or StateSpec()
    merged = dict(state)
    for change in changes:
        value = _reduced(spec.reducer(change.key), merged.get(change.key), change.value, change.key)
        if problems := spec.problems(change.key, value):
            raise StateError(f"state key {change.key!r}: {'; '.join(problems)}")
        merged[change.key] = value
    return merged


def placeholders(text: str) -> list[str]:
    """The state keys an instruction's `{state.key}` placeholders read (the top-level key)."""
    return list(dict.fromkeys(m.group(1).split(".")[0] for m in _PLACEHOLDER.finditer(text)))


def fill_instructions(
    text: str, state: Mapping[str, Any], spec: StateSpec | None, what: str = "the instructions"
) -> str:
    """Instructions with each `{state.key}` (or `{state.key.inner}`) filled from the state.

    A key the state does not have takes its schema's `default`; without one it is an error
    that names the placeholder (and `what` used it).
    """
    if "{state." not in text:
        return text

    verb = "use" if what.endswith("s") else "uses"

    def value(match: re.Match[str]) -> str:
        path = match.group(1).split(".")
        found: Any = state
        for depth, part in enumerate(path):
            if isinstance(found, Mapping) and part in found:
                found = found[part]
                continue
            given, default = (spec or StateSpec()).default(path[0]) if depth == 0 else (False, None)
            if not given:
                raise StateError(
                    f"{what} {verb} {match.group(0)}, which the state does not have "
                    f"(its keys: {sorted(state)}); write it first, or give it a default in the "
                    "state's schema"
                )
            found = default
            for inner in path[1:]:
                found = found.get(inner) if isinstance(found, Mapping) else None
            break
        return found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)

    return _PLACEHOLDER.sub(value, text)


class State:
    """The state as one tool call, hook or workflow sees it: read, and write by key.

    Its writes apply here at once (checked, by the key's reducer) and are kept as changes, for
    the invocation to apply in call order and pass up with its result.
    """

    def __init__(
        self,
        state: Mapping[str, Any],
        spec: StateSpec | None,
        by: str,
        on_write: Callable[[StateChange], None] | None = None,
    ) -> None:
        self._state = dict(state)
        self._spec = spec
        self._by = by
        self._on_write = on_write  # (a workflow's writes apply to its invocation at once)
        self.changes: list[StateChange] = []

    def get(self, key: str, default: Any = None) -> Any:
        """The value at `key` (a copy), or `default`."""
        return copy.deepcopy(self._state[key]) if key in self._state else default

    def __getitem__(self, key: str) -> Any:
        return copy.deepcopy(self._state[key])

    def __contains__(self, key: object) -> bool:
        return key in self._state

    def as_dict(self) -> dict[str, Any]:
        """The whole state (a copy)."""
        return copy.deepcopy(self._state)

    def set(self, key: str, value: Any) -> None:
        """Write `value` at `key` (merged by the key's reducer).

        Raises:
            StateError: the schema or the reducer refuses it; the message names the key.
        """
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise StateError(f"state key {key!r}: not JSON: {exc}") from None
        change = StateChange(key=key, value=value, by=self._by)
        self._state = apply_changes(self._state, [change], self._spec)
        self.changes.append(change)
        if self._on_write is not None:
            self._on_write(change)

    def update(self, values: Mapping[str, Any]) -> None:
        """Write several keys, in order (`set` for each)."""
        for key, value in values.items():
            self.set(key, value)
