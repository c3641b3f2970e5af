"""Tables the CLI prints (`baton eval`'s): whole into a pipe, fitted to a terminal."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.table import Table

from orchestrator.cli.common import print_table


def _table() -> Table:
    table = Table("case", "outcome", "cost", "latency", "tokens", "run")
    table.add_row("explains what it calculated to a person", "pass", "$0.0000", "0.03s", "386",
                  "07d241d0afd8" * 4)  # fmt: skip
    return table


def test_a_table_goes_whole_into_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    piped = io.StringIO()
    print_table(_table(), Console(file=piped))  # no terminal: rich would take 80 columns
    lines = piped.getvalue().splitlines()
    assert len(lines) == 5  # top, header, rule, the one row, bottom: no cell wrapped
    assert "explains what it calculated to a person" in lines[3] and "07d241d0afd8" * 4 in lines[3]
    assert len(lines[3]) > 80


def test_columns_still_decides_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    piped = io.StringIO()
    print_table(_table(), Console(file=piped))
    assert max(len(line) for line in piped.getvalue().splitlines()) <= 60
