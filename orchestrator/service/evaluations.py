"""Evaluations recorded on the trace of the run they judged (`baton eval`'s verdicts).

Kept with the run's spans in the store (so the run's trace page shows them) and sent to the OTLP
backend like the run's own spans were.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.service.versions import Versions
from orchestrator.store import RunStore
from tracing import attributes as attr
from tracing.evaluations import EvaluationResult, evaluation_spans

__all__ = ["RunEvaluations"]


class RunEvaluations:
    """Adds evaluations to finished runs' traces."""

    def __init__(self, versions: Versions, store: RunStore) -> None:
        self._versions = versions
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
        engine = self._versions.engine
        made = evaluation_spans(
            roots[0],
            dataset=dataset,
            case=case,
            outcome=outcome,
            results=results,
            redact=engine.redactor,
            explain=engine.system.config.tracing.capture_content,
        )
        await self._store.add_spans(run_id, made)
        engine.export_spans(made)
        return made[0]["span_id"]
