"""Evaluations recorded on the trace of the run they judged (`baton eval`'s verdicts).

Kept with the run's spans in the store (so the run's trace page shows them) and sent to the OTLP
backend like the run's own spans were.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.engine import Engine
from orchestrator.store import RunStore
from orchestrator.system import AgentSystem
from tracing import attributes as attr
from tracing.evaluations import EvaluationResult, evaluation_spans

__all__ = ["RunEvaluations"]


class RunEvaluations:
    """Adds evaluations to finished runs' traces."""

    def __init__(self, system: AgentSystem, engine: Engine, store: RunStore) -> None:
        self._explain = system.config.tracing.capture_content
        self._engine = engine
        self._store = store

    async def record(
        self,
        run_id: str,
        *,
        dataset: str,
        case: str,
        outcome: str,
        results: Sequence[EvaluationResult],
    ) -> str | None:
        """Add one evaluation of the run (seen by its caller) to its trace.

        Returns the evaluation span's id; None when the run has no trace (its tracing is off).
        """
        spans = await self._store.spans(run_id)
        roots = [s for s in spans if s["name"] == attr.WORKFLOW_SPAN]
        if not roots:
            return None
        made = evaluation_spans(
            roots[0],
            dataset=dataset,
            case=case,
            outcome=outcome,
            results=results,
            redact=self._engine.redactor,
            explain=self._explain,
        )
        await self._store.add_spans(run_id, made)
        self._engine.export_spans(made)
        return made[0]["span_id"]
