"""A dataset of cases: tasks for a team, and what a good run of each looks like.

Read from YAML (or JSON Lines: one case per line, the dataset named after the file) with every
mistake located (`file:line:column: error: field: message`) before
any run starts: an unknown agent, a regular expression or JSON Schema that does not compile, a
callable that cannot be imported, a contract sentence that is not understood, a diagram file
that is missing.

```yaml
name: support-smoke
cases:
  - name: adds
    task: what is 6 * 7?
    agent: coordinator                       # default: the config's entry agent
    input: {customer: 42}                    # structured input (its input_schema's)
    expect:
      status: succeeded                      # the default
      answer: {contains: "42"}               # or {equals: ...}, {regex: ...}
      json_schema: {type: object}            # the answer is JSON that matches it
      model: myproject.answers:Invoice       # or a pydantic model it parses as
      check: myproject.checks:has_total      # (answer, run) -> bool | str | None
      max_cost_usd: 0.02
      max_latency_s: 30
      max_tokens: 5000
      agents: {involved: [analyst], not_involved: [writer]}
      tools: {called: [calculate], not_called: [delete_file]}
      contract: ["coordinator asks analyst", "at most 2 levels deep"]
      diagram: expected/adds.mmd             # the comparable diagram, as `baton replay` makes it
      rubric:                                # a model judges the answer (its call is traced)
        criteria: gives the product as a number and shows the multiplication
        min_score: 0.7                       # the judge's score (0 to 1) that passes
  - name: remembers
    turns: [my name is Ada, what is my name?]  # a thread: the expectations are the last turn's
judge: openai/gpt-4o-mini                    # the rubrics' model (default: the offline model)
```
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agents.core.errors import ConfigError, ConfigIssue
from agents.core.json_schema import schema_problem
from agents.core.messages import RunStatus
from agents.core.spec import ModelSpec
from agents.runtime.guardrails import load_callable
from orchestrator.evals.contract import Rule, parse_rule
from orchestrator.system.yaml_source import (
    MAX_CONFIG_BYTES,
    Located,
    parse_yaml,
    validation_issues,
)

__all__ = ["Case", "Dataset", "Expect", "LoadedCase", "RubricExpect", "load_dataset"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AnswerExpect(_Strict):
    """What the answer's text must be: one of `equals`, `contains`, `regex` (searched)."""

    equals: str | None = None
    contains: str | None = None
    regex: str | None = None

    @model_validator(mode="after")
    def _one(self) -> AnswerExpect:
        if sum(v is not None for v in (self.equals, self.contains, self.regex)) != 1:
            raise ValueError("give one of equals, contains, regex")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"regex: {exc}") from None
        return self


class AgentsExpect(_Strict):
    involved: tuple[str, ...] = ()
    not_involved: tuple[str, ...] = ()


class ToolsExpect(_Strict):
    called: tuple[str, ...] = ()
    not_called: tuple[str, ...] = ()


class RubricExpect(_Strict):
    """What a judge model is asked of the answer: `criteria`, scored from 0 to 1."""

    criteria: str = Field(min_length=1, max_length=4000)
    min_score: float = Field(default=0.5, ge=0, le=1, description="The score that passes.")
    model: ModelSpec | None = Field(
        default=None,
        description="The judge (a model string or `{name, params}`); default: "
        "the dataset's `judge`.",
    )


class Expect(_Strict):
    """What a good run of the case looks like (every expectation given must hold)."""

    status: RunStatus = RunStatus.SUCCEEDED
    answer: AnswerExpect | None = None
    json_schema: dict[str, Any] | None = None
    model: str | None = Field(default=None, description="`module:Model`, a pydantic model.")
    check: str | None = Field(default=None, description="`module:function`(answer, run).")
    max_cost_usd: float | None = Field(default=None, ge=0)
    max_latency_s: float | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, ge=0)
    agents: AgentsExpect = Field(default_factory=AgentsExpect)
    tools: ToolsExpect = Field(default_factory=ToolsExpect)
    contract: tuple[str, ...] = ()
    diagram: str | None = Field(default=None, description="A file of the expected diagram.")
    rubric: RubricExpect | None = None


