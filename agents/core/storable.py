"""Text as the run store keeps it, the same on SQLite and PostgreSQL.

PostgreSQL refuses U+0000 (NUL) in text and in JSON (asyncpg raises, the connection drops);
SQLite keeps it. A tool or a model may well return one, so the store keeps U+FFFD (the
replacement character) in its place, on every store, in every column: JSON as it is serialized
(`stored_json`), every other text as a statement is sent (`stored_statement`, a listener of
both engines that write the store). Text a person sends (a task, a query's filter) is refused
at the door instead, with the place of the character (`orchestrator.schemas`, the API's and
the A2A door's checks).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "NUL",
    "nul_place",
    "nul_refusal",
    "stored_json",
    "stored_parameters",
    "stored_statement",
    "stored_text",
]

NUL = "\x00"
REPLACEMENT = "\ufffd"
# `\u0000` in JSON text, not preceded by an escaped backslash of the string's own (`\\u0000`
# is the six characters `\u0000`, which stay).
_ESCAPED_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def stored_text(text: str | None) -> str | None:
    """A text as stored: U+0000 replaced."""
    return text.replace(NUL, REPLACEMENT) if text and NUL in text else text


def stored_json(value: Any) -> str:
    """JSON as stored (the engines' `json_serializer`): U+0000 in strings replaced."""
    dumped = json.dumps(value)
    return _ESCAPED_NUL.sub(r"\1\\ufffd", dumped) if "\\u0000" in dumped else dumped


def stored_parameters(parameters: Any, many: bool) -> Any:
    """A statement's parameters as stored: U+0000 replaced in every string.

    Whatever column a text reaches (a span's status message, a tool's name), on every store: a
    row with a NUL is kept, never refused, and never takes the rows of its batch with it.
    """
    if many:
        return [_stored_row(row) for row in parameters] if _has_nul(parameters) else parameters
    return _stored_row(parameters) if _has_nul([parameters]) else parameters


def stored_statement(
    conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
) -> tuple[str, Any]:
    """SQLAlchemy's `before_cursor_execute` listener (with `retval=True`) of a store's engine."""
    return statement, stored_parameters(parameters, executemany)


def _has_nul(rows: Any) -> bool:
    for row in rows:
        values = row.values() if isinstance(row, dict) else row
        if any(isinstance(v, str) and NUL in v for v in values):
            return True
    return False


def _stored_row(row: Any) -> Any:
    if isinstance(row, dict):
        return {k: stored_text(v) if isinstance(v, str) else v for k, v in row.items()}
    return type(row)(stored_text(v) if isinstance(v, str) else v for v in row)


def nul_place(text: str) -> int | None:
    """The place (from 1) of the first U+0000 in `text`; None: it has none."""
    return text.index(NUL) + 1 if NUL in text else None


def nul_refusal(text: str, what: str) -> str | None:
    """Why `what` (a person's text) is refused, naming the place of its U+0000; None: it is not."""
    if NUL not in text:
        return None
    place = text.index(NUL) + 1
    return f"{what} has U+0000 (NUL) at character {place}: a run store cannot keep it (remove it)"
