"""`baton` in a real terminal (a pseudo-terminal of 80 columns), as a person runs it."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from agents.core.messages import AgentResult, RunStatus, Usage
from orchestrator.engine import RunResult, Submission
from orchestrator.store import RunMeta
from orchestrator.store.store import RunStore

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def in_terminal(command: list[str], env: dict[str, str], columns: int = 80) -> str:
    """Run `command` with a terminal of `columns` for stdin, stdout and stderr; what it showed."""
    main, side = pty.openpty()
    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {**env, "COLUMNS": str(columns), "TERM": "xterm-256color"}
    process = subprocess.Popen(command, stdin=side, stdout=side, stderr=side, env=env)
    os.close(side)
    shown = bytearray()
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the terminal closed: the process is gone
            break
        if not chunk:
            break
        shown += chunk
    process.wait(timeout=120)
    os.close(main)
    return ANSI.sub("", shown.decode(errors="replace")).replace("\r\n", "\n")


async def _structured_run(url: str) -> None:
    store = await RunStore.open(url)
    try:
        config = {
            "agents": [
                {"name": "checker", "output_schema": {"type": "object"}},
            ]
        }
        await store.add(Submission("check it", agent="checker"), RunMeta("r1", "s", config))
        reason = "the claim holds " + " ".join(f"because of reason number {i}" for i in range(8))
        output = '{"verdict": "true", "reason": "' + reason + '"}'
        tree = AgentResult(
            agent="checker",
            status=RunStatus.SUCCEEDED,
            output=output,
            usage=Usage(input_tokens=10, output_tokens=5, model_calls=1),
            steps=1,
        )
        result = RunResult(
            run_id="r1",
            task="check it",
            entry_agent="checker",
            status=RunStatus.SUCCEEDED,
            output=output,
            usage=tree.usage,
            started_at=1.0,
            duration_s=0.5,
            tree=tree,
        )
        await store.finish(result, [])
    finally:
        await store.close()


def test_show_wraps_a_structured_answer_at_80_columns_and_counts_one_model_call(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    asyncio.run(_structured_run(url))
    shown = in_terminal(
        [sys.executable, "-m", "orchestrator", "show", "r1"],
        {**os.environ, "BATON_STORE_URL": url},
    )
    lines = shown.splitlines()
    assert max(len(line) for line in lines) <= 80, shown
    # The long reason is all there, wrapped inside the panel rather than cut at its edge.
    inside = "".join(line.strip("│ ").strip() for line in lines)
    assert "because of reason number 7" in inside, shown
    assert "1 model call ·" in shown and "1 model calls" not in shown


@pytest.mark.ray
def test_a_piped_run_writes_the_answer_alone_and_its_progress_to_the_terminal(api: str) -> None:
    # As a person types it: `baton run "..." | cat` with stderr on the terminal, then with
    # stderr thrown away (only the answer is left).
    base = f"{sys.executable} -m orchestrator run 'calculate 6 * 7' --agent analyst --server {api}"
    both = in_terminal(["bash", "-c", f"{base} | cat"], dict(os.environ))
    assert "→ analyst" in both and "calculate: 42" in both
    alone = in_terminal(["bash", "-c", f"{base} 2>/dev/null | cat"], dict(os.environ))
    assert "calculate: 42" in alone
    for told in ("→", "delegation tree", "· succeeded", "using the baton serve"):
        assert told not in alone, alone