class Case(_Strict):
    """One task (or a thread's turns, one after the other) and what is expected of its run.

    Of a thread, the expectations are its last turn's: the turns before must succeed.
    """

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9 _.:/-]{0,99}$")
    task: str | None = Field(default=None, min_length=1)
    turns: tuple[Annotated[str, Field(min_length=1)], ...] | None = Field(
        default=None, min_length=1, max_length=100
    )
    agent: str | None = None
    deadline_s: float | None = Field(default=None, gt=0)
    input: Any = Field(
        default=None, description="Structured input for the entry agent (each turn's)."
    )
    expect: Expect = Field(default_factory=Expect)

    @model_validator(mode="after")
    def _task_or_turns(self) -> Case:
        if (self.task is None) == (self.turns is None):
            raise ValueError("give a task or turns (a thread), not both")
        return self

    @property
    def asked(self) -> tuple[str, ...]:
        """What is asked, turn by turn (one turn: the task)."""
        return self.turns or (self.task or "",)


class Dataset(_Strict):
    """Cases to run through a team."""

    name: str = Field(default="dataset", pattern=r"^[A-Za-z0-9][A-Za-z0-9 _.:/-]{0,99}$")
    judge: ModelSpec = Field(
        default_factory=ModelSpec, description="The rubrics' model (default: the offline model)."
    )
    cases: tuple[Case, ...] = Field(min_length=1)


@dataclass(frozen=True)
class LoadedCase:
    """A case with what its expectations need made ready: rules, callables, files."""

    case: Case
    rules: tuple[Rule, ...] = ()
    check: Callable[..., Any] | None = None
    model: type[BaseModel] | None = None
    diagram: str | None = None


def load_dataset(path: Path, agents: Collection[str]) -> tuple[Dataset, list[LoadedCase]]:
    """Read and check a dataset against the team it is for (its `agents`).

    Raises:
        ConfigError: listing every mistake, each located in the file.
    """
    try:
        with path.open("rb") as file:
            text = file.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(
            [ConfigIssue(str(path), None, None, "", f"cannot read file: {exc.strerror}")]
        ) from None
    if path.suffix.lower() == ".jsonl":
        src = _json_lines(text, str(path), path.stem)
    else:
        src = parse_yaml(text, str(path))
    if src.issues and src.data is None:
        raise ConfigError(src.issues)
    if not isinstance(src.data, dict):
        raise ConfigError([src.issue((), "a dataset is a mapping with a 'cases' list")])
    issues = list(src.issues)
    dataset: Dataset | None = None
    try:
        dataset = Dataset.model_validate(src.data)
        cases: list[Case | None] = list(dataset.cases)
    except ValidationError as exc:
        issues += validation_issues(src, exc)
        # The cases that are well formed are checked against the team all the same: every
        # mistake is said in one pass, not the malformed ones first.
        cases = [_well_formed(c) for c in _listed(src.data.get("cases"))]
    loaded, seen = [], set()
    for i, case in enumerate(cases):
        if case is None:
            continue
        checker = _CaseCheck(src, ("cases", i), set(agents))
        if case.name in seen:
            checker.issue(("name",), f"another case is named {case.name!r}")
        seen.add(case.name)
        loaded.append(checker.load(case, path.parent))
        issues += checker.issues
    if dataset is None or any(i.severity == "error" for i in issues):
        raise ConfigError(sorted(issues, key=lambda i: (i.line or 0, i.column or 0)))
    return dataset, loaded


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _well_formed(value: Any) -> Case | None:
    """What of a case can be checked against the team: the case without its malformed fields.

    Its mistakes are said with the dataset's; a field it cannot do without (its task) leaves
    nothing to check.
    """
    if not isinstance(value, dict):
        return None
    kept = copy.deepcopy(value)
    for _ in range(10):  # (each round drops the fields pydantic refused)
        try:
            return Case.model_validate(kept)
        except ValidationError as exc:
            for error in exc.errors():
                loc = error["loc"]
                if error["type"] == "missing" or not loc:
                    return None
                # A field of the case, or of its expectations: the rest is checked as is.
                holder, key = (
                    (kept, loc[0])
                    if loc[0] != "expect" or len(loc) < 2
                    else (kept.get("expect"), loc[1])
                )
                if isinstance(holder, dict):
                    holder.pop(key, None)
    return None


