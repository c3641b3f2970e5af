"""A team's own modules, beside its team file, import with no PYTHONPATH: in the `baton`
command that reads the file (from any working directory) and in every agent host on Ray."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.service import ServiceProcess

TOOLS = '''
def shout(text: str) -> str:
    """Shout the text back.

    Args:
        text: what to shout.
    """
    return text.upper() + " (said by the team folder's own module)"
'''

TEAM = """
name: loud
agents:
  - name: crier
    description: Shouts.
    tools: [loud_team_tools:shout]
"""


def _team(tmp_path: Path) -> Path:
    folder = tmp_path / "team"
    folder.mkdir()
    (folder / "loud_team_tools.py").write_text(TOOLS)
    (folder / "team.yaml").write_text(TEAM)
    return folder / "team.yaml"


def _no_pythonpath() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_baton_check_imports_the_team_folders_module_from_another_directory(
    tmp_path: Path,
) -> None:
    team = _team(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "check", str(team), "--offline"],
        cwd=elsewhere, env=_no_pythonpath(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tool shout(text: what to shout.)" in done.stdout


def test_the_team_folders_module_imports_in_the_agent_hosts_of_baton_serve(
    ray_address: str, tmp_path: Path
) -> None:
    team = _team(tmp_path)
    url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    service = ServiceProcess(team, url, ray_address, tmp_path / "log", PYTHONPATH="")
    service.start()
    try:
        with httpx.Client(base_url=service.url, timeout=60) as http:
            made = http.post("/v1/runs", json={"task": "shout hello"}).json()["id"]
            assert "run_finished" in http.get(f"/v1/runs/{made}/events").text
            run = http.get(f"/v1/runs/{made}").json()
    finally:
        service.stop()
    assert run["status"] == "succeeded", run
    assert "HELLO (said by the team folder's own module)" in run["output"], run["output"]
