"""`baton serve` on a local Ray of its own, as an operator runs it: what it exposes, and what
SIGTERM (to the service, or to its whole process group) or a Ctrl-C leaves behind: runs in
flight left for the next instance to resume (or, with `on_interrupt: fail`, recorded
interrupted), and no process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest

from orchestrator.store import RunStore
from tests.service import DOZER, ServiceProcess, all_events, follow, marked_processes, submit

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.long, pytest.mark.heavy]

# An agent whose tool takes a few seconds: in flight when the service stops, done soon after
# a resume. (`on_interrupt: resume`, the default; `fail` below.)
NAPPER = """
  - name: napper
    description: Naps, then answers.
    tools: [tests.testkit:slow_step]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: slow_step, arguments: {seconds: 4}}]}
          - {content: rested}
"""
CONFIG = "name: alone\nlimits: {deadline_s: 120}\nagents:" + NAPPER
FAILING = "name: alone\non_interrupt: fail\nlimits: {deadline_s: 120}\nagents:" + NAPPER

# The test service's dozer and analyst (one host), with `on_interrupt: fail`.
RESTART_CONFIG = (
    """
name: svc
on_interrupt: fail
agents:
  - name: analyst
    description: Does arithmetic.
    tools: [configs.tools:calculate]
"""
    + DOZER
)


def _listening(processes: dict[psutil.Process, str]) -> list[tuple[str, int, str]]:
    pids = {p.pid: name for p, name in processes.items()}
    return [
        (c.laddr.ip, c.laddr.port, pids[c.pid])
        for c in psutil.net_connections("inet")
        if c.status == psutil.CONN_LISTEN and c.pid in pids
    ]


def _intrude(address: str, home: Path) -> subprocess.CompletedProcess[str]:
    """Connect to the Ray at `address` as someone else would: without its token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
    code = f"import ray; ray.init(address={address!r}); print('connected')"
    return subprocess.run(
        [sys.executable, "-c", code],
        # One attempt: refused for its missing token, not retried for 20 s.
        env={**env, "HOME": str(home), "RAY_NUM_REDIS_GET_RETRIES": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _mark(tmp_path: Path, instance: str) -> str:
    """What the processes of one test's service inherit (unique across the test workers)."""
    return f"baton-test-{os.getpid()}-{tmp_path.name}-{instance}"


def _alone(tmp_path: Path, config: str, instance: str) -> ServiceProcess:
    """A `baton serve` on a local Ray of its own, its store in `tmp_path`."""
    (tmp_path / "alone.yaml").write_text(config)
    service = ServiceProcess(
        tmp_path / "alone.yaml", f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}", "",
        tmp_path / f"{instance}.log", BATON_SHUTDOWN_GRACE_S="1", BATON_INSTANCE_ID=instance,
        BATON_TEST_MARK=_mark(tmp_path, instance),
    )  # fmt: skip
    service._env.pop("RAY_ADDRESS")  # a local Ray instance of its own
    return service


async def _in_flight(service: ServiceProcess) -> list[str]:
    """Three runs, each mid-way (its tool call has started)."""
    runs = [(await submit(service.url, {"task": f"wait {i}"})).json()["id"] for i in range(3)]
    for run_id in runs:
        async for _, kind, _ in follow(service.url, run_id):
            if kind == "tool_started":
                break
    return runs


def _stop(service: ServiceProcess, stop: str, processes: dict[psutil.Process, str]) -> None:
    """Stop the service as an operator would; it ends, and leaves no process of its own."""
    assert service._process is not None
    if stop == "sigterm":  # what a process manager sends (Kubernetes: to PID 1 alone)
        service._process.send_signal(signal.SIGTERM)
    elif stop == "group":  # a terminal's job control, `kill -TERM -PGID`: the whole group
        os.killpg(service._process.pid, signal.SIGTERM)
    else:  # a terminal's Ctrl-C: SIGINT to the whole process group
        os.killpg(service._process.pid, signal.SIGINT)
    status = service._process.wait(timeout=90)
    if stop != "ctrl-c":  # ended by the signal once done (uvicorn re-raises it)
        assert status == -signal.SIGTERM
    assert "Finished server process" in service.log.read_text()
    _, alive = psutil.wait_procs(list(processes), timeout=30)
    assert alive == [], [(p.pid, processes[p]) for p in alive]


@pytest.mark.parametrize("stop", ["sigterm", "group", "ctrl-c"])
async def test_a_stop_leaves_runs_in_flight_to_the_next_instance_and_no_process(
    tmp_path: Path, stop: str
) -> None:
    service = _alone(tmp_path, CONFIG, "first")
    service.start()
    try:
        runs = await _in_flight(service)
        processes = marked_processes(_mark(tmp_path, "first"))
        assert {"gcs_server", "raylet"} <= set(processes.values()), processes  # Baton's own Ray
        if stop == "sigterm":  # the same service either way: one look is enough
            _check_exposure(service, processes, tmp_path)
        _stop(service, stop, processes)
    finally:
        for process in marked_processes(_mark(tmp_path, "first")):
            process.kill()
    # Nothing of the runs is lost, and none is ended: each waits, queued, for whichever instance
    # comes next (its lease given up), with the events it had.
    store = await RunStore.open(f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}")
    try:
        for run_id in runs:
            run = await store.get(run_id)
            assert run is not None and run.status == "queued", run
            kinds = [e.type for _, e in await store.events(run_id)]
            assert kinds[:2] == ["run_started", "agent_started"] and "tool_started" in kinds
            assert "run_finished" not in kinds
    finally:
        await store.close()
    async with httpx.AsyncClient() as client:  # and nothing listens any more
        with pytest.raises(httpx.ConnectError):
            await client.get(f"{service.url}/healthz")
    if stop == "ctrl-c":
        return
    # Another instance (a rolling upgrade's new pod) takes them over at once and ends them.
    successor = _alone(tmp_path, CONFIG, "next")
    successor.start()
    try:
        for run_id in runs:
            events = await all_events(successor.url, run_id)
            assert events[-1][1] == "run_finished" and events[-1][2]["status"] == "succeeded"
            async with httpx.AsyncClient(base_url=successor.url) as client:
                resumed = (await client.get(f"/v1/runs/{run_id}")).json()
            assert (resumed["status"], resumed["resumes"]) == ("succeeded", 1)
    finally:
        successor.stop()


async def test_a_stop_ends_runs_interrupted_when_the_team_does_not_resume_them(
    tmp_path: Path,
) -> None:
    service = _alone(tmp_path, FAILING, "failing")
    service.start()
    try:
        runs = await _in_flight(service)
        _stop(service, "sigterm", marked_processes(_mark(tmp_path, "failing")))
    finally:
        for process in marked_processes(_mark(tmp_path, "failing")):
            process.kill()
    store = await RunStore.open(f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}")
    try:
        for run_id in runs:
            run = await store.get(run_id)
            assert run is not None and run.status == "interrupted"
            assert run.error == "the service stopped while the run was in flight"
            events = await store.events(run_id)
            assert events[-1][1].type == "run_finished"
            assert events[-1][1].status == "interrupted"
            names = {s["name"] for s in await store.spans(run_id)}
            assert {"invoke_workflow baton", "invoke_agent napper", "chat scripted",
                    "execute_tool slow_step"} <= names, names  # fmt: skip
    finally:
        await store.close()


def _check_exposure(
    service: ServiceProcess, processes: dict[psutil.Process, str], tmp_path: Path
) -> None:
    """The API listens on loopback only; Ray's servers listen more widely (Ray 2.60 cannot be
    told otherwise) but refuse whoever lacks the instance's token."""
    sockets = _listening(processes)
    assert ("127.0.0.1", service.port, "python") in [(i, p, n[:6]) for i, p, n in sockets]
    assert not [s for s in sockets if s[1] == service.port and s[0] != "127.0.0.1"]
    gcs = next(p for p, name in processes.items() if name == "gcs_server")
    node_ip = next(a for a in gcs.cmdline() if a.startswith("--node-ip-address="))
    gcs_port = next(port for _, port, name in sockets if name == "gcs_server")
    intruder = _intrude(f"{node_ip.split('=', 1)[1]}:{gcs_port}", tmp_path)
    assert "connected" not in intruder.stdout and intruder.returncode != 0, intruder.stdout
    assert "AuthenticationError" in intruder.stderr, intruder.stderr[-2000:]
    for process, name in processes.items():
        if name in ("gcs_server", "raylet"):
            assert process.environ().get("RAY_AUTH_MODE", "token") == "token"


async def test_a_service_killed_mid_run_leaves_the_run_interrupted_after_restart(
    ray_address: str, service_dir: Path
) -> None:
    # `on_interrupt: fail`: not resumed (see test_durable for what `resume`, the default, does).
    # The dozer waits a minute, not the sleeper's 3 s: the run must still be in flight when the
    # service dies, however long its `tool_started` takes to reach this follower on a busy
    # machine.
    failing = service_dir / "svc-fail.yaml"
    failing.write_text(RESTART_CONFIG)
    service = ServiceProcess(
        failing,
        f"sqlite+aiosqlite:///{service_dir / 'restart.db'}",
        ray_address,
        service_dir / "restart.log",
        BATON_INSTANCE_ID="restart-test",
    )
    service.start()
    try:
        run = (await submit(service.url, {"task": "wait", "agent": "dozer"})).json()
        async for _, kind, _ in follow(service.url, run["id"]):
            if kind == "tool_started":
                break
        service.kill()
        service.start()
        async with httpx.AsyncClient(base_url=service.url) as client:
            stored = (await client.get(f"/v1/runs/{run['id']}")).json()
            listed = (await client.get("/v1/runs", params={"status": "interrupted"})).json()
        assert stored["status"] == "interrupted"
        assert stored["error"] == "the service restarted while the run was in flight"
        assert stored["links"]["resume"] == f"/v1/runs/{run['id']}/resume"  # it may resume
        assert [r["id"] for r in listed["runs"]] == [run["id"]]
        events = await all_events(service.url, run["id"])
        assert events[-1][1] == "run_finished" and events[-1][2]["status"] == "interrupted"
        # Its trace keeps what the agent had sent and what was open when the service died.
        async with httpx.AsyncClient(base_url=service.url) as client:
            trace = (await client.get(f"/v1/runs/{run['id']}/trace")).json()
        root = trace["spans"][0]
        assert (root["name"], root["status"]) == ("invoke_workflow baton", "ERROR")
        agent = root["children"][0]
        assert agent["name"] == "invoke_agent dozer" and agent["end_ns"] is not None
        # (The detached agent may have gone on meanwhile: what it sent by then is there too.)
        steps = [c["name"] for c in agent["children"]]
        assert steps[:2] == ["chat scripted", "execute_tool slow_step"], steps
        # And the restarted service works.
        fresh = (await submit(service.url, {"task": "calculate 2 * 5", "agent": "analyst"})).json()
        assert (await all_events(service.url, fresh["id"]))[-1][2]["status"] == "succeeded"
    finally:
        service.stop()


def test_baton_run_leaves_no_process_behind(tmp_path: Path) -> None:
    (tmp_path / "one.yaml").write_text("agents:\n  - {name: solo, description: answers}\n")
    mark = f"baton-test-{os.getpid()}-{tmp_path.name}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # Ray of its own
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "hello", "--config", "one.yaml"],
        cwd=tmp_path,
        env={**env, "BATON_STORE_URL": f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}",
             "BATON_TEST_MARK": mark},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "solo" in done.stderr and "direct" in done.stdout  # progress apart from the answer

    # Every process it started (its local Ray's included) inherited the mark, and is gone.
    marked = marked_processes(mark)
    _, alive = psutil.wait_procs(list(marked), timeout=30)
    assert alive == [], [(p.pid, marked[p]) for p in alive]
