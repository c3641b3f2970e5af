"""Spans to sequence diagrams, on real spans from teams run in this process."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.testkit import local_trace
from tracing.sequence import sequence_diagram

pytestmark = pytest.mark.anyio

SNAPSHOTS = Path(__file__).parent / "snapshots"
ARROW = re.compile(r"^\s*(\w+)(->>|-->>|--x|-x)([+-]?)(\w+): (.*)$")


def arrow_lines(text: str) -> list[re.Match[str]]:
    return [m for line in text.splitlines() if (m := ARROW.match(line))]


def normalized(text: str) -> str:
    """The diagram without what changes from run to run (durations)."""
    return re.sub(r"\d+(\.\d+)? (ms|s)\b", "N ms", text)


DEFAULT_TEAM = Path("configs/default.yaml").read_text()


async def test_a_team_run_is_drawn_with_parallel_delegations_nested_and_numbered() -> None:
    _, spans = await local_trace(
        DEFAULT_TEAM, "Research the history of Ray, check the facts, and calculate 17 * 23 + 4"
    )
    drawn = sequence_diagram(spans, title="Run default")
    snapshot = SNAPSHOTS / "default_team.mmd"
    if os.environ.get("BATON_UPDATE_SNAPSHOTS"):  # then review the change like code
        snapshot.write_text(normalized(drawn.text))
    assert normalized(drawn.text) == snapshot.read_text()
    # Every numbered arrow maps to its span: calls to execute_tool, returns to invoke_agent.
    by_id = {s["span_id"]: s for s in spans}
    lines = arrow_lines(drawn.text)
    assert len(lines) == len(drawn.arrows) == 10
    names = [by_id[span_id]["name"] for span_id in drawn.arrows]
    assert names[:2] == ["invoke_workflow baton", "invoke_agent coordinator"]
    for line, name in zip(lines, names, strict=True):
        if line.group(3) == "+" and line.group(1) != "o2":  # a delegation call
            assert name.startswith("execute_tool delegate_to_")
        if line.group(3) == "-":  # a return
            assert name.startswith("invoke_agent ")
    assert (
        "\tpar delegate_to_researcher" in drawn.text and "\tand delegate_to_analyst" in drawn.text
    )


async def test_with_tools_and_models_every_call_is_drawn() -> None:
    _, spans = await local_trace(DEFAULT_TEAM, "calculate 6 * 7", entry="analyst")
    full = sequence_diagram(spans, detail="full")
    assert "participant t" in full.text and "as calculate" in full.text
    assert "as baton/offline" in full.text
    chats = [s for s in spans if str(s["name"]).startswith("chat ")]
    assert len(arrow_lines(full.text)) == 4 + 2 * len(chats) + 2  # run, entry, chats, tool


FAILING = """
agents:
  - name: boss
    delegates: [worker]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: delegate_to_worker, arguments: {task: try}}]}
          - {content: gave up}
  - name: worker
    tools: [tests.testkit:fail_loudly]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: fail_loudly, arguments: {reason: "the disk is full"}}]}
          - {tool_calls: [{name: fail_loudly, arguments: {reason: "still full"}}]}
    max_steps: 2
"""


async def test_failures_are_crossed_arrows_with_a_note() -> None:
    _, spans = await local_trace(FAILING, "go")
    drawn = sequence_diagram(spans, detail="tools")
    worker_fails = [m for m in arrow_lines(drawn.text) if m.group(2) == "--x"]
    assert [m.group(3) for m in worker_fails] == ["", "", "-"]  # two tool errors, then the worker
    assert "limit_exceeded" in worker_fails[-1].group(5)
    assert "Note over t5: ✗ error: ValueError: cannot comply: the disk is full" in drawn.text
    assert "✗ max_steps 2 reached without a final answer" in drawn.text
    agents_only = sequence_diagram(spans)  # tools are not drawn, their failures are
    assert "Note over a4: ✗ fail_loudly: error: ValueError: cannot comply: still full" in (
        agents_only.text
    )


async def test_refused_delegations_are_notes_that_say_why() -> None:
    _, spans = await local_trace(
        """
        limits: {max_depth: 2}
        agents:
          - {name: a, delegates: [b], description: relay}
          - {name: b, delegates: [c], description: relay}
          - {name: c, description: relay}
        """,
        "relay this message",
    )
    drawn = sequence_diagram(spans)
    assert (
        "Note over a4: ⊘ c refused (depth)#59; depth limit 2 reached#59; a -#gt; b"
        not in drawn.text
    )
    assert "Note over a4: ⊘ c refused (depth): depth limit 2 reached: a -#gt; b" in drawn.text


HOSTILE = (
    "end; x-->>y: pwned\nNote over a1: fake <script>alert(1)</script> #quot; %% {{ | ` \\ "
    + "z" * 300
)

HOSTILE_TEAM = f"""
agents:
  - name: end
    delegates: [par]
    model:
      name: baton/scripted
      params:
        replies:
          - {{tool_calls: [{{name: delegate_to_par, arguments: {{task: go}}}}]}}
          - {{content: done}}
  - name: par
    tools: [tests.testkit:fail_loudly]
    model:
      name: baton/scripted
      params:
        replies:
          - {{tool_calls: [{{name: fail_loudly, arguments: {{reason: {HOSTILE!r}}}}}]}}
          - {{content: {HOSTILE!r}}}
