"""Agent systems from YAML: parse, validate, check the whole system, report every problem.

Validation is pydantic's, the whole-system checks use networkx, and each problem names its
file, line and field.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents.core.errors import ConfigError, ConfigIssue, ToolImportError
from agents.core.gate_spec import GateSpec
from agents.core.guardrail_spec import GuardrailsSpec
from agents.core.imports import on_import_path
from agents.core.limits import Limits, TraceOptions
from agents.core.spec import AgentSpec, SharedHostOptions, SupervisionOptions
from agents.core.state import StateSpec, placeholders
from agents.core.workflow_spec import step_agents, step_checks
from agents.memory import MemoryRefused, check_namespace
from agents.runtime.guardrails import load_callable
from agents.runtime.structured import load_output_model
from agents.tools.base import load_function_tool
from agents.tools.delegate import DELEGATE_PREFIX, reserved_by
from agents.tools.memory import MEMORY_TOOL_NAMES
from agents.workflows.run import load_workflow
from orchestrator.system.revision import code_revision
from orchestrator.system.topology import Topology, build_topology
from orchestrator.system.yaml_source import (
    MAX_CONFIG_BYTES,
    Located,
    parse_yaml,
    validation_issues,
)
from tracing import Redactor, secret_values_from_env

__all__ = ["AgentSystem", "SystemConfig", "default_config_path", "load_config", "parse_config"]


class SystemConfig(BaseModel):
    """The top level of an agent-system YAML file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1] = 1
    name: str = Field(default="baton", pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,47}$")
    release: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,47}$",
        description="A label of this version of the team (`v2`, `2026-11-28`): each run "
        "records it with the config's digest.",
    )
    entry: str | None = Field(default=None, description="Default entry agent; the first if unset.")
    allow_cycles: bool = False
    on_interrupt: Literal["resume", "fail"] = Field(
        default="resume",
        description="What happens to a run whose service died mid-way: `resume` (once a "
        "service is back, it carries on from its step log) or `fail` (it ends `interrupted`).",
    )
    limits: Limits = Field(default_factory=Limits)
    state: StateSpec | None = Field(
        default=None,
        description="The run's shared state: its JSON Schema (each write checked) and how "
        "writes to a key merge (`reducers`). Untyped and last-writer-wins without it.",
    )
    tracing: TraceOptions = Field(default_factory=TraceOptions)
    shared_host: SharedHostOptions = Field(default_factory=SharedHostOptions)
    supervision: SupervisionOptions = Field(default_factory=SupervisionOptions)
    env: tuple[str, ...] = Field(
        default=(),
        description="Environment variables forwarded to agent actors (provider keys); their "
        "values are treated as secrets and redacted from spans, logs and the store.",
    )
    guardrails: GuardrailsSpec = Field(
        default_factory=GuardrailsSpec,
        description="Guardrails of every agent (before each agent's own).",
    )
    gates: tuple[GateSpec, ...] = Field(
        default=(),
        description="Provider gates: limits on calls to the models they match, held for the "
        "whole cluster (every replica and node), with retries and fallbacks.",
    )
    agents: tuple[AgentSpec, ...] = Field(min_length=1)


