from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from agents.core.messages import RunStatus
from orchestrator.cli import app
from orchestrator.engine import Engine, Submission
from orchestrator.store import RunMeta, RunStore
from tests.service import ServiceProcess
from tests.testkit import OtlpReceiver

pytestmark = [pytest.mark.long, pytest.mark.heavy]

runner = CliRunner(env={"COLUMNS": "160"})


def test_check_prints_the_topology_of_a_valid_system() -> None:
    result = runner.invoke(app, ["check", "configs/default.yaml"])
    assert result.exit_code == 0, result.output
    assert "coordinator" in result.output and "researcher, analyst, writer" in result.output
    # Where the agents run: none of the default team asks Ray for anything, so one process.
    assert "one shared actor process: coordinator, researcher, fact_checker, analyst, writer" in (
        result.output
    )
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
def test_run_prints_the_answer_and_the_tree_records_the_run_and_exports_its_trace(
    ray_address: str, default_engine: Engine, tmp_path: Path
) -> None:
    store_url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    receiver = OtlpReceiver()
    env = {
        **os.environ,
        "RAY_ADDRESS": ray_address,
        # The session's agents of the same config: `baton run` finds them instead of starting
        # its own (as a second driver on a cluster does).
        "BATON_NAMESPACE": "baton-tests",
        "COLUMNS": "160",
        "BATON_STORE_URL": store_url,
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
    }
    # A run a server left when it died: a one-shot `baton run` leaves it for a server to resume.
    asyncio.run(_lost_run(store_url))
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "orchestrator",
                "run",
                "Research the history of Ray, check the facts, and calculate 2 + 2",
                "--verbose",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=180,
            check=False,
        )
    finally:
        receiver.close()
    assert done.returncode == 0, done.stderr
    # Its output is piped: the answer alone on stdout, everything else on stderr.
    answer, told = done.stdout, done.stderr
    assert answer.startswith("Answer to: Research the history of Ray") and "calculate: 4" in answer
    assert "→" not in answer and "delegation tree" not in answer
    assert "succeeded" in told
    for agent in ("coordinator", "researcher", "fact_checker", "analyst"):
        assert f"✓ {agent}" in told
    assert "2 model calls" in told and "tokens" in told
    # Progress streamed while the run went on.
    assert "→ researcher (from coordinator)" in told
    assert "→ fact_checker (from researcher)" in told
    assert "analyst asks baton/offline (step 1)" in told  # --verbose: every event
    # The entry agent's answer as its model wrote it (sub-agents' text: only with --stream-all).
    assert "coordinator ▸ Answer to: Research the history of Ray" in told
    assert "researcher ▸" not in told
    assert asyncio.run(_lost_run_left_alone(store_url))

    # The run is in the store: `baton runs` lists it and `baton show` prints its tree.
    listed = runner.invoke(
        app, ["runs", "--status", "succeeded"], env={"BATON_STORE_URL": store_url, "COLUMNS": "200"}
    )
    assert listed.exit_code == 0, listed.output
    # Not a terminal: a header and one tab-separated line a run, nothing cut.
    header, line = listed.output.splitlines()
    assert header.split("\t")[:3] == ["id", "status", "task"]
    run_id, status, task, *_ = line.split("\t")
    assert status == "succeeded" and task.endswith("calculate 2 + 2")
    as_json = runner.invoke(
        app, ["runs", "--json", "--status", "succeeded"], env={"BATON_STORE_URL": store_url}
    )
    page = json.loads(as_json.output)
    assert page["total"] == 1 and page["runs"][0]["id"] == run_id
    assert page["runs"][0]["usage"]["input_tokens"] > 0
    shown = runner.invoke(app, ["show", run_id], env={"BATON_STORE_URL": store_url})
    assert shown.exit_code == 0, shown.output
    assert f"run {run_id} · succeeded" in shown.output
    assert "calculate: 4" in shown.output and "✓ fact_checker" in shown.output
    traced = runner.invoke(app, ["trace", run_id], env={"BATON_STORE_URL": store_url})
    assert traced.exit_code == 0, traced.output
    assert "trace · 17 spans" in traced.output
    for name in ("invoke_workflow baton", "invoke_agent fact_checker", "execute_tool calculate"):
        assert f"✓ {name}" in traced.output

    # And drawn: Mermaid text on stdout, an SVG rendered in Chromium.
    drawn = runner.invoke(app, ["diagram", run_id], env={"BATON_STORE_URL": store_url})
    assert drawn.exit_code == 0, drawn.output
    assert "participant a5 as fact_checker" in drawn.output and "autonumber" in drawn.output
    picture = tmp_path / "run.svg"
    rendered = runner.invoke(
        app, ["diagram", run_id, "-o", str(picture)], env={"BATON_STORE_URL": store_url}
    )
    assert rendered.exit_code == 0, rendered.output
    assert picture.read_text().startswith("<svg") and "fact_checker" in picture.read_text()

    # The same spans went to the OTLP backend over HTTP, as one trace with the same tree.
    stored = asyncio.run(_stored_spans(store_url, run_id))
    exported = {s["span_id"]: s for s in receiver.spans}
    assert len(exported) == len(stored) == 17
    assert {s["trace_id"] for s in receiver.spans} == {stored[0]["trace_id"]}
    for span in stored:
        sent = exported[span["span_id"]]
        assert (sent["name"], sent["parent_span_id"]) == (span["name"], span["parent_span_id"])
        assert sent["resource"]["service.name"] == "baton" and sent["scope"] == "baton"
    # From the CLI's process and the team's shared host.
    assert len({s["resource"]["process.pid"] for s in receiver.spans}) == 2
    chat = next(s for s in receiver.spans if s["name"] == "chat offline")
    assert chat["attributes"]["gen_ai.operation.name"] == "chat"
    assert int(chat["attributes"]["gen_ai.usage.input_tokens"]) > 0


