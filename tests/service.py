"""`baton serve` as a real subprocess on 127.0.0.1, for tests that talk HTTP to it (and a service
in the test's own process, whose store holds each run's start: `held_service`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import psutil

from agents.ray.pool import PoolOptions
from orchestrator.cli.client import parse_sse
from tests.ports import free_port

if TYPE_CHECKING:  # the in-process service's modules load only where it is used
    import pytest

    from orchestrator.engine import Engine
    from orchestrator.service import RunService

__all__ = [
    "APPROVAL_AGENTS",
    "CLERK",
    "KEYS",
    "PROFILER",
    "SERVICE_CONFIG",
    "STORY",
    "TELLER",
    "WORKFLOWS",
    "ServiceProcess",
    "all_events",
    "follow",
    "free_port",
    "held_service",
    "kill_everything",
    "marked_processes",
    "rss_mib",
    "submit",
]

# The API keys of the tests' guarded service (each its own rate budget; the third is A2A's).
KEYS = (
    "sk-baton-guarded-key-one-0001",
    "sk-baton-guarded-key-two-0002",
    "sk-baton-guarded-key-three-0003",
)

# An agent whose one tool call waits for approval.
CLERK = """
  - name: clerk
    description: Makes payments.
    tools: [{function: tests.testkit:stamp, confirm: true}]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: stamp, arguments: {text: payment 42 EUR}}]}
          - {content: clerk done}
"""

# Agents whose calls wait for approval (`clerk`'s tool, delegations to `vault`); `clerk` also
# names an MCP server that is not there (reported, not fatal).
APPROVAL_AGENTS = (
    """
  - name: lead
    description: Opens the vault.
    delegates: [clerk, vault]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: delegate_to_vault, arguments: {task: open it}}]}
          - {content: lead done}
"""
    + CLERK
    + """    mcp: [{name: gone, url: "http://127.0.0.1:9/mcp", connect_timeout_s: 1}]
  - name: vault
    description: Keeps the secrets.
    confirm: true
"""
)

# What `narrator` says once its tool is done: 40 words, streamed 50 ms apart (2 s).
STORY = " ".join(f"word{i:02}" for i in range(40))

NARRATOR = f"""
  - name: narrator
    description: Thinks for 3 s, then tells a story a word at a time (when the run streams).
    capabilities: [story]
    tools: [tests.testkit:slow_step]
    model:
      name: baton/scripted
      params:
        chunk_ms: 50
        replies:
          - {{tool_calls: [{{name: slow_step, arguments: {{seconds: 3}}}}]}}
          - {{content: "{STORY}"}}
"""

# A hand-off across actors (`refunds` runs in actors of its own) to an agent with a structured
# answer (its first answer is not JSON: it is sent back) and an input guardrail.
DESK = """
  - name: desk
    description: Takes refund requests and hands them over to refunds.
    handoffs: [refunds]
    model:
      name: baton/scripted
      params: {replies: [{tool_calls: [{name: transfer_to_refunds, arguments: {note: checked}}]}]}
  - name: refunds
    description: Decides refunds.
    ray: {isolate: true}
    output_schema:
      type: object
      properties: {approved: {type: boolean}, amount: {type: number}}
      required: [approved, amount]
    guardrails:
      input: [{name: no-threats, regex: "(?i)lawyer", message: a person takes this one}]
    model:
      name: baton/scripted
      params: {replies: [{content: "not json"}, {content: '{"approved": true, "amount": 42}'}]}
"""

# Answers by where it is in its conversation: a thread's third turn gets the third answer only
# if the turns before it reached the model.
PARROT = """
  - name: parrot
    description: Answers by the number of the turn.
    model:
      name: baton/scripted
      params:
        replies: [{content: first answer}, {content: second answer}, {content: third answer}]