@dataclass(frozen=True)
class AgentSystem:
    """A validated config with its topology, ready to run."""

    config: SystemConfig
    topology: Topology
    source: str
    warnings: list[ConfigIssue] = field(default_factory=list)
    # The team file's folder, on the import path of the processes that run it (None: a config
    # read from text).
    folder: str | None = None

    @property
    def entry(self) -> str:
        """The entry agent: the first one in the file."""
        return self.topology.entry

    def agent(self, name: str) -> AgentSpec:
        """The agent named `name`."""
        for spec in self.config.agents:
            if spec.name == name:
                return spec
        raise KeyError(name)

    def secrets(self, environ: Mapping[str, str]) -> set[str]:
        """Values never to record: the forwarded variables' and every agent's credentials."""
        found = secret_values_from_env(environ, self.config.env)
        for agent in self.config.agents:
            found |= agent.credentials(environ)
        return found

    def public_config(self, redactor: Redactor) -> dict[str, Any]:
        """The config as JSON with credentials replaced, as the run store keeps it.

        Credentials are values under secret-sounding keys (`api_key`, headers), every value
        `redactor` knows to be secret wherever it appears (a forwarded variable's value inside
        an `api_base`, say), and secrets in URLs (`?key=`, `user:password@`).
        """
        return redactor.mapping(self.config.model_dump(mode="json"))

    @property
    def waits_for_people(self) -> bool:
        """Whether a run of the system may wait for a person.

        For an approval (a tool, MCP server or delegation with `confirm`), or an answer (an
        agent with `ask_user`).
        """
        return any(
            a.confirm
            or a.ask_user
            or any(t.confirm for t in a.tools)
            or any(m.confirm for m in a.mcp)
            for a in self.config.agents
        )

    @property
    def autoscaled(self) -> bool:
        """Whether some agent host's replicas follow the load (`replicas: {min, max}`)."""
        return self.config.shared_host.autoscale is not None or any(
            a.ray.autoscale is not None for a in self.config.agents
        )

    @cached_property
    def version(self) -> str:
        """The version of the team: `{release}+{digest}`, or the config's digest alone."""
        release = self.config.release
        return f"{release}+{self.fingerprint}" if release else self.fingerprint

    @cached_property
    def fingerprint(self) -> str:
        """Short hash of the config: actors of different configs never share names."""
        return hashlib.sha256(self.config.model_dump_json().encode()).hexdigest()[:10]

    def actor_prefix(self, store_url: str | None = None) -> str:
        """What the names of this system's actors on Ray start with.

        The config's name and hash, the revision of Baton's agent code (`code_revision`), and
        the run store its ledger writes runs' steps and events to: a service with another store
        must not find this one's ledger and write there.
        """
        prefix = f"{self.config.name}-{self.fingerprint}-{code_revision()}"
        if store_url is None:
            return prefix
        return f"{prefix}-{hashlib.sha256(store_url.encode()).hexdigest()[:6]}"


def default_config_path() -> Path:
    """`configs/default.yaml` in the working directory if present, else the packaged copy."""
    local = Path("configs/default.yaml")
    if local.is_file():
        return local
    return Path(str(resources.files("configs") / "default.yaml"))


def _check_names(src: Located, config: SystemConfig) -> list[ConfigIssue]:
    issues = []
    seen: dict[str, int] = {}
    for i, agent in enumerate(config.agents):
        if agent.name in seen:
            issues.append(
                src.issue(
                    ("agents", i, "name"),
                    f"duplicate agent {agent.name!r} (first at agents[{seen[agent.name]}])",
                )
            )
        seen.setdefault(agent.name, i)
        if agent.delegates != "*":
            for j, target in enumerate(agent.delegates):
                if target not in seen and target not in {a.name for a in config.agents}:
                    issues.append(
                        src.issue(("agents", i, "delegates", j), f"unknown agent {target!r}")
                    )
                elif target == agent.name:
                    issues.append(
                        src.issue(
                            ("agents", i, "delegates", j), f"{agent.name} delegates to itself"
                        )
                    )
        if agent.workflow is not None and not isinstance(agent.workflow, str):
            for target in step_agents(agent.workflow):
                if target not in {a.name for a in config.agents} or target == agent.name:
                    what = "itself" if target == agent.name else f"unknown agent {target!r}"
                    issues.append(src.issue(("agents", i, "workflow"), f"a step calls {what}"))
        for j, target in enumerate(agent.handoffs):
            if target == agent.name or target not in {a.name for a in config.agents}:
                what = "itself" if target == agent.name else f"unknown agent {target!r}"
                issues.append(src.issue(("agents", i, "handoffs", j), f"a hand-off to {what}"))
    if config.entry is not None and config.entry not in seen:
        issues.append(src.issue(("entry",), f"unknown agent {config.entry!r}"))
    return issues