async def _lost_run(url: str) -> None:
    store = await RunStore.open(url)
    try:
        await store.add(Submission("wait"), RunMeta("lost", "baton", {}, owner="gone:1"))
        await store.start("lost")
        await store._set("lost", heartbeat_at=0.0)  # its server stopped renewing long ago
    finally:
        await store.close()


async def _lost_run_left_alone(url: str) -> bool:
    store = await RunStore.open(url)
    try:
        run = await store.get("lost")
        return run is not None and run.status == "running" and run.owner == "gone:1"
    finally:
        await store.close()


async def _stored_spans(url: str, run_id: str) -> list[dict[str, object]]:
    store = await RunStore.open(url)
    try:
        return await store.spans(run_id)
    finally:
        await store.close()


def test_run_json_is_all_that_reaches_stdout_while_the_cluster_broadcasts(
    ray_address: str, tmp_path: Path
) -> None:
    # The agent's tool makes the cluster warn every driver (as the raylet does when many worker
    # processes start); the model's next reply takes long enough for the warning to arrive.
    (tmp_path / "loud.yaml").write_text("""
name: loud
agents:
  - name: loud
    tools: [tests.testkit:warn_drivers]
    model:
      name: baton/scripted
      params:
        latency_ms: 1500
        replies:
          - {tool_calls: [{name: warn_drivers, arguments: {message: cluster says hello}}]}
          - {content: loud done}
""")
    env = {
        **os.environ,
        "RAY_ADDRESS": ray_address,
        "BATON_STORE_URL": f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}",
    }
    loud = str(tmp_path / "loud.yaml")
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "shout", "-c", loud, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == "loud done"
    assert "cluster says hello" in done.stderr


def test_show_names_a_run_that_is_not_in_the_store(tmp_path: Path) -> None:
    store_url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    result = runner.invoke(app, ["show", "nope"], env={"BATON_STORE_URL": store_url})
    assert result.exit_code == 1
    assert "no run 'nope' in the store" in result.output


