"""Agents on Ray using MCP servers and the built-in file tools, in real runs: what the model
gets back, what the trace shows, and what is refused or reported."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from agents.core.errors import ConfigError
from agents.core.messages import RunStatus
from orchestrator.engine import Engine, Submission
from tests.testkit import config, start

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.heavy]
ROOT = Path(__file__).resolve().parents[3]


def scripted(*calls: tuple[str, dict[str, Any]]) -> str:
    """A scripted model that makes these tool calls in one step, then answers."""
    import json

    listed = ", ".join(f"{{name: {name}, arguments: {json.dumps(args)}}}" for name, args in calls)
    return (
        f"{{name: baton/scripted, params: {{replies: [{{tool_calls: [{listed}]}}, "
        "{content: done}]}}"
    )


def by_id(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["span_id"]: s for s in spans}


async def test_an_agent_calls_mcp_tools_and_the_calls_join_the_run_trace(
    started: list[Engine],
) -> None:
    model = scripted(
        ("calc_add", {"a": 19, "b": 23}),
        ("get_current_time", {"timezone": "Europe/Paris"}),
    )
    engine = start(
        started,
        f"""
        name: mcp_run
        agents:
          - name: lead
            delegates: [clerk]
            model: {scripted(("delegate_to_clerk", {"task": "add and tell the time"}))}
          - name: clerk
            model: {model}
            # (Started beside the heavy suite's other services: a slow start is not the subject.)
            mcp:
              - {{name: calc, command: {sys.executable}, args: [-m, tests.mcp_server],
                  cwd: {ROOT}, include: [add], prefix: calc_, connect_timeout_s: 60}}
              - {{name: time, command: {sys.executable}, connect_timeout_s: 60,
                  args: [-m, mcp_server_time, --local-timezone, UTC]}}
        """,
    )
    placement = {r["agent"]: r for r in await engine.placement()}
    assert placement["clerk"]["tool_problems"] == []

    result = await engine.run(Submission("add and tell the time"))
    assert result.status == RunStatus.SUCCEEDED, result.error
    assert len({s["trace_id"] for s in result.spans}) == 1
    spans = by_id(result.spans)
    tools = {
        s["attributes"]["gen_ai.tool.name"]: s
        for s in result.spans
        if s["name"].startswith("execute_tool ")
    }
    for name in ("calc_add", "get_current_time"):
        span = tools[name]
        assert span["status"] != "ERROR", span
        parent = spans[span["parent_span_id"]]
        assert parent["name"] == "invoke_agent clerk"
    # The mcp package's own client spans nest under Baton's tool spans.
    sent = [s for s in result.spans if s["name"].startswith("MCP send tools/call")]
    assert {spans[s["parent_span_id"]]["name"] for s in sent} == {
        "execute_tool calc_add",
        "execute_tool get_current_time",
    }
    clerk = next(c for c in result.tree.children if c.agent == "clerk")  # type: ignore[union-attr]
    assert clerk.status == RunStatus.SUCCEEDED


async def test_an_unreachable_server_is_reported_and_the_agent_works_without_it(
    started: list[Engine],
) -> None:
    engine = start(
        started,
        """
        name: mcp_broken
        agents:
          - name: solo
            model: {name: baton/scripted, params: {replies: [{content: fine without it}]}}
            mcp:
              - {name: gone, url: "http://127.0.0.1:9/mcp", connect_timeout_s: 2}
        """,
    )
    placement = await engine.placement()
    assert any("MCP server gone" in p for p in placement[0]["tool_problems"])
    result = await engine.run(Submission("anything"))
    assert result.status == RunStatus.SUCCEEDED and result.output == "fine without it"


async def test_file_tools_read_inside_the_base_folder_only(
    started: list[Engine], tmp_path: Path
) -> None:
    base = tmp_path / "docs"
    base.mkdir()
    (base / "guide.md").write_text("Baton guide: delegations are spans.\n")
    (tmp_path / "secret.txt").write_text("do not read")
    (base / "escape.md").symlink_to(tmp_path / "secret.txt")
    model = scripted(
        ("read_file", {"path": "guide.md"}),
        ("read_file", {"path": "../secret.txt"}),
        ("read_file", {"path": "escape.md"}),
        ("read_file", {"path": str(tmp_path / "secret.txt")}),
        ("search_files", {"text": "spans"}),
    )
    engine = start(
        started,
        f"""
        name: files_run
        tracing: {{capture_content: true}}
        agents:
          - name: reader
            model: {model}
            files: {{base_dir: {base}}}
        """,
    )
    result = await engine.run(Submission("read the guide"))
    assert result.status == RunStatus.SUCCEEDED, result.error
    outcomes = [
        (
            s["attributes"]["gen_ai.tool.call.arguments"],
            s["attributes"]["gen_ai.tool.call.result"],
            s["status"],
        )
        for s in sorted(result.spans, key=lambda s: s["start_ns"])
        if s["name"].startswith("execute_tool ")
    ]
    assert "delegations are spans" in outcomes[0][1] and outcomes[0][2] != "ERROR"
    for _, text, status in outcomes[1:4]:
        assert status == "ERROR" and "do not read" not in text
    assert "leaves the base folder" in outcomes[1][1]
    assert "symbolic link" in outcomes[2][1]
    assert "absolute" in outcomes[3][1]
    assert "guide.md:1:" in outcomes[4][1]


def test_config_errors_name_the_problem_and_the_place(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        config(
            """
            name: bad
            agents:
              - name: a
                mcp:
                  - {name: s, command: "python -c 'import os'"}
            """
        )
    assert "test.yaml:6:" in str(caught.value) and "agents[0].mcp[0]" in str(caught.value)
    assert "contains shell syntax" in str(caught.value)

    with pytest.raises(ConfigError) as caught:
        config(
            f"""
            name: bad
            agents:
              - name: a
                tools: [tests.testkit:read_file]
                files: {{base_dir: {tmp_path / "nowhere"}}}
                mcp:
                  - {{name: t, url: "http://127.0.0.1:1/mcp", headers: {{X-Key: SOME_KEY}}}}
                  - {{name: git, command: mcp-server-git, cwd: {tmp_path / "no-repo"}}}
            """
        )
    text = str(caught.value)
    assert (
        "agents[0].mcp[0].headers.X-Key: SOME_KEY must also be listed under the top-level env"
        in text
    )
    assert "agents[0].files.base_dir" in text and "is not a directory" in text
    assert f"agents[0].mcp[1].cwd: {tmp_path / 'no-repo'} is not a directory" in text
    assert "collides with the built-in file tool 'read_file'" in text


BANNER = "calc server starting (a banner on stderr)"


def test_baton_check_reaches_every_mcp_server_and_keeps_their_stderr_aside(
    tmp_path: Path,
) -> None:
    import subprocess

    def check(*servers: str) -> subprocess.CompletedProcess[str]:
        (tmp_path / "team.yaml").write_text(
            "name: checked\nagents:\n  - name: clerk\n    mcp:\n"
            + "".join(f"      - {s}\n" for s in servers)
        )
        return subprocess.run(
            [sys.executable, "-m", "orchestrator", "check", str(tmp_path / "team.yaml")],
            capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip

    talkative = json.dumps(
        f"import runpy, sys; print({BANNER!r}, file=sys.stderr); "
        "runpy.run_module('tests.mcp_server', run_name='__main__')"
    )
    calc = (
        f"{{name: calc, command: {sys.executable}, args: [-c, {talkative}], cwd: {ROOT}, "
        "include: [add, shout], connect_timeout_s: 60}"  # (a slow start is not the subject)
    )
    healthy = check(calc)
    assert healthy.returncode == 0, healthy.stderr
    assert "MCP calc" in healthy.stdout  # in the topology's tools column
    assert "clerk: MCP server calc: add, shout" in healthy.stdout
    assert BANNER not in healthy.stdout + healthy.stderr  # a healthy server's chatter is not news

    done = check(calc, '{name: gone, url: "http://127.0.0.1:9/mcp", connect_timeout_s: 2}')
    assert done.returncode == 1
    assert "clerk: MCP server calc: add, shout" in done.stdout
    assert "clerk: MCP server gone: ConnectError" in done.stderr
    # When one fails, what the servers said may tell why.
    said = done.stderr.split("what the MCP servers said on stderr:")
    assert len(said) == 2 and BANNER in said[1]