def _check_tools(src: Located, config: SystemConfig) -> list[ConfigIssue]:
    issues = []
    for i, agent in enumerate(config.agents):
        if isinstance(agent.output_schema, str):  # a pydantic model's import path
            try:
                load_output_model(agent.output_schema)
            except ValueError as exc:
                issues.append(src.issue(("agents", i, "output_schema"), str(exc)))
        try:
            agent.input_json_schema()
        except ValueError as exc:
            issues.append(src.issue(("agents", i, "input_schema"), str(exc)))
        if isinstance(agent.workflow, str):
            try:
                load_workflow(agent.workflow)
            except ValueError as exc:
                issues.append(src.issue(("agents", i, "workflow"), str(exc)))
        elif agent.workflow is not None:
            for path in step_checks(agent.workflow):
                try:
                    load_callable(path)
                except ValueError as exc:
                    issues.append(src.issue(("agents", i, "workflow"), str(exc)))
        issues += _check_guardrails(src, agent.guardrails, ("agents", i, "guardrails"))
        # (The memory tools' names are the agent's own built-ins: another agent may use them.)
        memory = MEMORY_TOOL_NAMES if agent.long_term_memory is not None else ()
        names: dict[str, str] = dict.fromkeys(memory, "the built-in memory tools")
        for j, ref in enumerate(agent.tools):
            path = ref.function
            try:
                tool = load_function_tool(path)
            except ToolImportError as exc:
                issues.append(src.issue(("agents", i, "tools", j), f"unknown tool: {exc.reason}"))
                continue
            if ref.retries and ref.idempotent is None and not tool.idempotent:
                issues.append(
                    src.issue(
                        ("agents", i, "tools", j, "retries"),
                        f"retries need an idempotent tool: {path} does not declare itself "
                        "idempotent; add idempotent: true if it is",
                    )
                )
            if tool.name in names:
                issues.append(
                    src.issue(
                        ("agents", i, "tools", j),
                        f"tool name {tool.name!r} from {path} collides with {names[tool.name]}",
                    )
                )
            reserved = reserved_by(tool.name)
            if reserved:
                issues.append(
                    src.issue(
                        ("agents", i, "tools", j),
                        f"tool name {tool.name!r} from {path} collides with {reserved} "
                        "(a reserved name)",
                    )
                )
            names[tool.name] = path
        issues += _check_faces(src, config, agent, names)
        issues += _check_connections(src, config, i, agent)
    return issues


def _check_faces(
    src: Located, config: SystemConfig, agent: AgentSpec, names: dict[str, str]
) -> list[ConfigIssue]:
    """The tool names its callees take (`tool.name`): none may be another of its tools'."""
    issues = []
    index = {a.name: j for j, a in enumerate(config.agents)}
    callees = agent.callees
    targets = (
        [a for a in config.agents if a.name != agent.name]
        if callees == "*"
        else [config.agents[index[n]] for n in callees if n in index]
    )
    for target in targets:
        face = target.tool.name
        if face is None:
            continue
        if face in names or (reserved_by(face) and not face.startswith(DELEGATE_PREFIX)):
            taken = names.get(face) or reserved_by(face)
            issues.append(
                src.issue(
                    ("agents", index[target.name], "tool", "name"),
                    f"tool name {face!r} collides, for {agent.name}, with {taken}",
                )
            )
        names[face] = f"{target.name} (as a tool)"
    return issues


def _check_guardrails(
    src: Located, spec: GuardrailsSpec, where: tuple[str | int, ...]
) -> list[ConfigIssue]:
    """Guardrail functions must import (as tools must)."""
    issues = []
    for stage in ("input", "output", "tools"):
        for j, guard in enumerate(getattr(spec, stage)):
            if guard.function is not None:
                try:
                    load_callable(guard.function)
                except ValueError as exc:
                    issues.append(src.issue((*where, stage, j, "function"), str(exc)))
    return issues