def test_a_missing_api_keys_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "keys.txt"
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "serve"],
        capture_output=True,
        text=True,
        env={**os.environ, "BATON_API_KEYS_FILE": str(missing), "COLUMNS": "300"},
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert f"cannot read BATON_API_KEYS_FILE {missing}: No such file or directory" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.ray
def test_baton_run_uses_a_running_baton_serve_of_the_same_team_and_store(
    api: str, service_dir: Path
) -> None:
    env = {
        **os.environ,
        "BATON_STORE_URL": f"sqlite+aiosqlite:///{service_dir / 'api'}.db",  # the server's
        "COLUMNS": "160",
        # Asked for here, but the run is made on the server, which exports none: said so.
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
    }
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "calculate 6 * 7", "--agent", "analyst",
         "--config", str(service_dir / "svc.yaml")],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # Its warm agents ran the task: no Ray or agents started here.
    assert f"using the baton serve running at {api}" in done.stderr
    assert "calculate: 42" in done.stdout
    assert f"trace: not exported: the service at {api} exports no traces" in done.stderr
    assert "OTEL_* variables apply to runs made here" in done.stderr
    [run_id] = re.findall(r"run ([0-9a-f]{32}) · succeeded", done.stderr)
    assert httpx.get(f"{api}/v1/runs/{run_id}").json()["status"] == "succeeded"
    # `baton replay` finds the same server, and takes the short id the UI shows.
    replayed = subprocess.run(
        [sys.executable, "-m", "orchestrator", "replay", run_id[:12],
         "--config", str(service_dir / "svc.yaml")],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr + replayed.stdout
    assert f"using the baton serve running at {api}" in replayed.stderr
    assert f"reproduced: the same diagram as run {run_id[:12]}" in replayed.stdout


async def finished_runs(url: str, *run_ids: str, going: str | None = None) -> None:
    """A store with these runs finished (in this order), and one still going."""
    store = await RunStore.open(url)
    for run_id in run_ids:
        await store.add(Submission("t"), RunMeta(run_id, "s", {}))
        await store.end(run_id, RunStatus.SUCCEEDED, "")
    if going is not None:
        await store.add(Submission("t"), RunMeta(going, "s", {}))
    await store.close()


def test_baton_prune_removes_finished_runs_by_age_or_count(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"

    async def left() -> set[str]:
        store = await RunStore.open(url)
        try:
            return {r.id for r in (await store.list(limit=10)).runs}
        finally:
            await store.close()

    asyncio.run(finished_runs(url, "a", "b", "c", going="going"))
    env = {"BATON_STORE_URL": url, "COLUMNS": "200"}
    refused = CliRunner().invoke(app, ["prune"], env=env)
    assert refused.exit_code == 2 and "--keep N or --memory-older-than DAYS" in refused.output
    kept = CliRunner().invoke(app, ["prune", "--keep", "1"], env=env)
    assert kept.exit_code == 0 and "removed 2 finished runs" in kept.output
    assert len(asyncio.run(left())) == 2 and "going" in asyncio.run(left())
    aged = CliRunner().invoke(app, ["prune", "--older-than", "0"], env=env)
    assert aged.exit_code == 0 and "removed 1 finished run\n" in aged.output
    assert asyncio.run(left()) == {"going"}


def test_a_service_with_a_retention_policy_sweeps_the_store(
    ray_address: str, tmp_path: Path
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"

    asyncio.run(finished_runs(url, "a", "b", "c"))
    (tmp_path / "team.yaml").write_text(
        "name: kept\nagents: [{name: solo, description: Adds., tools: [configs.tools:calculate]}]"
    )
    service = ServiceProcess(
        tmp_path / "team.yaml", url, ray_address, tmp_path / "log",
        BATON_RETENTION_MAX_RUNS="1", BATON_RETENTION_SWEEP_S="0.5",
        BATON_RATE_LIMIT_PER_S="1000", BATON_RATE_LIMIT_BURST="1000",
    )  # fmt: skip
    service.start()
    try:
        with httpx.Client(base_url=service.url, timeout=30) as http:
            deadline = time.monotonic() + 30  # the sweep runs as the service starts
            while (listed := http.get("/v1/runs").json())["total"] != 1:
                assert time.monotonic() < deadline, listed
                time.sleep(0.05)  # (the sweep is periodic: there is no event to wait on)
            assert [r["id"] for r in listed["runs"]] == ["c"]
            # A run of this service, followed to its end, then removed by the next sweep (a
            # newer one kept): not found anywhere, its events included, though they were
            # streamed from this service's memory minutes ago.
            made = http.post("/v1/runs", json={"task": "calculate 1 + 1"}).json()["id"]
            assert "run_finished" in http.get(f"/v1/runs/{made}/events").text
            newer = http.post("/v1/runs", json={"task": "calculate 2 + 2"}).json()["id"]
            assert "run_finished" in http.get(f"/v1/runs/{newer}/events").text
            deadline = time.monotonic() + 30
            while (gone := http.get(f"/v1/runs/{made}").status_code) != 404:
                assert gone == 200 and time.monotonic() < deadline, gone
                time.sleep(0.05)
            assert http.get(f"/v1/runs/{made}/events").status_code == 404
    finally:
        service.stop()
