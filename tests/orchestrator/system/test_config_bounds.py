"""Hostile config files: each is refused with a config error that names the file and line.

The configs are checked as users check them, with `baton check` in a process of its own, under a
hard memory and time bound: a loader that expands the alias bomb fails the test by dying.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.system.yaml_source import MAX_CONFIG_BYTES

BOMB = Path(__file__).parent / "configs" / "alias_bomb.yaml"
MEMORY_BOUND = 1 << 30


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BOUND, MEMORY_BOUND))


def check(path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", "check", str(path), *options],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_bounded,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
        check=False,
    )


def test_an_alias_bomb_is_refused_within_bounds_and_says_why() -> None:
    assert BOMB.stat().st_size < 600  # nine levels of nine aliases: 9**9 values if expanded
    done = check(BOMB)
    assert done.returncode == 2, done.stderr
    assert (
        f"{BOMB}:6:4: error: YAML refused (a bound on config files): aliases expand it to "
        "more than 100,000 values" in done.stderr
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            b"name: x\nagents: &a [*a]\n",
            "t.yaml:2:9: error: YAML refused (a bound on config "
            "files): an alias refers to a value that contains it",
        ),
        (
            b"a: " + b"[" * 100 + b"]" * 100 + b"\n",
            "t.yaml:1:67: error: YAML refused (a bound on "
            "config files): nested more than 64 levels deep",
        ),
        (
            b"name: caf\xe9\nagents: []\n",
            "t.yaml:1:10: error: not UTF-8 text: byte 0xe9 cannot be decoded",
        ),
        (b"name: x\x07\n", "t.yaml:1:8: error: YAML: control character #x0007 is not allowed"),
        (b"", "t.yaml:1:1: error: the file is empty; it must be a mapping with an 'agents' list"),
        (b"# " + b"x" * MAX_CONFIG_BYTES, "t.yaml: error: the file is larger than 1,048,576 bytes"),
    ],
    ids=["self-reference", "deep nesting", "latin-1", "control character", "empty", "huge"],
)
def test_hostile_files_are_config_errors_naming_file_and_line(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "t.yaml"
    path.write_bytes(content)
    done = check(path)
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr.replace(str(tmp_path) + "/", "")
    assert "Traceback" not in done.stderr


def test_check_offline_starts_no_mcp_server(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    config = tmp_path / "team.yaml"
    config.write_text(f"""
agents:
  - name: a
    mcp:
      - name: local
        command: {sys.executable}
        args: ["-c", "open({str(marker)!r}, 'w')"]
""")
    offline = check(config, "--offline")
    assert offline.returncode == 0, offline.stderr
    assert "MCP servers and remote agents not contacted (--offline)" in offline.stdout
    assert not marker.exists()
    online = check(config)  # the server is started (and is no MCP server)
    assert online.returncode == 1
    assert marker.exists()
