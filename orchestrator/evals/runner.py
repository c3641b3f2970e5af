"""Running a dataset's cases through a team: here (an in-process run service) or on a server.

Cases run `concurrency` at a time, each `repeat` times; a case whose run could not be made or
followed is an `error` (with why), not a failure, and the others go on. A case of turns runs them
as a thread, each after the one before has ended. Each case's verdicts (a judge's included) are
then recorded on its run's trace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from agents.core.events import Event, ModelStarted, ToolStarted
from agents.core.messages import RunStatus
from agents.core.spec import ModelSpec
from orchestrator.engine.submission import Submission
from orchestrator.evals.dataset import Case, LoadedCase
from orchestrator.evals.scoring import Observed, Verdict, score
from orchestrator.schemas.runs import RunView, run_view
from tracing import attributes as attr
from tracing.evaluations import EvaluationResult
from tracing.sequence import sequence_diagram

if TYPE_CHECKING:
    from orchestrator.cli.client import BatonClient
    from orchestrator.evals.judge import Judge
    from orchestrator.service import RunService
    from orchestrator.store import StoredRun

__all__ = ["CaseResult", "Door", "ServerDoor", "ServiceDoor", "evaluate", "evaluation_results"]


class Door(Protocol):
    """Where a case's run is made and followed to its end."""

    async def run(self, case: Case, diagram: bool, replaying: str | None = None) -> Observed:
        """Run the case; `diagram`: fetch the run's comparable diagram too.

        `replaying`: a recorded run of the case, forked instead of a new run: its model and
        tool calls come from its record for as long as their requests are the same.
        """

    async def record(self, run_id: str, dataset: str, result: CaseResult) -> None:
        """Add the case's verdicts to its run's trace."""


@dataclass
class CaseResult:
    """One run of a case: what it did and its verdicts (`error`: it could not be run)."""

    case: Case
    repeat: int
    run: Observed | None = None
    verdicts: list[Verdict] = field(default_factory=list)
    error: str | None = None
    untraced: str | None = None  # why the verdicts could not be added to the run's trace

    @property
    def outcome(self) -> str:
        """`pass`, `fail` or `error` (the run, or a check, could not be made)."""
        if self.error is not None or any(v.error for v in self.verdicts):
            return "error"
        return "pass" if all(v.passed for v in self.verdicts) else "fail"

    @property
    def failed(self) -> list[Verdict]:
        """The verdicts that did not pass."""
        return [v for v in self.verdicts if not v.passed]


@dataclass
class _Seen:
    """What a run's events tell, as they come; and its trace, once it ended."""

    tools: list[tuple[str, str]] = field(default_factory=list)
    live_calls: list[str] = field(default_factory=list)

    def saw(self, event: Event) -> None:
        """Note what an event of the run tells."""
        if isinstance(event, ToolStarted):
            self.tools.append((event.agent, event.tool))
        elif isinstance(event, ModelStarted):  # (a call taken from the record has none)
            self.live_calls.append(event.agent)

    def traced(self, spans: Iterable[Mapping[str, Any]]) -> None:
        """The tools called, from the run's spans when it has them.

        A forked run's calls taken from its record have spans, not events.
        """
        by_id = {s["span_id"]: s for s in spans}
        calls = []
        for span in by_id.values():
            attributes = span.get("attributes") or {}
            if attributes.get(attr.GEN_AI_OPERATION_NAME) != attr.OP_EXECUTE_TOOL:
                continue
            parent, agent = by_id.get(span.get("parent_span_id") or ""), ""
            while parent is not None and not agent:
                agent = (parent.get("attributes") or {}).get(attr.GEN_AI_AGENT_NAME) or ""
                parent = by_id.get(parent.get("parent_span_id") or "")
            calls.append((span["start_ns"], agent, str(attributes.get(attr.GEN_AI_TOOL_NAME))))
        if calls:
            self.tools = [(agent, tool) for _, agent, tool in sorted(calls)]


