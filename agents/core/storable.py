"""Text as the run store keeps it, the same on SQLite and PostgreSQL.

PostgreSQL refuses U+0000 (NUL) in text and in JSON (asyncpg raises, the connection drops);
SQLite keeps it. A tool or a model may well return one, so the store keeps U+FFFD (the
replacement character) in its place, on every store. Text a person sends (a task) is refused at
the door instead, with the place of the character (`orchestrator.schemas`).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["NUL", "nul_refusal", "stored_json", "stored_text"]

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


def nul_refusal(text: str, what: str) -> str | None:
    """Why `what` (a person's text) is refused, naming the place of its U+0000; None: it is not."""
    if NUL not in text:
        return None
    place = text.index(NUL) + 1
    return f"{what} has U+0000 (NUL) at character {place}: a run store cannot keep it (remove it)"
