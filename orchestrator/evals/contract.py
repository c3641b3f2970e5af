"""Interaction contracts: who must (or must not) ask whom, in what order, how deep.

A contract is a list of sentences, each one rule checked against a run's delegation tree:

    coordinator asks researcher               at least once
    coordinator asks researcher before analyst   its first request to one precedes the other
    coordinator never asks writer
    fact_checker is asked at least 2 times    (also: at most N times, exactly N times)
    nobody asks writer                        (also: writer is never asked)
    at most 2 levels deep                     the entry agent is level 1

Anything else is refused when the dataset is read, with the sentences that are understood.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from orchestrator.schemas.runs import DelegationNode

__all__ = ["Interactions", "Rule", "parse_rule"]

_NAME = r"([A-Za-z][A-Za-z0-9_-]*)"
_FORMS = (
    "A asks B",
    "A asks B before C",
    "A never asks B",
    "A is asked at least|at most|exactly N times",
    "A is never asked",
    "nobody asks A",
    "at most N levels deep",
)


@dataclass(frozen=True)
class Interactions:
    """A run's delegations as contracts read them: who asked whom, in the order asked."""

    asks: tuple[tuple[str, str], ...]  # (caller, callee), by when each call started
    depth: int  # levels of the tree (the entry agent alone: 1)

    @classmethod
    def of(cls, tree: DelegationNode | None) -> Interactions:
        """The interactions of a delegation tree (None: a run that never reached an agent)."""
        if tree is None:
            return cls((), 0)
        calls: list[tuple[float, str, str]] = []

        def walk(node: DelegationNode, level: int) -> int:
            deepest = level
            for child in node.children:
                calls.append((child.started_at, node.agent, child.agent))
                deepest = max(deepest, walk(child, level + 1))
            return deepest

        depth = walk(tree, 1)
        return cls(tuple((a, b) for _, a, b in sorted(calls, key=lambda c: c[0])), depth)

    def asked(self, callee: str) -> int:
        """How often `callee` was asked, by anyone."""
        return sum(1 for _, b in self.asks if b == callee)


@dataclass(frozen=True)
class Rule:
    """One sentence of a contract, understood."""

    text: str
    kind: str
    names: tuple[str, ...] = ()
    count: int = 0
    bound: str = ""  # at least, at most, exactly

    def broken(self, seen: Interactions) -> str | None:
        """How the run broke the rule (None: it holds)."""
        asks = Counter(seen.asks)
        if self.kind == "asks":
            a, b = self.names
            return None if asks[(a, b)] else f"{a} never asked {b}"
        if self.kind == "before":
            a, b, c = self.names
            order = [callee for caller, callee in seen.asks if caller == a]
            if b not in order:
                return f"{a} never asked {b}"
            if c not in order:
                return f"{a} never asked {c}"
            if order.index(b) > order.index(c):
                return f"{a} asked {c} before {b}"
            return None
        if self.kind == "never_asks":
            a, b = self.names
            return f"{a} asked {b} {asks[(a, b)]} times" if asks[(a, b)] else None
        if self.kind == "never_asked":
            (a,) = self.names
            n = seen.asked(a)
            return f"{a} was asked {n} times" if n else None
        if self.kind == "asked":
            (a,) = self.names
            n = seen.asked(a)
            ok = {
                "at least": n >= self.count,
                "at most": n <= self.count,
                "exactly": n == self.count,
            }
            return None if ok[self.bound] else f"{a} was asked {n} times"
        if self.kind == "depth":
            return None if seen.depth <= self.count else f"the run went {seen.depth} levels deep"
        raise AssertionError(self.kind)


def _times(word: str) -> int:
    return {"once": 1, "twice": 2}.get(word) or int(word)


def parse_rule(text: str) -> Rule:
    """The rule a sentence states (ValueError naming the sentences understood, if none)."""
    said = " ".join(text.split())
    patterns: list[tuple[str, str]] = [
        (rf"^(?:nobody asks {_NAME}|{_NAME} is never asked)$", "never_asked"),
        (rf"^{_NAME} asks {_NAME} before {_NAME}$", "before"),
        (rf"^{_NAME} never asks {_NAME}$", "never_asks"),
        (rf"^{_NAME} asks {_NAME}$", "asks"),
        (rf"^{_NAME} is asked (at least|at most|exactly) (once|twice|\d+)(?: times)?$", "asked"),
        (r"^at most (\d+) levels? deep$", "depth"),
    ]
    for pattern, kind in patterns:
        match = re.match(pattern, said)
        if match is None:
            continue
        groups = [g for g in match.groups() if g is not None]
        if kind == "asked":
            return Rule(said, kind, (groups[0],), _times(groups[2]), groups[1])
        if kind == "depth":
            return Rule(said, kind, count=int(groups[0]))
        return Rule(said, kind, tuple(groups))
    raise ValueError(f"not a contract sentence: {said!r}; say one of: {'; '.join(_FORMS)}")
