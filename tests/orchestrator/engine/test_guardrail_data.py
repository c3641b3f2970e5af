"""What a tripped guardrail blocked goes nowhere: not the store, the API, the export, the UI.

And a run made on a service that exports is exported by it, and the CLI says where.

A real `baton serve` exporting over OTLP/HTTP to a receiver of the test's, its SQLite store read
whole afterwards, and the run pages in Chromium.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page

from tests.service import ServiceProcess
from tests.testkit import OtlpReceiver

pytestmark = [pytest.mark.ray, pytest.mark.long, pytest.mark.heavy]

CARD_IN = "4111 1111 1111 1111"
CARD_OUT = "4000 0000 0000 0002"
VAULT = r"""
name: vault
tracing: {capture_content: true}
guardrails:
  input: [{name: no-card-numbers, regex: "\\b\\d(?:[ -]?\\d){12,18}\\b"}]
agents:
  - name: desk
    description: Answers questions about payments.
  - name: echo
    description: Reads back what is on file.
    model:
      name: baton/scripted
      params: {replies: [{content: "On file: card 4000 0000 0000 0002, expires 12/29."}]}
    guardrails:
      output: [{name: no-card-numbers-out, regex: "\\b\\d(?:[ -]?\\d){12,18}\\b"}]
"""


@pytest.fixture(scope="module")
def vault(
    ray_address: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServiceProcess, OtlpReceiver, Path]]:
    root = tmp_path_factory.mktemp("vault")
    (root / "vault.yaml").write_text(VAULT)
    store = root / "vault.db"
    receiver = OtlpReceiver()
    service = ServiceProcess(
        root / "vault.yaml",
        f"sqlite+aiosqlite:///{store}",
        ray_address,
        root / "vault.log",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
    )
    service.start()
    try:
        yield service, receiver, store
    finally:
        service.stop()
        receiver.close()


def _blocked_nowhere(text: str, card: str, where: str) -> None:
    digits = card.replace(" ", "")
    assert card not in text and digits not in text, f"the blocked card number is in {where}"


def _run(url: str, body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Run it to its end; the run, and all the API says of it (run, events, trace, diagram)."""
    with httpx.Client(base_url=url, timeout=30) as client:
        answer = client.post("/v1/runs", json=body)
        assert answer.status_code == 202, answer.text
        run_id = answer.json()["id"]
        # (Not asyncio: the browser's API runs an event loop in this thread.) The stream of a
        # run ends with its `run_finished`.
        with client.stream("GET", f"/v1/runs/{run_id}/events") as events:
            streamed = events.read().decode()
        run = client.get(f"/v1/runs/{run_id}").json()
        seen = [json.dumps(run), streamed]
        for path in ("trace", "diagram"):
            seen.append(client.get(f"/v1/runs/{run_id}/{path}").text)
    assert "event: run_finished" in streamed
    return run, "\n".join(seen)


def _exported(receiver: OtlpReceiver, run_id: str) -> str:
    deadline = time.monotonic() + 30  # the service exports in batches, off the run's path
    while time.monotonic() < deadline:
        ours = [s for s in receiver.spans if s["attributes"].get("baton.run.id") == run_id]
        if any(s["name"] == "invoke_workflow baton" for s in ours):
            return json.dumps(receiver.spans)
        time.sleep(0.2)
    raise AssertionError(f"run {run_id}'s trace was not exported")


def _store_dump(store: Path) -> str:
    """Every row of every table, but the team's own config (here it holds the scripted reply)."""
    with sqlite3.connect(store) as connection:
        connection.row_factory = sqlite3.Row
        tables = [
            r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        rows = [
            {k: row[k] for k in row.keys() if (table, k) != ("runs", "config")}
            for table in tables
            for row in connection.execute(f'SELECT * FROM "{table}"')
        ]
    return json.dumps(rows, default=str)


@pytest.mark.parametrize(
    ("body", "card"),
    [
        ({"task": f"charge card {CARD_IN} for the order", "agent": "desk"}, CARD_IN),
        ({"task": "read back what is on file", "agent": "echo"}, CARD_OUT),
    ],
    ids=["input", "output"],
)
def test_a_tripped_guardrail_keeps_what_it_blocked_out_of_every_record(
    vault: tuple[ServiceProcess, OtlpReceiver, Path], page: Page, body: dict[str, Any], card: str
) -> None:
    service, receiver, store = vault
    run, seen = _run(service.url, body)
    assert run["status"] == "guardrail_tripped", run
    assert "guardrail no-card-numbers" in run["error"]
    _blocked_nowhere(seen, card, "the API (run, events, trace, diagram)")
    if card == CARD_IN:  # the task is kept with the card taken out, saying where it was
        assert run["task"] == "charge card [BLOCKED by guardrail no-card-numbers] for the order"
        # Not even in the store's files: the blocked task was never written, not even to be
        # written over (SQLite keeps old pages in its -wal, as PostgreSQL keeps old rows).
        for path in (store, store.with_name("vault.db-wal"), store.with_name("vault.db-shm")):
            if path.exists():
                _blocked_nowhere(path.read_bytes().decode("latin-1"), card, path.name)
    _blocked_nowhere(_exported(receiver, run["id"]), card, "the OTLP export")
    _blocked_nowhere(_store_dump(store), card, "the run store")
    _blocked_nowhere(service.log.read_text(), card, "the service's log")
    page.goto(f"{service.url}/runs/{run['id']}")
    page.wait_for_selector("body[data-state=finished]", timeout=30_000)
    assert page.inner_text("#run-status").strip() == "guardrail_tripped"
    _blocked_nowhere(page.content(), card, "the run's page")


def test_a_run_made_on_the_service_is_exported_there_and_the_cli_says_where(
    vault: tuple[ServiceProcess, OtlpReceiver, Path],
) -> None:
    service, receiver, _ = vault
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "what is the fee?", "--server", service.url],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "160"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    [run_id] = re.findall(r"run ([0-9a-f]{32}) · succeeded", done.stderr)
    where = f"{receiver.endpoint}/v1/traces"
    assert f"trace: exported by the service at {service.url} to {where}" in done.stderr
    _exported(receiver, run_id)  # and it is there
