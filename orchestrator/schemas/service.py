"""The service in the HTTP API: its agents and their replicas, its health, and the error body."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = [
    "AgentView",
    "AgentsView",
    "CapLine",
    "ErrorBody",
    "ErrorDetail",
    "Health",
    "Readiness",
    "ReplicaView",
    "ScalingView",
    "ServiceView",
    "SpendLine",
    "TopologyView",
    "UsageView",
    "VersionView",
    "VersionsView",
]


class ErrorDetail(BaseModel):
    """What went wrong, for programs (`code`) and people (`message`)."""

    code: str = Field(description="Stable, machine-readable: `unknown_agent`, `overloaded`...")
    message: str = Field(description="What is wrong, for people.")
    details: list[dict[str, Any]] | dict[str, Any] | None = Field(
        default=None, description="Per-field problems (`field`, `message`), or context."
    )


class ErrorBody(BaseModel):
    """Every error response has this shape."""

    error: ErrorDetail


class ReplicaView(BaseModel):
    """One replica of an agent, as it answered just now."""

    actor: str
    state: str = Field(
        description='"alive"; "restarting: <why it died>" while Baton starts its host again; '
        '"crash_loop: <why>" for a host left down after dying too often; or "unavailable: <why>".'
    )
    node_id: str | None = None
    node_ip: str | None = None
    pid: int | None = None
    shares_with: list[str] = Field(
        default_factory=list,
        description="The other agents running in the same actor process (its host).",
    )
    inflight: int | None = Field(default=None, description="Delegations it is working on.")
    invocations: int | None = Field(default=None, description="Delegations it has taken.")
    restarted: bool | None = Field(default=None, description="Ray restarted it after a failure.")
    restarts: int | None = Field(
        default=None, description="Times Baton started its host again after it died (a service's)."
    )
    tool_problems: list[str] = Field(
        default_factory=list,
        description="MCP servers it could not use, and tools it disabled or skipped.",
    )


class AgentView(BaseModel):
    """One configured agent and its replicas."""

    name: str
    description: str
    capabilities: list[str]
    model: str = Field(description="Its model; for a remote agent, `a2a URL`.")
    tools: list[str]
    delegates: list[str]
    handoffs: list[str] = Field(
        default_factory=list, description="Agents it may hand the conversation over to."
    )
    guardrails: list[str] = Field(
        default_factory=list,
        description='Its checks (the system\'s first), each as "stage: name": "input: no cards", '
        '"output: ...", "tool calculate arguments: ...".',
    )
    output_schema: dict[str, Any] | str | None = Field(
        default=None, description="The shape of its final answer (JSON Schema or a model path)."
    )
    own_actors: str | None = Field(
        description="Why the agent runs in actors of its own (the `ray:` options it sets); "
        "null: it shares one actor process, the team's host, with the other agents like it."
    )
    replicas: list[ReplicaView]


class TopologyView(BaseModel):
    """Who may delegate to whom."""

    entry: str
    edges: list[tuple[str, str]]
    handoffs: list[tuple[str, str]] = Field(
        default_factory=list, description="The edges along which an agent hands over."
    )
    cycles: list[list[str]]
    max_static_depth: int | None = Field(description="None when a cycle is reachable.")
    max_depth: int


class ScalingView(BaseModel):
    """One scaling decision: an autoscaled host's replicas from how many to how many, and why."""

    at: float = Field(description="Unix seconds.")
    host: str = Field(description="The host (`_shared`, or the agent with actors of its own).")
    before: int
    after: int
    why: str


class AgentsView(BaseModel):
    """The agent system: its agents and topology, and its last hour's scaling decisions."""

    system: str
    agents: list[AgentView]
    topology: TopologyView
    scaling: list[ScalingView] = Field(
        default_factory=list, description="Autoscaled hosts' decisions of the last hour."
    )


class ServiceView(BaseModel):
    """What this service is: its team, its Baton, and where its runs' traces go."""

    system: str = Field(description="The agent system it serves (its config's `name`).")
    system_version: str = Field(
        default="",
        description="The version of the team it serves: its `release` label and config digest.",
    )
    version: str = Field(description="Baton's version.")
    instance: str = Field(description="Names this service instance in the run store.")
    trace_export: str | None = Field(
        description="Where it exports each run's spans over OTLP/HTTP (null: it does not)."
    )
    step_log: bool = Field(
        description="Whether its runs keep a step log (they resume, replay and fork; not with "
        "an in-memory store)."
    )
    versions: list[VersionView] = Field(
        default_factory=list,
        description="The versions of the team running here, oldest first: the newest takes new "
        "runs, an older one finishes its own and stops.",
    )


class VersionView(BaseModel):
    """A version of the team running here."""

    version: str = Field(description="Its `release` label and config digest (`v2+3f9a0c1d2e`).")
    release: str | None = Field(description="Its config's `release:` label, if any.")
    current: bool = Field(description="Whether new runs go to it (the newest).")
    runs: int = Field(description="Runs in flight here on this version.")
    started_at: float = Field(description="When it started here (Unix time).")
    agents: list[str] = Field(description="Its agents.")


class VersionsView(BaseModel):
    """What a new version changed: the version now current, the one before, and every one."""

    version: str = Field(description="The version new runs now go to.")
    previous: str | None = Field(
        description="The version it replaced (null: it was current already; nothing changed)."
    )
    running: list[VersionView] = Field(
        description="The versions running here, oldest first (the previous one until its runs end)."
    )


class Health(BaseModel):
    """The process is up."""

    status: Literal["ok"]


class Readiness(BaseModel):
    """Whether the service can run tasks, part by part."""

    status: Literal["ready", "not_ready"]
    checks: dict[str, str] = Field(
        description='Each part ("ray", "agents", "store", "tools", "access_file"): "ok" or why '
        'not. Ray, the agents and the store decide readiness; "tools" reports MCP servers the '
        'agents could not use, "access_file" a wrong edit of the access file (the file read '
        "before stays in force)."
    )
    system_version: str = Field(
        default="", description="The version of the team new runs go to (`GET /v1/service`)."
    )
    versions: list[str] = Field(
        default_factory=list,
        description="Every version of the team running here, oldest first (older ones finish "
        "their runs).",
    )


class SpendLine(BaseModel):
    """What one key's runs spent with one agent and model in the day."""

    tenant: str
    key: str = Field(description="The API key's name (or `ip:` address, `local`).")
    agent: str
    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    unpriced_calls: int = Field(description="Calls of models litellm has no price for.")


class CapLine(BaseModel):
    """A daily spending cap in force, and what is left of it today."""

    scope: str = Field(description="`tenant:NAME` or `key:NAME`.")
    tokens: int | None = Field(description="Tokens a day (None: not capped in tokens).")
    usd: float | None = Field(description="Dollars a day (None: not capped in dollars).")
    left_tokens: int | None = Field(description="Tokens left today (never below 0).")
    left_usd: float | None = Field(description="Dollars left today (never below 0).")


class UsageView(BaseModel):
    """A UTC day's spending: per tenant, key, agent and model, and in total."""

    day: str = Field(description="YYYY-MM-DD (UTC).")
    tenant: str | None = Field(description="The tenant asked about (None: every tenant).")
    lines: list[SpendLine]
    total: SpendLine = Field(description="The sums of the lines (its names are `*`).")
    caps: list[CapLine] = Field(
        default_factory=list,
        description=(
            "The daily caps in force now for the tenant asked about and the caller's key (the"
            " access file's, else the service's defaults); empty when none is, or for every"
            " tenant at once."
        ),
    )
