"""Evaluations: datasets of cases run through a team, each run checked against expectations.

Answers, schemas, callables, ceilings, the agents and tools involved, interaction contracts.
"""

from orchestrator.evals.contract import Interactions, Rule, parse_rule
from orchestrator.evals.dataset import Case, Dataset, Expect, LoadedCase, load_dataset
from orchestrator.evals.junit import write_junit
from orchestrator.evals.runner import CaseResult, Door, ServerDoor, ServiceDoor, evaluate
from orchestrator.evals.scoring import Observed, Verdict, score

__all__ = [
    "Case",
    "CaseResult",
    "Dataset",
    "Door",
    "Expect",
    "Interactions",
    "LoadedCase",
    "Observed",
    "Rule",
    "ServerDoor",
    "ServiceDoor",
    "Verdict",
    "evaluate",
    "load_dataset",
    "parse_rule",
    "score",
    "write_junit",
]
