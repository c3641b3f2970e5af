"""`python -m orchestrator`: the `baton` command."""

from orchestrator.cli import main

main()