def _json_lines(text: bytes, file: str, name: str) -> Located:
    """A JSON Lines dataset (a case per line) as the YAML one's data, each case at its line."""
    src = Located(file=file, data=None, marks={(): (1, 1)})
    cases: list[Any] = []
    try:
        lines = text.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        src.issues.append(ConfigIssue(file, None, None, "", f"not UTF-8 text: {exc.reason}"))
        return src
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            case = json.loads(line)
        except json.JSONDecodeError as exc:
            src.issues.append(ConfigIssue(file, number, exc.colno, "", f"not JSON: {exc.msg}"))
            continue
        at = ("cases", len(cases))
        src.marks[at] = (number, 1)
        if isinstance(case, dict):
            for key in case:
                src.marks[(*at, key)] = (number, 1)
        cases.append(case)
    if not src.issues:
        src.data = {"name": name, "cases": cases}
    return src


@dataclass
class _CaseCheck:
    """Checks one case against the team and makes its expectations ready, noting mistakes."""

    src: Located
    at: tuple[str | int, ...]
    agents: set[str]
    issues: list[ConfigIssue] = field(default_factory=list)

    def issue(self, where: tuple[str | int, ...], message: str) -> None:
        self.issues.append(self.src.issue((*self.at, *where), message))

    def load(self, case: Case, folder: Path) -> LoadedCase:
        expect, agents = case.expect, self.agents
        if case.agent is not None and case.agent not in agents:
            self.issue(
                ("agent",), f"unknown agent {case.agent!r}; agents: {', '.join(sorted(agents))}"
            )
        for kind in ("involved", "not_involved"):
            for j, name in enumerate(getattr(expect.agents, kind)):
                if name not in agents:
                    self.issue(("expect", "agents", kind, j), f"unknown agent {name!r}")
        if expect.json_schema is not None:
            if problem := schema_problem(expect.json_schema):
                self.issue(("expect", "json_schema"), f"not a JSON Schema: {problem}")
        diagram = None
        if expect.diagram is not None:
            file = folder / expect.diagram
            try:
                diagram = file.read_text(encoding="utf-8")
            except OSError as exc:
                self.issue(("expect", "diagram"), f"cannot read {file}: {exc.strerror}")
        check = self._callable("check", expect.check)
        model = self._callable("model", expect.model)
        if model is not None and not (isinstance(model, type) and issubclass(model, BaseModel)):
            self.issue(("expect", "model"), f"{expect.model} is not a pydantic model")
            model = None
        return LoadedCase(case, self._rules(expect.contract), check, model, diagram)

    def _rules(self, sentences: tuple[str, ...]) -> tuple[Rule, ...]:
        rules = []
        for j, sentence in enumerate(sentences):
            try:
                rule = parse_rule(sentence)
            except ValueError as exc:
                self.issue(("expect", "contract", j), str(exc))
                continue
            unknown = [n for n in rule.names if n not in self.agents]
            if unknown:
                self.issue(("expect", "contract", j), f"unknown agent {unknown[0]!r}")
            rules.append(rule)
        return tuple(rules)

    def _callable(self, name: str, path: str | None) -> Any:
        if path is None:
            return None
        try:
            return load_callable(path)
        except ValueError as exc:
            self.issue(("expect", name), str(exc))
            return None


def json_answer(output: str) -> Any:
    """The answer as JSON (ValueError saying why it is not)."""
    try:
        return json.loads(output)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the answer is not JSON: {exc}") from None
