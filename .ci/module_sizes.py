"""Point at Python modules past 600 lines: a prompt to look, not a rule (it never fails).

A module is as long as its one responsibility needs; a long one may hold two. Split by
responsibility into objects that are composed and passed explicitly, never into mixins.
"""

from __future__ import annotations

import sys
from pathlib import Path

LOOK_AT = 600
PACKAGES = ("agents", "orchestrator", "tracing", "configs", "tests", "bench")


def main() -> int:
    """List the modules past `LOOK_AT` lines on stderr; always exit 0."""
    root = Path(__file__).resolve().parent.parent
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "node_modules" in path.parts or "migrations" in path.parts:
                continue
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > LOOK_AT:
                where = path.relative_to(root)
                print(f"note: {where} has {lines} lines: one responsibility?", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
