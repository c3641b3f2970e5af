"""`baton`: check agent systems, run tasks, serve the API, read the run store."""

from orchestrator.cli import (  # noqa: F401 (they register commands)
    chat,
    check,
    evaluate,
    keys,
    records,
    run,
    serve,
)
from orchestrator.cli.common import app

__all__ = ["app", "main"]


def main() -> None:
    """The `baton` console script."""
    app()
