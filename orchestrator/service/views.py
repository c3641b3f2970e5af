"""What the run service shows besides run records: traces, diagrams, placement, health."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agents.core.errors import describe_error
from orchestrator.errors import NotReady
from orchestrator.service.live_trace import live_spans
from orchestrator.service.versions import Versions
from orchestrator.store import RunStore, StoredRun
from tracing import SpanRecord
from tracing.compare import differences
from tracing.sequence import Detail, Diagram, sequence_diagram

__all__ = ["RunViews"]


class RunViews:
    """A service's views of its runs: read from the store once a run is over, live before.

    Args:
        versions: the versions of the team running (their ledger has the runs in flight).
        store: the run store.
        ready: set once the agents (and so the ledger) are up.
        startup_error: why the agents did not start, if they did not.
    """

    def __init__(
        self,
        versions: Versions,
        store: RunStore,
        ready: asyncio.Event,
        startup_error: Callable[[], str | None],
    ) -> None:
        self.versions = versions
        self.store = store
        self._ready = ready
        self._startup_error = startup_error

    @property
    def ready(self) -> bool:
        """Whether the agents have started."""
        return self._ready.is_set()

    async def placement(self) -> list[dict[str, Any]]:
        """Each agent replica of the newest version, asked now (none before it started)."""
        engine = self.versions.engine
        return await engine.placement() if engine.started else []

    async def scaling(self) -> list[dict[str, Any]]:
        """The newest version's autoscaled hosts' scaling decisions of the last hour."""
        engine = self.versions.engine
        if not engine.started:
            return []
        return [dict(decision) for decision in await engine.pool.scaling()]

    async def spans(self, run: StoredRun) -> list[SpanRecord]:
        """The run's spans, finished or not.

        As stored once it is finished; while it goes on, those finished so far with the open ones
        rebuilt from its events (`orchestrator.service.live_trace`).
        """
        if not run.finished and self.ready:
            finished, events = await self.versions.ledger.snapshot(run.id)
            if events:
                return live_spans(finished, events)
        return await self.store.spans(run.id)

    async def diagram(
        self, run: StoredRun, detail: Detail = "agents", page: int = 1, comparable: bool = False
    ) -> Diagram:
        """The run as a Mermaid sequence diagram, from its spans (live while it goes on)."""
        spans = await self.spans(run)
        title = "Run" if comparable else f"Run {run.id[:12]}"
        return await asyncio.to_thread(
            sequence_diagram, spans, detail=detail, page=page, title=title, comparable=comparable
        )

    async def differences(self, run: StoredRun, other: StoredRun) -> list[str]:
        """Where `run`'s steps differ from `other`'s, in words (`tracing.compare`)."""
        mine, theirs = await asyncio.gather(self.spans(run), self.spans(other))
        return differences(theirs, mine)

    async def check(self) -> dict[str, str]:
        """What is (not) working: the agents on Ray and the store. Values are "ok" or why not."""
        status: dict[str, str] = {}
        try:
            startup_error = self._startup_error()
            if startup_error:
                raise NotReady(startup_error)
            if not self.ready:
                raise NotReady("the agents are starting")
            await self.versions.ledger.ping(2.0)
            status["ray"] = "ok"
        except Exception as exc:
            status["ray"] = describe_error(exc)
        try:
            async with asyncio.timeout(5):
                await self.store.ping()
            status["store"] = "ok"
        except Exception as exc:
            status["store"] = describe_error(exc)
        if status["ray"] == "ok":
            rows = await self.versions.engine.placement()
            # An agent host that is dead (killed, out of memory, its node lost) or restarting:
            # not ready, naming the agents it held. One that is only slow to answer is busy.
            down = sorted(
                {
                    f"{r['agent']} ({r['state'].removeprefix('unavailable: ')})"
                    for r in rows
                    if r["state"] != "alive" and "TimeoutError" not in r["state"]
                }
            )
            status["agents"] = "ok" if not down else "down: " + ", ".join(down)
            # MCP servers that failed, tools disabled: the agents work on without them.
            problems = sorted({p for r in rows for p in r.get("tool_problems", [])})
            status["tools"] = "ok" if not problems else "degraded: " + "; ".join(problems)
        return status