def _check_connections(
    src: Located, config: SystemConfig, i: int, agent: AgentSpec
) -> list[ConfigIssue]:
    """MCP servers (names unique per agent) and remote agents: variables they need forwarded."""
    issues = []
    seen: dict[str, int] = {}
    for j, server in enumerate(agent.mcp):
        if server.name in seen:
            issues.append(
                src.issue(
                    ("agents", i, "mcp", j, "name"),
                    f"MCP server name {server.name!r} is used twice by {agent.name} "
                    f"(also mcp[{seen[server.name]}])",
                )
            )
        seen[server.name] = j
        # Agent actors on other nodes receive only the variables the config forwards.
        needed = [("env", k, v) for k, v in enumerate(server.env)] + [
            ("headers", h, v) for h, v in server.headers.items()
        ]
        for key, where, variable in needed:
            if variable not in config.env:
                issues.append(
                    src.issue(
                        ("agents", i, "mcp", j, key, where),
                        f"{variable} must also be listed under the top-level env: (the "
                        "variables forwarded to agent actors)",
                    )
                )
    for header, variable in (agent.a2a.headers if agent.a2a else {}).items():
        if variable not in config.env:
            issues.append(
                src.issue(
                    ("agents", i, "a2a", "headers", header),
                    f"{variable} must also be listed under the top-level env: (the variables "
                    "forwarded to agent actors)",
                )
            )
    return issues


def _resolve_folders(
    src: Located, config: SystemConfig, base: Path
) -> tuple[SystemConfig, list[ConfigIssue]]:
    """Make each agent's folders absolute (file tools, stdio MCP servers' `cwd`), and check them.

    Relative folders are relative to the config file's folder.
    """
    issues = []

    def folder_at(place: tuple[str | int, ...], named: str) -> str:
        folder = Path(named).expanduser()
        folder = (folder if folder.is_absolute() else base / folder).resolve()
        if not folder.is_dir():
            issues.append(src.issue(place, f"{folder} is not a directory"))
        return str(folder)

    agents = []
    for i, agent in enumerate(config.agents):
        if agent.files is not None:
            folder = folder_at(("agents", i, "files", "base_dir"), agent.files.base_dir)
            agent = agent.model_copy(
                update={"files": agent.files.model_copy(update={"base_dir": folder})}
            )
        if any(server.cwd for server in agent.mcp):
            servers = tuple(
                server.model_copy(
                    update={"cwd": folder_at(("agents", i, "mcp", j, "cwd"), server.cwd)}
                )
                if server.cwd
                else server
                for j, server in enumerate(agent.mcp)
            )
            agent = agent.model_copy(update={"mcp": servers})
        agents.append(agent)
    return config.model_copy(update={"agents": tuple(agents)}), issues


_PLACEHOLDER_AT = re.compile(r"\{state\.[^}]*\}")


def _check_state(src: Located, config: SystemConfig) -> list[ConfigIssue]:
    """The keys agents save to and read from the shared state, against its schema.

    A key a closed schema (`additionalProperties: false`) does not list is an error; a
    placeholder whose key has no `default` is a warning: a run fails there unless something
    wrote the key first.
    """
    schema = (config.state.schema_ if config.state else None) or {}
    listed = schema.get("properties", {})
    closed = schema.get("additionalProperties") is False
    issues = []
    for i, agent in enumerate(config.agents):
        if agent.save_as and closed and agent.save_as not in listed:
            issues.append(
                src.issue(
                    ("agents", i, "save_as"),
                    f"the state's schema has no key {agent.save_as!r} (it lists "
                    f"{', '.join(sorted(listed)) or 'none'})",
                )
            )
        templates: list[tuple[tuple[str | int, ...], str]] = [
            (("agents", i, "instructions"), agent.instructions)
        ]
        if agent.long_term_memory is not None:
            where: tuple[str | int, ...] = ("agents", i, "long_term_memory", "namespace")
            namespace = agent.long_term_memory.namespace
            templates.append((where, namespace))
            try:  # (each placeholder stands for one level's worth of a value)
                check_namespace(_PLACEHOLDER_AT.sub("x", namespace))
            except MemoryRefused as exc:
                issues.append(src.issue(where, str(exc)))
        for place, text in templates:
            for key in placeholders(text):
                entry = listed.get(key)
                if closed and entry is None:
                    message = f"{{state.{key}}}: the state's schema has no key {key!r}"
                    issues.append(src.issue(place, message))
                elif not (isinstance(entry, dict) and "default" in entry):
                    message = (
                        f"{{state.{key}}} has no default in the state's schema: a call of "
                        f"{agent.name} fails unless {key!r} was written before"
                    )
                    issues.append(src.issue(place, message, "warning"))
    return issues


