"""`baton runs` in a terminal: ids and statuses whole at any width, the rest as it fits."""

from __future__ import annotations

import io
import re
import time

import pytest
from rich.console import Console

from agents.core.messages import RunStatus, Usage
from orchestrator.cli.report import print_runs
from orchestrator.store import RunPage, StoredRun

TASK = "Research the history of the Ray project, check the facts, and calculate 17 * 23 + 4"


def _run(n: int, status: RunStatus) -> StoredRun:
    now = time.time()
    return StoredRun(
        id=f"{n:032x}",
        status=status,
        task=TASK,
        agent=None,
        entry_agent="coordinator",
        system="default",
        config={},
        routing=None,
        output=None,
        error=None,
        input_tokens=600 + n,
        output_tokens=200,
        model_calls=6,
        cost_usd=0.0,
        created_at=now,
        started_at=now,
        finished_at=now + 0.2,
        duration_s=0.2,
        tree=None,
    )


PAGE = RunPage(
    runs=[_run(1, RunStatus.SUCCEEDED), _run(2, RunStatus.WAITING_FOR_APPROVAL)],
    total=7,
    usage=Usage(input_tokens=4000, output_tokens=1400, model_calls=42, cost_usd=0.0),
)


def _shown(width: int) -> list[str]:
    out = io.StringIO()
    print_runs(Console(file=out, force_terminal=True, width=width, no_color=True), PAGE)
    return re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue()).splitlines()  # styles aside


@pytest.mark.parametrize("width", [60, 80, 100, 240])
def test_ids_and_statuses_are_never_cut_and_the_task_takes_the_rest(width: int) -> None:
    lines = _shown(width)
    assert " ".join(lines[:-3]).startswith("2 of 7 runs, newest first · all 7: 5400 tokens,")
    body = lines[-2:]
    for line, (n, status) in zip(
        body, [(1, "succeeded"), (2, "waiting_for_approval")], strict=True
    ):
        assert len(line.rstrip()) <= width
        assert line.startswith(f"{n:032x}  {status}")
        if width >= 80:
            assert "Research the" in line  # the task is there, cut if need be
    header = lines[-3]
    if width >= 240:
        assert TASK in body[0] and "tokens in/out" in header and "$0.0000" in body[0]
    if width <= 80:
        assert "created" not in header  # the task keeps room before other columns come