"""


def hostile_trace_checks(text: str) -> None:
    for line in text.splitlines()[5:]:  # after the front matter and the header
        body = line.split(": ", 1)[1] if ": " in line else ""
        bare = re.sub(r"#\w+;", "", body)  # Mermaid's entity codes are the escapes
        for raw in (";", "<", ">", "#", "%", "`", "|", "\\", "{", "}", '"'):
            assert raw not in bare, (raw, line)
    assert "<script>" not in text and "\nNote over a1: fake" not in text
    assert not any(len(line) > 400 for line in text.splitlines())  # long labels are cut


async def test_hostile_labels_cannot_break_the_diagram() -> None:
    _, spans = await local_trace(HOSTILE_TEAM, "go")
    for detail in ("agents", "tools", "full"):
        drawn = sequence_diagram(spans, detail=detail)  # type: ignore[arg-type]
        hostile_trace_checks(drawn.text)
        assert re.search(r"participant a\d+ as end\n", drawn.text)
        assert re.search(r"participant a\d+ as par\n", drawn.text)
        assert len(arrow_lines(drawn.text)) == len(drawn.arrows)


WIDE = """
limits: {{max_steps: 30, max_parallel_tools: 64, max_visits: 30}}
agents:
  - name: hub
    delegates: [worker]
    model:
      name: baton/scripted
      params:
        replies: [{steps}, {{content: all done}}]
  - name: worker
    description: does one part
"""


def wide_team(steps: int, fan: int) -> str:
    batch = ", ".join(
        f"{{name: delegate_to_worker, arguments: {{task: part {i}}}}}" for i in range(fan)
    )
    return WIDE.format(steps=", ".join([f"{{tool_calls: [{batch}]}}"] * steps))


async def test_a_thousand_delegations_fold_within_mermaids_limit() -> None:
    _, spans = await local_trace(wide_team(20, 50), "fan out")
    assert sum(s["name"] == "invoke_agent worker" for s in spans) == 1000
    drawn = sequence_diagram(spans)
    assert len(drawn.text) < 50_000 and drawn.pages == 1
    # Each step's 50 calls ran at once: a `par`, never a loop; the 20 steps, one after another.
    assert "par \N{MULTIPLICATION SIGN}50 alike delegate_to_worker calls at once" in drawn.text
    assert "loop \N{MULTIPLICATION SIGN}50" not in drawn.text
    assert "loop \N{MULTIPLICATION SIGN}20 alike steps" in drawn.text
    assert "20 alike steps of hub drawn once" in drawn.folded
    assert "Note over a4: worker: 1000 invocations, 1000 model calls" in drawn.text  # every one


async def test_what_does_not_fit_is_paged_and_each_page_says_so() -> None:
    # Ten steps that differ (2 to 11 calls each) cannot fold into one loop.
    steps = ", ".join(
        "{tool_calls: ["
        + ", ".join(f"{{name: delegate_to_worker, arguments: {{task: p{i}}}}}" for i in range(n))
        + "]}"
        for n in range(2, 12)
    )
    _, spans = await local_trace(WIDE.format(steps=steps), "fan out unevenly")
    first = sequence_diagram(spans, max_chars=3_000)
    assert first.pages > 1
    seen: set[str] = set()
    for page in range(1, first.pages + 1):
        drawn = sequence_diagram(spans, max_chars=3_000, page=page)
        assert f"page {page} of {first.pages}" in drawn.text
        assert len(arrow_lines(drawn.text)) == len(drawn.arrows)
        seen |= set(drawn.arrows)
    delegations = {s["span_id"] for s in spans if s["name"] == "execute_tool delegate_to_worker"}
    # Alike calls in a step are drawn once, so every step shows at least one of its calls.
    assert len(seen & delegations) >= 10


def test_open_spans_of_a_run_still_going_end_in_running_notes() -> None:
    def span(span_id: str, parent: str | None, name: str, **attributes: Any) -> dict[str, Any]:
        return {
            "trace_id": "t",
            "span_id": span_id,
            "parent_span_id": parent,
            "name": name,
            "start_ns": 1,
            "end_ns": None,
            "status": "UNSET",
            "attributes": attributes,
            "events": [],
        }

    spans = [
        span("w", None, "invoke_workflow baton", **{"baton.run.id": "r1"}),
        span("a", "w", "invoke_agent boss", **{"gen_ai.agent.name": "boss"}),
        span("t", "a", "execute_tool delegate_to_helper"),
    ]
    drawn = sequence_diagram(spans)
    assert "a3->>+a4: delegate_to_helper" in drawn.text
    assert "Note over a4: running…" in drawn.text and "Note over a3: running…" in drawn.text
    assert "o2-->>c1" not in drawn.text  # the run has not answered yet


def test_a_run_without_spans_says_so() -> None:
    assert "no spans were recorded" in sequence_diagram([]).text
