"""Small, real function tools used by the example configs.

Any importable function works as a tool; these exist so that the default team does something
useful offline. None has side effects, so all are declared idempotent (Baton may retry them).
"""

from __future__ import annotations

import ast
import operator
import statistics
from collections.abc import Callable
from datetime import UTC, datetime

from agents.tools.base import idempotent

__all__ = ["calculate", "describe_numbers", "lookup_note", "utc_now", "word_count"]

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_MAX_EXPONENT = 64


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value) if isinstance(node.value, float) else node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ValueError(f"exponent {right} is larger than {_MAX_EXPONENT}")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    raise ValueError(f"unsupported expression element: {ast.dump(node)[:40]}")


@idempotent
def calculate(expression: str) -> float:
    """Evaluate an arithmetic expression (+, -, *, /, //, %, ** and parentheses).

    Args:
        expression: for example "17 * 23 + 4".
    """
    return _evaluate(ast.parse(expression.strip(), mode="eval"))


@idempotent
def describe_numbers(numbers: list[float]) -> dict[str, float]:
    """Summary statistics of a list of numbers: count, mean, median, min, max.

    Args:
        numbers: the numbers to describe (at least one).
    """
    if not numbers:
        raise ValueError("numbers is empty")
    return {
        "count": len(numbers),
        "mean": statistics.fmean(numbers),
        "median": statistics.median(numbers),
        "min": min(numbers),
        "max": max(numbers),
    }


@idempotent
def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: the text whose words to count.
    """
    return len(text.split())


@idempotent
def utc_now() -> str:
    """The current date and time in UTC, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


_NOTES = {
    "ray": "Ray is an open-source framework for distributed Python, started at UC Berkeley's "
    "RISELab in 2017; it schedules tasks and stateful actors across a cluster.",
    "litellm": "LiteLLM gives one OpenAI-style interface to more than a hundred model providers.",
    "opentelemetry": "OpenTelemetry is the CNCF standard for traces, metrics and logs.",
    "mermaid": "Mermaid turns text definitions into diagrams such as sequence diagrams.",
}


@idempotent
def lookup_note(topic: str) -> str:
    """Look a topic up in the built-in knowledge notes (Ray, LiteLLM, OpenTelemetry, Mermaid).

    Args:
        topic: what to look up, in a few words.
    """
    lowered = topic.lower()
    found = [note for key, note in _NOTES.items() if key in lowered]
    return " ".join(found) if found else f"no note matches {topic!r}"
