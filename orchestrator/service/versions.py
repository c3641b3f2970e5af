"""The versions of the team a service runs: the newest takes new runs, older ones finish theirs.

A new version (`RunService.roll`) starts its agents beside the running ones and shares their
ledger, so that a run's events, approvals and step log are found wherever it runs. A run keeps
the version it started on until it ends (waiting for a person, or resumed, included); an older
version whose runs have all ended is retired: its agents are stopped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents.core.errors import describe_error
from agents.ray.ledger_client import LedgerClient
from orchestrator.engine import Engine
from orchestrator.errors import VersionNotRunning, VersionRefused
from orchestrator.system import AgentSystem

__all__ = ["RunningVersion", "Versions"]

logger = logging.getLogger(__name__)


@dataclass
class RunningVersion:
    """One version of the team running here, and the runs it holds."""

    engine: Engine
    public_config: dict[str, Any]
    started_at: float = field(default_factory=time.time)
    runs: set[str] = field(default_factory=set)

    @property
    def system(self) -> AgentSystem:
        """The version's team."""
        return self.engine.system

    @property
    def version(self) -> str:
        """Its version (`AgentSystem.version`)."""
        return self.engine.system.version


class Versions:
    """The engines of the versions a service runs, and which runs each holds.

    Args:
        engine: the first version's engine (the service starts it).
        make_engine: an engine for another version of the team, as this service makes them
            (its actors' options, its trace export); None: this service takes no new version.
    """

    def __init__(
        self, engine: Engine, make_engine: Callable[[AgentSystem], Engine] | None = None
    ) -> None:
        self._make_engine = make_engine
        self._running: dict[str, RunningVersion] = {}
        self._current = self._add(engine)
        self._retiring: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()  # one new version at a time

    def _add(self, engine: Engine) -> RunningVersion:
        running = RunningVersion(engine, engine.system.public_config(engine.redactor))
        self._running[running.version] = running
        return running

    @property
    def current(self) -> RunningVersion:
        """The newest version: new runs go to it."""
        return self._current

    @property
    def engine(self) -> Engine:
        """The newest version's engine."""
        return self._current.engine

    @property
    def ledger(self) -> LedgerClient:
        """The ledger every version's runs share (once the first version started)."""
        return self._current.engine.ledger

    @property
    def rolls(self) -> bool:
        """Whether this service can take a new version."""
        return self._make_engine is not None

    def running(self) -> list[RunningVersion]:
        """The versions running here, oldest first."""
        return sorted(self._running.values(), key=lambda v: v.started_at)

    def names(self) -> list[str]:
        """The names of the versions running here."""
        return list(self._running)

    def get(self, version: str | None) -> RunningVersion:
        """A version running here (None: the newest).

        Raises:
            VersionNotRunning: no version of that name runs here.
        """
        if version is None:
            return self._current
        found = self._running.get(version)
        if found is None:
            raise VersionNotRunning(version, sorted(self._running))
        return found

    def hold(self, run_id: str, version: str | None = None) -> RunningVersion:
        """The version a run executes on, held until `release`: its own if it runs here.

        A run of a version no longer running here (the service restarted with another
        config) goes on with the newest, from its step log.
        """
        running = self._running.get(version or "") or self._current
        if version is not None and running.version != version:
            logger.warning(
                "run %s began on version %s, which does not run here: it goes on with %s",
                run_id,
                version,
                running.version,
            )
        running.runs.add(run_id)
        return running

    def of_run(self, run_id: str) -> RunningVersion | None:
        """The version a run executing here holds (None: none does)."""
        return next((v for v in self._running.values() if run_id in v.runs), None)

    def release(self, run_id: str) -> None:
        """The run ended here: an older version that holds no run any more is retired."""
        running = self.of_run(run_id)
        if running is not None:
            running.runs.discard(run_id)
            self._retire_idle()

    async def roll(self, system: AgentSystem) -> tuple[RunningVersion, RunningVersion | None]:
        """Start `system` beside the running versions; new runs go to it from then on.

        Returns the version now current and the one it replaced (None: `system` is the
        version already current, and nothing changed). The version before keeps its runs
        until they end, then is retired.

        Raises:
            VersionRefused: this service takes no new version, `system` is another team, or
                its agents did not start (the current version still serves).
        """
        if self._make_engine is None:
            raise VersionRefused("this service takes no new version of its team")
        name = self._current.system.config.name
        if system.config.name != name:
            raise VersionRefused(
                f"the config is the team {system.config.name!r}; this service runs {name!r} "
                "(another team is another service)",
                name=system.config.name,
            )
        async with self._lock:
            if system.version == self._current.version:
                return self._current, None
            before = self._current
            known = self._running.get(system.version)
            if known is None:  # (a version still finishing its runs is taken back as it is)
                engine = self._make_engine(system)
                try:
                    await asyncio.to_thread(engine.start, self.ledger)
                except Exception as exc:
                    await asyncio.to_thread(engine.retire)  # what did start
                    raise VersionRefused(
                        f"the agents of version {system.version} did not start: "
                        f"{describe_error(exc)}; {before.version} still serves",
                        version=system.version,
                    ) from exc
                known = self._add(engine)
            self._current = known
            logger.info("version %s takes new runs (was %s)", known.version, before.version)
            self._retire_idle()
            return known, before

    async def close(self) -> None:
        """Wait for versions being retired (the service is stopping)."""
        if self._retiring:
            await asyncio.gather(*self._retiring, return_exceptions=True)

    def _retire_idle(self) -> None:
        for running in list(self._running.values()):
            if running is not self._current and not running.runs:
                del self._running[running.version]
                task = asyncio.get_running_loop().create_task(self._retire(running))
                self._retiring.add(task)
                task.add_done_callback(self._retiring.discard)

    async def _retire(self, running: RunningVersion) -> None:
        try:
            await asyncio.to_thread(running.engine.retire)
            logger.info("version %s retired: its runs have ended", running.version)
        except Exception:
            logger.exception("stopping the agents of version %s failed", running.version)
