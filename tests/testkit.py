"""Helpers for tests: tools with observable timing, and config builders."""

from __future__ import annotations

import asyncio
import os
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.ray.pool import PoolOptions
from agents.tools import ToolContext
from orchestrator.system.config import AgentSystem, parse_config

if TYPE_CHECKING:
    from agents.core.events import Event
    from agents.core.messages import AgentResult
    from orchestrator.engine import Engine

__all__ = [
    "EventList",
    "OtlpReceiver",
    "answer_as_cancelled",
    "block_loop",
    "causal_breaks",
    "config",
    "count_parcels",
    "fail_loudly",
    "flaky",
    "leak_env",
    "local_trace",
    "node",
    "send_once",
    "slow_step",
    "slow_touch",
    "stamp",
    "tally",
    "until_written",
    "victims",
    "wait_for_event",
    "warn_drivers",
]

# What `answer_as_cancelled` cancels as it answers (an in-process test puts its tasks here).
victims: list[asyncio.Future[object]] = []


async def slow_step(seconds: float) -> str:
    """Wait for the given number of seconds, then report when the wait started and ended."""
    start = time.time()
    await asyncio.sleep(seconds)
    return f"{start:.6f}-{time.time():.6f}"


def tally(ctx: ToolContext) -> str:
    """Add one to the tally in the run's shared state (its reducer adds); say what it was."""
    was = ctx.state.get("tally", 0)
    ctx.state.set("tally", 1)
    return f"tally was {was}"


def stamp(text: str) -> str:
    """Report the current time (a cheap tool a scripted model can call over and over)."""
    return f"{text} at {time.time():.6f}"


def config(yaml_text: str) -> AgentSystem:
    return parse_config(textwrap.dedent(yaml_text), "test.yaml")


def start(engines: list[Engine], yaml_text: str, detached: bool = False) -> Engine:
    """Start the agents of a system on the session's Ray; the `started` fixture stops them.

    `detached`: the actors outlive the driver, as `baton serve`'s do.
    """
    from orchestrator.engine.lifecycle import Engine  # Ray: not for the tool functions' importers

    engine = Engine(config(yaml_text), PoolOptions(namespace="baton-tests", detached=detached))
    engine.start()
    engines.append(engine)
    return engine


