"""Cases made from stored runs: what a run did becomes what a good run of its task does."""

from __future__ import annotations

from typing import Any

from agents.core.messages import RunStatus
from orchestrator.evals.contract import Interactions
from orchestrator.schemas.runs import DelegationNode
from orchestrator.store import StoredRun

__all__ = ["case_of"]


def case_of(run: StoredRun) -> dict[str, Any]:
    """A dataset case (as YAML writes it) of a stored run's task and what the run did.

    Its status; its answer (exactly: loosen it by hand to `contains` or `regex`); the agents that
    worked on it; who asked whom (each pair once) and how deep it went.
    """
    expect: dict[str, Any] = {"status": run.status.value}
    if run.status == RunStatus.SUCCEEDED and run.output:
        expect["answer"] = {"equals": run.output}
    tree = DelegationNode.model_validate(run.tree) if run.tree else None
    seen = Interactions.of(tree)
    if tree is not None:
        agents = sorted({tree.agent} | {callee for _, callee in seen.asks})
        expect["agents"] = {"involved": agents}
        asks = list(dict.fromkeys(f"{a} asks {b}" for a, b in seen.asks))
        expect["contract"] = [*asks, f"at most {seen.depth} levels deep"]
    case: dict[str, Any] = {"name": f"run {run.id[:12]}", "task": run.task}
    if run.entry_agent:
        case["agent"] = run.entry_agent
    return {**case, "expect": expect}