"""

# Takes a minute, for runs that must still be in flight after steps (subscribing, following to
# a tool's start) that may outlast the sleeper's few seconds on a busy machine.
DOZER = """
  - name: dozer
    description: Waits a minute before answering.
    capabilities: [doze]
    tools: [tests.testkit:slow_step]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: slow_step, arguments: {seconds: 60}}]}
          - {content: rested}
"""

# Asks the person before it answers (`ask_user`): the offline model calls the tool when the task
# says to ask the user, and its answer lists what the person said.
TELLER = """
  - name: teller
    description: Pays from the account the person picks.
    ask_user: true
"""

# The notary (offline) has the scribe keep each note; the scribe remembers its own exchanges in a
# thread (`memory: thread`), and answers by how many it has had.
NOTARY = """
  - name: notary
    description: Has notes kept.
    delegates: [scribe]
  - name: scribe
    description: Keeps notes.
    memory: thread
    model:
      name: baton/scripted
      params: {replies: [{content: first note}, {content: second note}, {content: third note}]}
"""

# Workflows (`tests.flows`): `pipeline` takes typed input, has a card made and stamped (the
# clerk's call waits for approval); `fanout` has the sleeper take two naps at once; `profiler`
# takes and gives typed data.
# Takes a person's name and age; answers a card (offline: made from its output schema).
PROFILER = """
  - name: profiler
    description: Makes a profile card.
    input_schema:
      type: object
      properties: {name: {type: string}, age: {type: integer, minimum: 0}}
      required: [name, age]
    output_schema:
      type: object
      properties: {title: {type: string}, age: {type: integer}}
      required: [title, age]
"""

WORKFLOWS = (
    """
  - name: pipeline
    description: Has a card made for a person, then stamped.
    workflow: tests.flows:card_then_stamp
    delegates: [profiler, clerk]
    input_schema: {type: object, properties: {name: {type: string}}, required: [name]}
  - name: fanout
    description: Has two naps taken at once.
    workflow: tests.flows:two_naps_at_once
    delegates: [sleeper]
"""
    + PROFILER
)

# Keeps a tally in the run's shared state (added to, turn after turn, in a thread).
KEEPER = """
  - name: keeper
    description: Keeps a tally.
    tools: [tests.testkit:tally]
"""

# Offline agents; `sleeper` takes a few seconds, for cancelling and killing runs mid-way;
# `dozer` (above) a minute; `narrator` streams its answer slowly; `desk` hands over.
SERVICE_CONFIG = (
    """
name: svc
limits: {deadline_s: 60, approval_timeout_s: 15}
tracing: {capture_content: true}
state:
  schema:
    type: object
    properties: {tally: {type: integer}, note: {type: string}}
  reducers: {tally: add}
agents:
  - name: coordinator
    description: Plans the work and hands each part to the right specialist.
    capabilities: [planning]
    delegates: [analyst, sleeper]
  - name: analyst
    description: Does arithmetic.
    capabilities: [calculate, arithmetic]
    tools: [configs.tools:calculate]
  - name: sleeper
    description: Waits a long time before answering.
    capabilities: [wait, sleep]
    tools: [tests.testkit:slow_step]
    model:
      name: baton/scripted
      params:
        replies:
          - {tool_calls: [{name: slow_step, arguments: {seconds: 3}}]}
          - {content: rested}
