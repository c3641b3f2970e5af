"""Secrets never appear anywhere: not in output, spans, the store, exported traces or logs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import ray

from tests.openai_server import FakeOpenAI
from tests.testkit import OtlpReceiver

pytestmark = [pytest.mark.ray, pytest.mark.heavy]

KEY = "sk-canary-7fQz2LmN0pXw4RtY"  # the model's API key, written in the YAML
ENV_SECRET = "canary-env-value-93ab71"  # a forwarded variable's value
URL_KEY = "canary-url-key-5521aa"  # a key in the model server's URL (`?key=`)
HEADER_KEY = "canary-header-8c0d1e"  # a header the model server is sent
# Credentials whose names say nothing: found by their place (a header's value, a URL's query).
CODE_KEY = "canary-azure-code-41f0"  # Azure Functions: `?code=`
POSITIONAL_HEADERS = {  # well-known header names of API keys, each with its canary
    "Ocp-Apim-Subscription-Key": "canary-apim-1b2c3d",  # Azure API Management
    "x-goog-api-key": "canary-goog-4e5f6a",  # Google
    "api-key": "canary-azure-openai-7b8c",  # Azure OpenAI
    "x-functions-key": "canary-functions-9d0e",  # Azure Functions
    "Subscription": "canary-plain-name-2f3a",  # any name at all
}


def _ray_logs() -> Path:
    node = ray._private.worker.global_worker.node  # the session's own log directory
    return Path(node.get_session_dir_path()) / "logs"


def _files_containing(root: Path, needles: tuple[str, ...]) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path}: {n}" for n in needles if n.encode() in data]
    return found


def test_a_failed_run_leaves_no_trace_of_its_keys(ray_address: str, tmp_path: Path) -> None:
    fake = FakeOpenAI("leak_env", {"name": "BATON_CANARY_SECRET"}, reject_after_tool=True)
    receiver = OtlpReceiver()
    leaky = tmp_path / "leaky.yaml"
    leaky.write_text(f"""
name: leaky
env: [BATON_CANARY_SECRET]
tracing: {{capture_content: true}}
agents:
  - name: leaky
    tools: [tests.testkit:leak_env]
    model:
      name: openai/gpt-4o-mini
      params:
        api_base: "{fake.base_url}?key={URL_KEY}&code={CODE_KEY}"
        api_key: "{KEY}"
        extra_headers: {json.dumps({"X-Api-Key": HEADER_KEY, **POSITIONAL_HEADERS})}
""")
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    store = store_dir / "runs.db"
    env = {
        **os.environ,
        "RAY_ADDRESS": ray_address,
        "BATON_STORE_URL": f"sqlite+aiosqlite:///{store}",
        "BATON_CANARY_SECRET": ENV_SECRET,
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "COLUMNS": "200",
    }

    def baton(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "orchestrator", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=180,
            check=False,
        )

    try:
        ran = baton("run", "connect to the archive", "--config", str(leaky), "--json")
    finally:
        fake.close()
        receiver.close()
    assert ran.returncode == 1, ran.stderr
    # The provider did see the key, and the tool did leak the variable into the conversation.
    assert fake.requests[0]["auth"] == f"Bearer {KEY}"
    assert URL_KEY in str(fake.requests[0]["path"])
    assert fake.requests[0]["headers"]["x-api-key"] == HEADER_KEY  # type: ignore[index]
    assert any(ENV_SECRET in str(m) for m in fake.requests[1]["body"]["messages"])  # type: ignore[index]
    assert '"status": "failed"' in ran.stdout and "AuthenticationError" in ran.stdout
    assert "[REDACTED]" in ran.stdout

    run_id = json.loads(ran.stdout)["id"]
    shown, traced, listed = baton("show", run_id), baton("trace", run_id), baton("runs")
    drawn = baton("diagram", run_id)
    assert "trace ·" in traced.stdout and receiver.spans
    # The provider quoted every one of them back in its error (which the run records).
    assert CODE_KEY in fake.requests[0]["path"]  # type: ignore[operator]
    needles = (KEY, ENV_SECRET, URL_KEY, HEADER_KEY, CODE_KEY, *POSITIONAL_HEADERS.values())
    seen = {
        "run output": ran.stdout + ran.stderr,
        "baton show": shown.stdout + shown.stderr,
        "baton trace": traced.stdout + traced.stderr,
        "baton runs": listed.stdout + listed.stderr,
        "baton diagram": drawn.stdout + drawn.stderr,
        "exported spans": str(receiver.spans),
    }
    leaks = [f"{where}: {n}" for where, text in seen.items() for n in needles if n in text]
    leaks += _files_containing(store_dir, needles)  # the store file and its step_log included
    leaks += _files_containing(_ray_logs(), needles)
    assert leaks == []
