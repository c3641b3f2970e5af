"""Safe text inside Mermaid diagrams, and mermaid-py's builders imported quietly.

Labels come from models and users. Mermaid ends a message at a newline or `;`, starts entity
codes with `#` and comments with `%%`, and its renderer reads `<...>` as markup; so every label
is cut to a size and those characters are written as Mermaid entity codes (`#59;`, `#35;`, ...).
"""

from __future__ import annotations

import contextlib
import io
import re
from types import ModuleType

__all__ = ["MAX_LABEL_CHARS", "label", "mermaid_modules", "title"]

MAX_LABEL_CHARS = 80

_ENTITIES = {
    "#": "#35;",
    ";": "#59;",
    "<": "#lt;",
    ">": "#gt;",
    '"': "#quot;",
    "%": "#37;",
    "&": "#amp;",
    "{": "#123;",
    "}": "#125;",
    "|": "#124;",
    "`": "#96;",
    "\\": "#92;",
}
_UNSAFE = re.compile("[" + re.escape("".join(_ENTITIES)) + "]")
_SPACE = re.compile(r"[\s\x00-\x1f\x7f]+")


def label(text: object, limit: int = MAX_LABEL_CHARS) -> str:
    """`text` on one line, at most `limit` characters (then `…`).

    Safe anywhere a Mermaid label or message goes.
    """
    flat = _SPACE.sub(" ", str(text)).strip()
    if len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    return _UNSAFE.sub(lambda m: _ENTITIES[m.group()], flat) or " "


_TITLE_UNSAFE = re.compile(r"[^\w .,()/·+-]")


def title(text: object, limit: int = 120) -> str:
    """Text for a diagram title, which Mermaid reads as YAML front matter.

    Letters, digits and plain punctuation only (no `:` or `#`).
    """
    return _TITLE_UNSAFE.sub(" ", _SPACE.sub(" ", str(text))).strip()[:limit] or "diagram"


_modules: tuple[ModuleType, ModuleType] | None = None


def mermaid_modules() -> tuple[ModuleType, ModuleType]:
    """`mermaid.sequence` and `mermaid.flowchart`, imported quietly.

    Importing mermaid-py prints a notice about IPython to stdout; it is swallowed here so that it
    never lands in CLI output.
    """
    global _modules
    if _modules is None:
        with contextlib.redirect_stdout(io.StringIO()):
            import mermaid.flowchart as flowchart
            import mermaid.sequence as sequence
        _modules = (sequence, flowchart)
    return _modules
