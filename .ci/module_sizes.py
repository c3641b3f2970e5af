"""Fail when a Python module of the packages passes the line limit (one responsibility each)."""

from __future__ import annotations

import sys
from pathlib import Path

LIMIT = 400
PACKAGES = ("agents", "orchestrator", "tracing", "configs", "tests", "bench")


def main() -> int:
    """List the modules over the limit on stderr; exit 1 if there are any."""
    root = Path(__file__).resolve().parent.parent
    over = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "node_modules" in path.parts or "migrations" in path.parts:
                continue
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > LIMIT:
                over.append(f"{path.relative_to(root)}: {lines} lines (limit {LIMIT})")
    for line in over:
        print(line, file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
