"""A case's run against its expectations: one verdict per expectation given."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field, replace

import jsonschema
from pydantic import ValidationError

from agents.core.messages import RunStatus
from orchestrator.evals.contract import Interactions
from orchestrator.evals.dataset import LoadedCase, json_answer
from orchestrator.schemas.runs import DelegationNode
from tracing.evaluations import JudgeCall

__all__ = ["Observed", "Verdict", "diagram_difference", "score"]


@dataclass
class Observed:
    """What a case's run did, as the expectations read it."""

    run_id: str
    status: RunStatus
    output: str | None
    error: str | None
    tokens: int
    cost_usd: float
    duration_s: float
    tree: DelegationNode | None
    tools: list[tuple[str, str]] = field(default_factory=list)  # (agent, tool), in call order
    diagram: str | None = None  # comparable; fetched only for a case that expects one
    # The agents of the model calls made live (a replayed run takes the others from its record).
    live_calls: list[str] = field(default_factory=list)

    @property
    def agents(self) -> set[str]:
        """The agents that worked on the run."""
        found: set[str] = set()
        stack = [self.tree] if self.tree is not None else []
        while stack:
            node = stack.pop()
            found.add(node.agent)
            stack += node.children
        return found


@dataclass(frozen=True)
class Verdict:
    """One expectation's outcome: passed, failed (`detail` says how), or an error.

    An error: it could not be checked (a check that raised, a judge that failed). `score`: a
    judge's (0 to 1), with its call (`judge`) and its reasoning (`detail`, kept when it passed).
    """

    name: str
    passed: bool
    detail: str = ""
    error: bool = False
    score: float | None = None
    judge: JudgeCall | None = None


def score(loaded: LoadedCase, run: Observed) -> list[Verdict]:
    """Every expectation of the case, checked against its run (a passed one says no more)."""
    expect = loaded.case.expect
    detail = f"{run.status.value}: {run.error or ''}".rstrip(": ")
    verdicts = [Verdict("status", run.status == expect.status, detail)]
    verdicts += _answer(loaded, run)
    if loaded.check is not None:
        verdicts.append(_checked(loaded, run))
    verdicts += _limits(loaded, run) + _interactions(loaded, run)
    return [v if not v.passed else replace(v, detail="") for v in verdicts]


def _answer(loaded: LoadedCase, run: Observed) -> list[Verdict]:
    """The answer's text, its JSON and its model."""
    expect, out, verdicts = loaded.case.expect, run.output or "", []
    if expect.answer is not None:
        a = expect.answer
        if a.equals is not None:
            ok, wanted = out.strip() == a.equals.strip(), f"equal to {_quote(a.equals)}"
        elif a.contains is not None:
            ok, wanted = a.contains in out, f"containing {_quote(a.contains)}"
        else:
            ok = re.search(a.regex or "", out) is not None
            wanted = f"matching /{a.regex}/"
        said = _quote(out) if out else "no answer"
        verdicts.append(Verdict("answer", ok, f"expected an answer {wanted}; got {said}"))
    if expect.json_schema is not None:
        try:
            jsonschema.validate(json_answer(out), expect.json_schema)
            verdicts.append(Verdict("json_schema", True))
        except (ValueError, jsonschema.ValidationError) as exc:
            verdicts.append(Verdict("json_schema", False, getattr(exc, "message", str(exc))))
    if loaded.model is not None:
        try:
            loaded.model.model_validate_json(out)
            verdicts.append(Verdict("model", True))
        except ValidationError as exc:
            verdicts.append(Verdict("model", False, str(exc.errors()[0]["msg"])))
    return verdicts


def _limits(loaded: LoadedCase, run: Observed) -> list[Verdict]:
    """Cost, latency and tokens under their ceilings."""
    expect, verdicts = loaded.case.expect, []
    if expect.max_cost_usd is not None:
        ok = run.cost_usd <= expect.max_cost_usd
        verdicts.append(Verdict("max_cost_usd", ok, f"${run.cost_usd:.4f}"))
    if expect.max_latency_s is not None:
        ok = run.duration_s <= expect.max_latency_s
        verdicts.append(Verdict("max_latency_s", ok, f"{run.duration_s:.2f}s"))
    if expect.max_tokens is not None:
        verdicts.append(Verdict("max_tokens", run.tokens <= expect.max_tokens, f"{run.tokens}"))
    return verdicts


def _interactions(loaded: LoadedCase, run: Observed) -> list[Verdict]:
    """Agents involved, tools called, the contract's rules, the diagram."""
    expect, verdicts = loaded.case.expect, []
    involved = run.agents
    for name in expect.agents.involved:
        verdicts.append(Verdict(f"involves {name}", name in involved, "not involved"))
    for name in expect.agents.not_involved:
        verdicts.append(Verdict(f"not {name}", name not in involved, "involved"))
    called = {tool for _, tool in run.tools}
    for name in expect.tools.called:
        verdicts.append(Verdict(f"calls {name}", name in called, "not called"))
    for name in expect.tools.not_called:
        verdicts.append(Verdict(f"never {name}", name not in called, "called"))
    seen = Interactions.of(run.tree)
    for rule in loaded.rules:
        broken = rule.broken(seen)
        verdicts.append(Verdict(rule.text, broken is None, broken or ""))
    if loaded.diagram is not None:
        difference = diagram_difference(loaded.diagram, run.diagram or "")
        verdicts.append(Verdict("diagram", difference is None, difference or ""))
    return verdicts


def _checked(loaded: LoadedCase, run: Observed) -> Verdict:
    """A callable's verdict: True/None passes, False fails, a string fails saying it."""
    assert loaded.check is not None
    name = loaded.case.expect.check or "check"
    try:
        said = loaded.check(run.output or "", run)
        if inspect.isawaitable(said):
            raise TypeError("a check must be a plain function, not a coroutine")
    except Exception as exc:
        return Verdict(name, False, f"{type(exc).__name__}: {exc}", error=True)
    if said is None or said is True:
        return Verdict(name, True)
    return Verdict(name, False, said if isinstance(said, str) else "returned false")


# Token counts in a diagram's labels ("56/18 tok", "181/38 tokens"): a prompt's change changes
# them, not the interaction a diagram expectation is about.
_TOKENS = re.compile(r"(?: · )?\d+/\d+ tok(?:ens)?")


def diagram_difference(expected: str, actual: str) -> str | None:
    """The two diagrams side by side from their first differing line, marked (None: equal).

    Token counts are not compared: every arrow, its order and its label, and every note are.
    """
    want = [_TOKENS.sub("", line) for line in expected.strip().splitlines()]
    got = [_TOKENS.sub("", line) for line in actual.strip().splitlines()]
    if want == got:
        return None
    first = next(
        (i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b),
        min(len(want), len(got)),
    )
    width = max((len(line) for line in want[max(first - 2, 0) : first + 4]), default=8)
    rows = [f"line {first + 1} differs (expected | this run):"]
    for i in range(max(first - 2, 0), min(max(len(want), len(got)), first + 4)):
        a = want[i] if i < len(want) else ""
        b = got[i] if i < len(got) else ""
        mark = ">>" if i == first else "  "
        rows.append(f"{mark} {a.strip():<{width}} | {b.strip()}")
    return "\n".join(rows)


def _quote(text: str, limit: int = 120) -> str:
    """The text on one line, quoted, cut at `limit` characters."""
    text = " ".join(text.split())
    return repr(text[:limit] + ("…" if len(text) > limit else ""))