"""
    + DOZER
    + NARRATOR
    + DESK
    + PARROT
    + TELLER
    + NOTARY
    + APPROVAL_AGENTS
    + WORKFLOWS
    + KEEPER
)


class ServiceProcess:
    """One `baton serve` process; its output goes to `log`."""

    def __init__(self, config: Path, store_url: str, ray_address: str, log: Path, **env: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = config
        self.log = log
        self._args = [
            sys.executable, "-m", "orchestrator", "serve",
            "--config", str(config), "--port", str(self.port),
        ]  # fmt: skip
        self._env = {
            **os.environ,
            "RAY_ADDRESS": ray_address,
            "BATON_STORE_URL": store_url,
            "BATON_NAMESPACE": "baton-tests",
            **env,
        }
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 180, headers: dict[str, str] | None = None) -> None:
        with self.log.open("ab") as out:
            # A process group of its own, as a terminal gives a command (a Ctrl-C reaches it all).
            self._process = subprocess.Popen(
                self._args,
                env=self._env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        # One client for every probe: each new one loads the CA bundle (~25 ms of CPU), and a
        # service takes seconds to start: that was 6% of the suite's CPU.
        with httpx.Client(headers=headers, timeout=2) as probe:
            while time.monotonic() < deadline:
                if self._process.poll() is not None:
                    raise RuntimeError(f"baton serve exited: {self.log.read_text()[-3000:]}")
                try:
                    if probe.get(f"{self.url}/readyz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
        raise TimeoutError(f"baton serve not ready: {self.log.read_text()[-3000:]}")

    @property
    def pid(self) -> int:
        """The service's process id."""
        assert self._process is not None
        return self._process.pid

    def signal(self, number: signal.Signals) -> None:
        """Send the service a signal."""
        assert self._process is not None
        self._process.send_signal(number)

    def kill(self) -> None:
        """Kill -9: no chance to record anything."""
        if self._process is not None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait(timeout=30)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def kill_everything(service: ServiceProcess, mark: str) -> None:
    """SIGKILL the service, its agents' hosts and its local Ray, as a lost machine would."""
    processes = marked_processes(mark)
    service.kill()
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(list(processes), timeout=60)


def marked_processes(mark: str) -> dict[psutil.Process, str]:
    """The processes that inherited the environment mark `mark` (`BATON_TEST_MARK`), with their
    names: a service's, and its local Ray's (in a session of its own, not among its children)."""
    found = {}
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.environ().get("BATON_TEST_MARK") == mark:
                found[process] = process.name()
    return found


def rss_mib(pid: int) -> float:
    """A process's resident memory in MiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


async def submit(url: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        return await client.post("/v1/runs", json=body, headers=headers)


async def follow(
    url: str, run_id: str, *, last_event_id: int | None = None, **headers: str
) -> AsyncIterator[tuple[int, str, dict[str, Any]]]:
    """The run's events (id, type, data) until the server ends the stream (bounded)."""
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    async with (
        httpx.AsyncClient(base_url=url, timeout=60) as client,
        client.stream("GET", f"/v1/runs/{run_id}/events", headers=headers) as response,
    ):
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        async for event in parse_sse(response.aiter_lines()):
            yield int(event.id or 0), event.event, event.json()


async def all_events(
    url: str, run_id: str, **options: Any
) -> list[tuple[int, str, dict[str, Any]]]:
    async def collect() -> list[tuple[int, str, dict[str, Any]]]:
        return [item async for item in follow(url, run_id, **options)]

    return await asyncio.wait_for(collect(), 60)


async def held_service(
    engine: Engine, folder: Path, owner: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[RunService, asyncio.Event, asyncio.Event]:
    """An in-process `RunService` of `engine`'s team whose store holds each run's start.

    Its SQLite store is in `folder`. Returns the service (started), an event set once a run's
    start is being recorded, and the event that lets the start be recorded. The team's actors
    are `engine`'s (found by name).
    """
    from orchestrator.engine import Engine
    from orchestrator.service import RunService
    from orchestrator.store import RunStore

    store = await RunStore.open(f"sqlite+aiosqlite:///{folder / 'runs.db'}")
    recording, release = asyncio.Event(), asyncio.Event()
    start = store.start

    async def held_start(run_id: str, version: str | None = None) -> None:
        recording.set()
        await release.wait()
        await start(run_id, version)

    monkeypatch.setattr(store, "start", held_start)
    own = Engine(engine.system, PoolOptions(namespace=engine.options.namespace))
    service = RunService(own, store, owner=owner)
    await service.start()
    return service, recording, release
