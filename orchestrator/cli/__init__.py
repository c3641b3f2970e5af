"""`baton`: check agent systems, run tasks, serve the API, read the run store."""

from orchestrator.cli import chat, check, keys, records, run, serve  # noqa: F401 (they register commands)
from orchestrator.cli.common import app

__all__ = ["app", "main"]


def main() -> None:
    """The `baton` console script."""
    app()