def _check_graph(src: Located, config: SystemConfig, topology: Topology) -> list[ConfigIssue]:
    issues = []
    index = {a.name: i for i, a in enumerate(config.agents)}
    if not config.allow_cycles:
        for cycle in topology.cycles():
            text = " -> ".join([*cycle, cycle[0]])
            issues.append(
                src.issue(
                    ("agents", index[cycle[0]], "delegates"),
                    f"delegation cycle {text} (set allow_cycles: true to let an agent "
                    "hand control back to one up its chain; limits.max_visits stops a "
                    "ping-pong)",
                )
            )
    for name in topology.unreachable():
        issues.append(
            src.issue(
                ("agents", index[name], "name"),
                f"agent {name!r} is unreachable from the entry agent {topology.entry!r}",
                "warning",
            )
        )
    depth = topology.max_static_depth()
    if depth is not None and depth > config.limits.max_depth:
        issues.append(
            src.issue(
                ("limits", "max_depth"),
                f"the longest delegation chain has {depth} agents but max_depth "
                f"is {config.limits.max_depth}; deeper delegations are refused",
                "warning",
            )
        )
    return issues


def parse_config(text: str | bytes, file: str = "<string>") -> AgentSystem:
    """Validate config text; raise `ConfigError` listing every error found."""
    src = parse_yaml(text, file)
    if src.issues and src.data is None:
        raise ConfigError(src.issues)
    data: Any = src.data
    if not isinstance(data, dict):
        empty = "the file is empty; " if data is None else ""
        raise ConfigError([src.issue((), f"{empty}it must be a mapping with an 'agents' list")])
    try:
        config = SystemConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(src.issues + validation_issues(src, exc)) from None
    origin = Path(file)
    config, file_issues = _resolve_folders(
        src, config, origin.parent if origin.is_file() else Path.cwd()
    )
    issues = src.issues + _check_names(src, config) + _check_tools(src, config) + file_issues
    issues += _check_guardrails(src, config.guardrails, ("guardrails",))
    entry = config.entry or config.agents[0].name
    topology = build_topology(list(config.agents), entry)
    issues += _check_graph(src, config, topology)
    issues += _check_state(src, config)
    errors = [i for i in issues if i.severity == "error"]
    if errors:
        raise ConfigError(issues)
    if config.guardrails:  # the system's guardrails are every agent's, before its own
        agents = [a.model_copy(update={"guardrails": config.guardrails + a.guardrails})
                  for a in config.agents]  # fmt: skip
        config = config.model_copy(update={"agents": tuple(agents)})
    return AgentSystem(config=config, topology=topology, source=file, warnings=issues)


def load_config(path: str | Path) -> AgentSystem:
    """Read and validate an agent-system YAML file.

    Its folder goes on the import path first: the team's own modules (tools, schemas, hooks,
    workflows) import by their names there, with no PYTHONPATH.
    """
    path = Path(path)
    folder = str(path.resolve().parent)
    on_import_path(folder)
    try:
        with path.open("rb") as file:
            data = file.read(MAX_CONFIG_BYTES + 1)  # a bound, whatever the path names
    except OSError as exc:
        raise ConfigError(
            [ConfigIssue(str(path), None, None, "", f"cannot read file: {exc.strerror}")]
        ) from None
    system = parse_config(data, str(path))  # too large or not UTF-8: config errors there
    return replace(system, folder=folder)