async def slow_touch(path: str, seconds: float) -> str:
    """Wait, then create the file at `path`; cancelled, create `path` with the suffix
    `.cancelled` instead (so a test can tell whether, and when, the wait was cut short).

    `path` with the suffix `.started` is created as the wait begins: the `tool_started` event
    comes before the tool's body runs (a cancellation in between stops the call before it
    starts, and neither file is written).
    """
    Path(path).with_suffix(".started").write_text("started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        # Written at once: a second await here could itself be cancelled.
        Path(path).with_suffix(".cancelled").write_text("cancelled")
        raise
    await asyncio.to_thread(Path(path).write_text, "finished")
    return "touched"


async def answer_as_cancelled() -> str:
    """Answer, and cancel the tasks in `victims` as it does: a run cancelled just as its tool
    ends, both in the same turn of the event loop."""
    for victim in victims:
        victim.cancel()
    return "answered"


async def until_written(path: Path, failure: str, timeout_s: float = 30) -> None:
    """Wait (bounded) until a tool has written `path`: nothing else tells a test that it did."""
    deadline = time.monotonic() + timeout_s
    while not await asyncio.to_thread(path.exists):
        assert time.monotonic() < deadline, failure
        await asyncio.sleep(0.01)


def node(tree: AgentResult, *path: str) -> AgentResult:
    """The invocation down `path` (agent names) from `tree`."""
    for name in path:
        tree = next(c for c in tree.children if c.agent == name)
    return tree


async def wait_for_event(
    engine: Engine, run_id: str, kind: str, agent: str, timeout_s: float = 30
) -> None:
    """Wait (bounded) until `agent` emits `kind` in the run: the ledger answers as soon as there
    is news (or after 1 s)."""
    seen = 0
    deadline = time.monotonic() + timeout_s
    while True:
        events, _ = await engine.ledger.events(run_id, seen, wait_s=1.0)
        if any(e.type == kind and e.agent == agent for _, e in events):
            return
        seen += len(events)
        assert time.monotonic() < deadline, f"{agent} never emitted {kind} in run {run_id}"


async def block_loop(seconds: float) -> str:
    """Misbehave: block the actor's event loop, so that nothing in that actor can time out."""
    time.sleep(seconds)  # noqa: ASYNC251 (the point of this tool)
    return "unblocked"


async def slow_ledger_mail(seconds: float) -> str:
    """Misbehave: this process's batches of events and spans reach the ledger `seconds` late
    from now on (as over a congested link), after the results they come before."""
    from agents.ray.outbox import Outbox

    send = Outbox._send
    loop = asyncio.get_running_loop()
    Outbox._send = lambda self: loop.call_later(seconds, send, self)  # type: ignore[method-assign]
    return "slowed"


def fail_loudly(reason: str) -> str:
    """Always fail, saying why (a tool whose error a test can look for)."""
    raise ValueError(f"cannot comply: {reason}")


def warn_drivers(message: str) -> str:
    """Broadcast a warning to every Ray driver of the cluster, as the raylet does when it starts
    many worker processes."""
    import ray
    from ray._private.utils import publish_error_to_driver

    publish_error_to_driver("baton_test", message, ray._private.worker.global_worker.gcs_client)
    return "warned"


def leak_env(name: str) -> str:
    """Misbehave: fail with the value of an environment variable in the error message."""
    raise RuntimeError(f"connection refused with credentials {os.environ.get(name, '?')}")


class OtlpReceiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1 that decodes what exporters send it.

    `delay_s`: how long each request takes to answer (a slow backend). On `port` (a free one
    by default): `close` and a new receiver on the same port stand for a backend that goes
    down and comes back.
    """

    def __init__(self, port: int = 0, delay_s: float = 0.0) -> None:
        import gzip
        import http.server
        import threading

        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        self.spans: list[dict[str, object]] = []
        self.requests = 0
        received = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                time.sleep(delay_s)
                received.take(request)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self._lock = threading.Lock()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The traces endpoint (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)."""
        return f"{self.endpoint}/v1/traces"

    def of(self, trace_id: str) -> set[str]:
        """The ids of the spans of a trace received so far."""
        with self._lock:
            return {str(s["span_id"]) for s in self.spans if s["trace_id"] == trace_id}

    def take(self, request: object) -> None:
        with self._lock:
            self._take(request)

    def _take(self, request: object) -> None:
        from google.protobuf.json_format import MessageToDict

        self.requests += 1
        for resource_spans in request.resource_spans:  # type: ignore[attr-defined]
            resource = {
                a["key"]: next(iter(a["value"].values()))
                for a in MessageToDict(resource_spans.resource).get("attributes", [])
            }
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    encoded = MessageToDict(span).get("attributes", [])
                    attributes = {a["key"]: next(iter(a["value"].values()), None) for a in encoded}
                    # OTLP's value kinds: stringValue, intValue, arrayValue, ...
                    types = {a["key"]: next(iter(a["value"]), None) for a in encoded}
                    self.spans.append(
                        {
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex() or None,
                            "name": span.name,
                            "status": span.status.code,
                            "kind": span.kind,
                            "attributes": attributes,
                            "types": types,
                            "events": [e.name for e in span.events],
                            "event_attributes": [
                                {
                                    a["key"]: next(iter(a["value"].values()), None)
                                    for a in MessageToDict(e).get("attributes", [])
                                }
                                for e in span.events
                            ],
                            "resource": resource,
                            "scope": scope_spans.scope.name,
                        }
                    )

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def causal_breaks(events: list[Event]) -> list[str]:
    """Where `events` (one run's, as a consumer got them) break causal order.

    An invocation's events in `seq` order; a delegated agent's start after its caller's
    `tool_started`; a delegation's `tool_finished` after the callee's `agent_finished`.
    """
    from agents.core.events import AgentFinished, AgentStarted, ToolFinished, ToolStarted

    breaks: list[str] = []
    last: dict[str, int] = {}
    calls: set[tuple[tuple[str, ...], str]] = set()
    begun: set[tuple[tuple[str, ...], str]] = set()
    ended: set[tuple[tuple[str, ...], str]] = set()
    for n, e in enumerate(events):
        where = f"#{n} {e.type} of {e.agent}"
        if e.invocation and e.seq:
            if e.seq <= last.get(e.invocation, 0):
                breaks.append(f"{where}: seq {e.seq} after {last[e.invocation]}")
            last[e.invocation] = e.seq
        if isinstance(e, ToolStarted):
            calls.add((tuple(e.chain), e.call_id))
        delegated = len(e.chain) > 1 and getattr(e, "call_id", None)
        if isinstance(e, AgentStarted) and delegated:
            call = (tuple(e.chain[:-1]), e.call_id or "")
            begun.add(call)
            if call not in calls:
                breaks.append(f"{where}: before its caller's tool_started")
        if isinstance(e, AgentFinished) and delegated:
            ended.add((tuple(e.chain[:-1]), e.call_id or ""))
        if isinstance(e, ToolFinished):
            call = (tuple(e.chain), e.call_id)
            if call in begun and call not in ended:
                breaks.append(f"{where}: before its callee finished")
    return breaks


class EventList:
    """An event sink that keeps every event, in order."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, run_id: str, event: Event) -> None:
        self.events.append(event)

    def keep_spans(self, run_id: str, spans: list[dict[str, object]]) -> None:
        pass

    def flush(self, run_id: str) -> None:
        pass


async def local_trace(
    yaml_text: str,
    task: str,
    entry: str | None = None,
    run_id: str = "local-run",
    events: EventList | None = None,
    given: Any = None,
) -> tuple[object, list[dict[str, object]]]:
    """Run a team in this process (no Ray) and return its result and the run's spans."""
    from agents.runtime.local import LocalTeam
    from tracing import configure_tracing, workflow_span

    system = config(yaml_text)
    agents = list(system.config.agents)
    team = LocalTeam(
        agents,
        {a.name: system.topology.delegates(a.name) for a in agents},
        system.config.tracing,
        events,  # type: ignore[arg-type]
        system.config.gates,
    )
    collector = configure_tracing("test")
    first = entry or system.entry
    with workflow_span(run_id, first, system.config.name) as root:
        limits = system.config.limits
        result = await team.run(
            task, first, run_id=run_id, limits=limits, given=given, state_spec=system.config.state
        )
    return result, collector.drain(root.get_span_context().trace_id)


async def send_once(path: str, seconds: float) -> str:
    """A side effect (a line added to a file), then a wait: must run at most once."""
    await asyncio.to_thread(_append, path, "sent\n")
    await asyncio.sleep(seconds)
    return "sent"


def flaky(path: str, idempotency_key: str) -> str:
    """Fail on the first try of each call; write down every try with its idempotency key."""
    seen = Path(path).read_text().splitlines() if Path(path).exists() else []
    _append(path, idempotency_key + "\n")
    if idempotency_key not in seen:
        raise ConnectionError("the service hiccuped")
    return "done"


def count_parcels(task: str) -> str:
    """Counts parcels (a side effect per call, written to $PARCELS_FILE): must run at most once."""
    path = os.environ["PARCELS_FILE"]
    _append(path, task + "\n")
    runs = sum(1 for line in Path(path).read_text().splitlines() if line == task)
    return f"parcels counted (call {runs} for this task)"


def _append(path: str, text: str) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(text)


def read_file(path: str) -> str:
    """A user tool whose name is taken by Baton's built-in file tools (config tests)."""
    return path


def recall(query: str) -> str:
    """A user tool whose name is an agent's built-in memory tool's (config tests)."""
    return query
