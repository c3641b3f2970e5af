"""Span trees of whole runs, compared to reviewed snapshots: a change to the trace shows as a
readable diff (ids and times stripped)."""

from __future__ import annotations

import pytest

from tests.snapshots import assert_snapshot, tree_text
from tests.testkit import local_trace
from tests.tracing.test_sequence import DEFAULT_TEAM, FAILING

pytestmark = pytest.mark.anyio

REFUSING = """
limits: {max_depth: 2}
agents:
  - {name: a, delegates: [b], description: relay}
  - {name: b, delegates: [c], description: relay}
  - {name: c, description: relay}
"""


async def test_the_default_team_s_trace_is_as_reviewed() -> None:
    _, spans = await local_trace(
        DEFAULT_TEAM, "Research the history of Ray, check the facts, and calculate 17 * 23 + 4"
    )
    assert_snapshot("default_team.tree", tree_text(spans))


async def test_a_refused_delegation_s_trace_is_as_reviewed() -> None:
    _, spans = await local_trace(REFUSING, "relay this message")
    text = tree_text(spans)
    assert "events=['delegation_refused']" in text
    assert_snapshot("refused_delegation.tree", text)


async def test_a_failing_tool_s_trace_is_as_reviewed() -> None:
    _, spans = await local_trace(FAILING, "go")
    assert_snapshot("failing_tool.tree", tree_text(spans))
