from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app

runner = CliRunner(env={"COLUMNS": "160"})


def test_check_prints_the_topology_of_a_valid_system() -> None:
    result = runner.invoke(app, ["check", "configs/default.yaml"])
    assert result.exit_code == 0, result.output
    assert "coordinator" in result.output and "researcher, analyst, writer" in result.output
    assert "max static depth: 3" in result.output
    assert "configs/default.yaml: ok" in result.output


def test_check_lists_every_error_with_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "agents:\n  - name: a\n    delegates: [b, ghost]\n  - name: b\n    delegates: [a]\n"
    )
    result = runner.invoke(app, ["check", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}:3:20: error: agents[0].delegates[1]: unknown agent 'ghost'" in result.output
    assert f"{bad}:3:5: error: agents[0].delegates: delegation cycle a -> b -> a" in result.output
    assert "2 error(s)" in result.output


@pytest.mark.ray
def test_run_prints_the_answer_and_the_delegation_tree(ray_address: str) -> None:
    env = {**os.environ, "RAY_ADDRESS": ray_address, "COLUMNS": "160"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "run",
            "Research the history of Ray, check the facts, and calculate 2 + 2",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "succeeded" in out and "calculate: 4" in out
    for agent in ("coordinator", "researcher", "fact_checker", "analyst"):
        assert f"✓ {agent}" in out
    assert "steps 2" in out and "tokens" in out
    # Progress streamed while the run went on.
    assert "→ researcher (from coordinator)" in out
    assert "→ fact_checker (from researcher)" in out