def _flat(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spans of `GET /v1/runs/{id}/trace`'s trees, each once."""
    return [*nodes, *(span for node in nodes for span in _flat(node.get("children") or []))]


def _observed(view: RunView, seen: _Seen, diagram: str | None) -> Observed:
    usage = view.usage
    return Observed(
        run_id=view.id,
        status=view.status,
        output=view.output,
        error=view.error,
        tokens=usage.input_tokens + usage.output_tokens,
        cost_usd=usage.cost_usd,
        duration_s=view.duration_s or 0.0,
        tree=view.tree,
        tools=seen.tools,
        diagram=diagram,
        live_calls=seen.live_calls,
    )


@dataclass
class ServiceDoor:
    """Cases run by a run service in this process (the team's agents on Ray)."""

    service: RunService

    async def run(self, case: Case, diagram: bool, replaying: str | None = None) -> Observed:
        """Submit the case to the service (or fork its record) and follow its run to the end."""
        if replaying is not None:
            made = await self.service.durable.replay(replaying, fork=True)
        else:
            made = await self._turns(case)
        seen = _Seen()
        async for item in self.service.events.follow(made):
            if item is not None:
                seen.saw(item[1])
        ended = await self.service.get(made.id)
        view = run_view(ended)
        spans = await self.service.views.spans(ended)
        seen.traced(cast(list[Mapping[str, Any]], spans))
        text = sequence_diagram(spans, detail="full", comparable=True).text if diagram else None
        return _observed(view, seen, text)

    async def _turns(self, case: Case) -> StoredRun:
        """The case's run: of its task, or its last turn's (those before it ended first)."""
        from orchestrator.service.threads import NEW_THREAD

        asked = [
            Submission(task=t, agent=case.agent, deadline_s=case.deadline_s, input=case.input)
            for t in case.asked
        ]
        if len(asked) == 1:
            return (await self.service.submit(asked[0]))[0]
        thread = NEW_THREAD
        for n, turn in enumerate(asked, 1):
            made, _ = await self.service.threads.continue_or_start(thread, turn)
            thread = made.thread_id or thread
            if n < len(asked):
                async for _ in self.service.events.follow(made):
                    pass
                ended = await self.service.get(made.id)
                _turn_ended(n, ended.status, ended.error)
        return made

    async def record(self, run_id: str, dataset: str, result: CaseResult) -> None:
        """Add the case's verdicts to its run's trace."""
        await self.service.evaluations.record(
            run_id,
            dataset=dataset,
            case=result.case.name,
            outcome=result.outcome,
            results=evaluation_results(result.verdicts),
        )


@dataclass
class ServerDoor:
    """Cases run by a Baton service over HTTP."""

    client: BatonClient

    async def run(self, case: Case, diagram: bool, replaying: str | None = None) -> Observed:
        """Submit the case to the server (or fork its record) and follow its run to the end."""
        if replaying is not None:
            made = await self.client.replay(replaying, fork=True)
        else:
            made = await self._turns(case)
        seen = _Seen()
        async for event in self.client.events(made["id"]):
            seen.saw(event)
        view = RunView.model_validate(await self.client.get(made["id"]))
        seen.traced(_flat((await self.client.trace(made["id"]))["spans"]))
        text = None
        if diagram:
            text = await self.client.diagram(made["id"], detail="full", comparable="true")
        return _observed(view, seen, text)

    async def _turns(self, case: Case) -> dict[str, Any]:
        """The case's run: of its task, or its last turn's (those before it ended first)."""
        asked = case.asked
        extra = {"agent": case.agent, "deadline_s": case.deadline_s, "input": case.input}
        extra = {k: v for k, v in extra.items() if v is not None}
        if len(asked) == 1:
            return await self.client.submit({"task": asked[0], **extra})
        thread = "new"
        for n, task in enumerate(asked, 1):
            made = await self.client.submit({"task": task, **extra}, thread=thread)
            thread = made.get("thread_id") or thread
            if n < len(asked):
                async for _ in self.client.events(made["id"]):
                    pass
                ended = await self.client.get(made["id"])
                _turn_ended(n, RunStatus(ended["status"]), ended.get("error"))
        return made

    async def record(self, run_id: str, dataset: str, result: CaseResult) -> None:
        """Add the case's verdicts to its run's trace (`POST /v1/runs/{id}/evaluations`)."""
        body = {
            "dataset": dataset,
            "case": result.case.name,
            "outcome": result.outcome,
            "results": [
                {**vars(r), "judge": vars(r.judge) if r.judge else None}
                for r in evaluation_results(result.verdicts)
            ],
        }
        await self.client.add_evaluation(run_id, body)


def _turn_ended(n: int, status: RunStatus, error: str | None) -> None:
    """A turn before the last must have succeeded (RuntimeError saying how it ended)."""
    if status != RunStatus.SUCCEEDED:
        raise RuntimeError(f"turn {n} ended {status.value}: {error or ''}".rstrip(": "))


# What an evaluation result's explanation keeps (as an experiment keeps a verdict's detail).
_EXPLANATION_CHARS = 4000


def evaluation_results(verdicts: list[Verdict]) -> list[EvaluationResult]:
    """Verdicts as the GenAI conventions' evaluation results (a check's score is 1 or 0)."""
    return [
        EvaluationResult(
            name=v.name[:255],
            label="error" if v.error else "pass" if v.passed else "fail",
            score=v.score if v.score is not None else float(v.passed),
            explanation=v.detail[:_EXPLANATION_CHARS],
            judge=v.judge,
        )
        for v in verdicts
    ]


async def evaluate(
    cases: list[LoadedCase],
    door: Door,
    *,
    dataset: str = "dataset",
    judge: Judge | None = None,
    repeat: int = 1,
    concurrency: int = 4,
    done: Callable[[CaseResult], None] = lambda _: None,
    recorded: Mapping[tuple[str, int], str] | None = None,
) -> list[CaseResult]:
    """Every case `repeat` times, `concurrency` at once; results in the dataset's order.

    `judge`: asks rubrics' models (by default, the offline model).
    `recorded`: each case's (and repeat's) run to fork instead of making a new one (`--replay`);
    a case without one is an `error` saying so. Each run's verdicts go on its trace (`dataset`
    names it there); why they could not is the result's `untraced`.
    """
    gate = asyncio.Semaphore(concurrency)
    if judge is None and any(c.case.expect.rubric is not None for c in cases):
        from orchestrator.evals.judge import Judge  # (litellm: only to judge)

        judge = Judge(ModelSpec())

    async def one(loaded: LoadedCase, n: int) -> CaseResult:
        result = CaseResult(loaded.case, n)
        replaying = None
        if recorded is not None:
            replaying = recorded.get((loaded.case.name, n))
            if replaying is None:
                result.error = "the experiment replayed has no run of this case"
                done(result)
                return result
        async with gate:
            try:
                result.run = await door.run(loaded.case, loaded.diagram is not None, replaying)
            except Exception as exc:  # the case could not be run: said, the others go on
                result.error = f"{type(exc).__name__}: {exc}"
            if result.run is not None:
                result.verdicts = score(loaded, result.run)
                rubric = loaded.case.expect.rubric
                if rubric is not None and judge is not None:
                    answer = result.run.output or ""
                    judged = await judge.verdict(rubric, loaded.case.asked, answer)
                    result.verdicts.append(judged)
                # The verdicts stand even if their place in the run's trace is lost.
                try:
                    await door.record(result.run.run_id, dataset, result)
                except Exception as exc:
                    result.untraced = f"{type(exc).__name__}: {exc}"
        done(result)
        return result

    return list(await asyncio.gather(*(one(c, n) for c in cases for n in range(repeat))))
