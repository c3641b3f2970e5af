"""Schemathesis against a running service's OpenAPI document, as a process of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["finish", "schemathesis"]

# A run's question or waiting call is named by an id only the run gives out (in its events):
# after POST /v1/runs, schemathesis makes one up, and "no such question" (404) is the answer, not
# a resource created and lost.
_CONFIG = """
[[operations]]
include-path-regex = '/(input|approvals/\\{call_id\\})$'  # (a literal string: no escapes)
checks.ensure_resource_availability.enabled = false
phases.stateful.enabled = false  # (the check above is judged on the link from POST /v1/runs)

# Any text is the document's valid body (a YAML config), but only a team's config is a new
# version: the rest is refused (422, naming each mistake), as the document says.
[[operations]]
include-path-regex = '/service/versions$'
checks.positive_data_acceptance.expected-statuses = ["2xx", "422"]

# A run's `input` must fit its entry agent's `input_schema` (the shared team's `pipeline` and
# `profiler` take one), which the document cannot tie to the `agent` drawn: a body naming such
# an agent without its input is refused (422 invalid_input, naming the agent and the field).
[[operations]]
include-path-regex = '/threads/\\{thread_id\\}/runs$'
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = [
    "2xx", "3xx", "401", "403", "404", "409", "422", "429",
]
"""


def schemathesis(
    url: str, folder: Path, *options: str, max_examples: int = 20
) -> subprocess.Popen[str]:
    """Start `schemathesis run` on the service at `url` with every check; its cache and report
    go to `folder` (not into the checkout)."""
    folder.mkdir()
    (folder / "schemathesis.toml").write_text(_CONFIG)
    return subprocess.Popen(
        [
            str(Path(sys.executable).parent / "schemathesis"),
            "run",
            f"{url}/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            str(max_examples),
            "--seed",
            "1",
            "--request-timeout",
            "30",
            "--report-dir",
            str(folder),
            *options,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=folder,
    )


def finish(runs: list[subprocess.Popen[str]], timeout_s: float = 600) -> None:
    """Wait for the runs; each must have found nothing (its output's end says what it did)."""
    try:
        for run in runs:
            output, _ = run.communicate(timeout=timeout_s)
            assert run.returncode == 0, output[-6000:]
    finally:
        for run in runs:
            run.kill()  # if a failure left it running
            run.wait()
