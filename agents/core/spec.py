"""What an agent is: the validated shape of one agent.

Its model, tools, MCP servers and Ray options.

These models are the boundary between a YAML file and the runtime; the loader in
`orchestrator.system.config` adds file locations and whole-system checks on top.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agents.core.guardrail_spec import GuardrailsSpec
from agents.core.json_schema import schema_problem
from agents.core.steering_spec import StepRule
from agents.core.workflow_spec import Step, parse_step, step_agents
from tracing.redaction import secret_values_in, url_query_values

__all__ = [
    "OFFLINE_MODEL",
    "AgentCard",
    "AgentSpec",
    "Autoscale",
    "ContextSpec",
    "FileToolsSpec",
    "LongTermMemorySpec",
    "McpServerSpec",
    "ModelSpec",
    "RayOptions",
    "RemoteSpec",
    "SharedHostOptions",
    "SupervisionOptions",
    "Timeouts",
    "ToolFace",
    "ToolRef",
]

OFFLINE_MODEL = "baton/offline"

AGENT_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,47}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSpec(_Strict):
    """A litellm model string plus the keyword arguments passed to `litellm.acompletion`."""

    name: str = Field(default=OFFLINE_MODEL, min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)
    fallbacks: tuple[ModelSpec, ...] = Field(
        default=(),
        description="Models tried in order when this one keeps failing (a rate limit, an "
        "overload, a lost connection, after its gate's retries) or when its gate would hold "
        "the call past `max_wait_s`. Each is a model string or a `{name, params}` mapping.",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        # `openai/gpt-4o-mini` is the common case (an agent's model, a fallback, a judge); the
        # mapping form adds params.
        return {"name": value} if isinstance(value, str) else value

    def every(self) -> tuple[ModelSpec, ...]:
        """This model and its fallbacks, in the order they are tried."""
        return (self, *self.fallbacks)


class Timeouts(_Strict):
    """Per-call time limits in seconds; the run deadline still caps each of them."""

    model: float = Field(default=120.0, gt=0)
    tool: float = Field(default=60.0, gt=0)


class Autoscale(_Strict):
    """Replicas that follow the load: `replicas: {min: 1, max: 8}`.

    A replica is added when the delegations in flight per replica stay above `target` for
    `up_after_s` (as many as bring it to `target`, up to `max`); one that held nothing for
    `down_after_s` is drained and removed, never below `min`. A replica that does not fit the
    cluster waits for room, and Ray's autoscaler (KubeRay's, a cloud's) adds a node for it.
    """

    min: int = Field(default=1, ge=1, le=256)
    max: int = Field(ge=1, le=256)
    target: float = Field(default=4.0, gt=0, description="Delegations in flight per replica.")
    up_after_s: float = Field(default=5.0, ge=0)
    down_after_s: float = Field(default=60.0, ge=0)

    @model_validator(mode="after")
    def _bounds(self) -> Autoscale:
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min})")
        return self


def _autoscaled(value: Any) -> Any:
    """`replicas: {min, max, ...}` read as `replicas: min` plus `autoscale: {...}`."""
    if isinstance(value, dict) and isinstance(value.get("replicas"), dict):
        bounds = value["replicas"]
        return {**value, "replicas": bounds.get("min", 1), "autoscale": bounds}
    return value


class RayOptions(_Strict):
    """How the agent's actors are placed and run on Ray."""

    replicas: int = Field(
        default=1,
        ge=1,
        le=256,
        description="Its replicas (delegations are spread over them), or `{min, max}` and "
        "the other `Autoscale` fields: as many as the load needs.",
    )
    autoscale: Autoscale | None = None
    num_cpus: float = Field(default=0.0, ge=0)
    num_gpus: float = Field(default=0.0, ge=0)
    resources: dict[str, float] = Field(default_factory=dict)
    max_concurrency: int = Field(default=1000, ge=2)
    max_restarts: int = Field(default=0, ge=-1)
    isolate: bool = Field(
        default=False,
        description="Run in actors of its own even with no other option set (by default an "
        "agent without `ray:` options shares one actor process with the others like it).",
    )

    @model_validator(mode="before")
    @classmethod
    def _replica_range(cls, value: Any) -> Any:
        return _autoscaled(value)


class SharedHostOptions(_Strict):
    """How the shared host runs: the actor process of every agent without `ray:` options."""

    replicas: int = Field(
        default=1,
        ge=1,
        le=256,
        description="Its replicas, each running all those agents: runs are spread over them "
        "round-robin, and a run's delegations between them stay in its replica's process. One "
        "process runs Python on one core at a time: for many runs at once, up to one replica "
        "per core; each costs about 250 MB.",
    )
    autoscale: Autoscale | None = None

    @model_validator(mode="before")
    @classmethod
    def _replica_range(cls, value: Any) -> Any:
        return _autoscaled(value)


class SupervisionOptions(_Strict):
    """How Baton starts a dead agent host again (a service's hosts; see `agents.ray.supervisor`).

    Ray restarts an actor only `max_restarts` times; past that (0 by default) a host killed by
    the OOM killer, a crashing tool or a lost node would stay dead. Baton creates it again under
    its name, after a pause that doubles from `backoff_min_s` to `backoff_max_s`; a host that
    dies `restarts` times within `window_s` is in a crash loop and left down (reported by
    `/readyz` and `GET /v1/agents`) until the service is started again.
    """

    restarts: int = Field(default=5, ge=0, le=1000)
    window_s: float = Field(default=300.0, gt=0)
    backoff_min_s: float = Field(default=1.0, ge=0)
    backoff_max_s: float = Field(default=60.0, ge=0)

    def pause_s(self, recent: int) -> float:
        """The pause before the restart that follows `recent` restarts within the window."""
        return float(min(self.backoff_min_s * 2.0**recent, self.backoff_max_s))


class ToolRef(_Strict):
    """A function tool, and how it may be run again.

    A tool that is not idempotent runs at most once per call: Baton records that it is about
    to run before it runs, and never retries it, nor a delegation that had started it.
    """

    function: str = Field(min_length=1, description="`package.module:function`")
    idempotent: bool | None = Field(
        default=None,
        description="Safe to run again with the same arguments (default: what the function "
        "declares with `@agents.tools.idempotent`, else false).",
    )
    retries: int = Field(
        default=0, ge=0, le=10, description="Retries after an error (idempotent tools only)."
    )
    confirm: bool = Field(
        default=False, description="Each call waits for a person's approval (HTTP service)."
    )

    @model_validator(mode="after")
    def _retries_need_idempotence(self) -> ToolRef:
        if self.retries and self.idempotent is False:
            raise ValueError("retries need an idempotent tool (idempotent: true)")
        return self


# A stdio server's command is run directly, never through a shell: a command that looks like
# shell syntax is refused rather than passed on to fail (or worse) somewhere else.
_SHELL_CHARACTERS = set(";&|<>$`\\\"'*?(){}[]!~#\n\r\t ")
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
_HEADER_NAME = r"^[A-Za-z0-9-]{1,64}$"


class McpServerSpec(_Strict):
    """An MCP server whose tools an agent may call: a stdio command or a streamable-HTTP URL."""

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,47}$", description="Names the server.")
    command: str | None = Field(
        default=None, description="stdio: the program to start (no shell; arguments in args)."
    )
    args: tuple[str, ...] = Field(default=(), description="stdio: its arguments, passed as-is.")
    env: tuple[Annotated[str, Field(pattern=_ENV_NAME)], ...] = Field(
        default=(),
        description="stdio: variables passed on from Baton's environment; the server gets only "
        "these and a minimal set (PATH, HOME, USER, ...).",
    )
    cwd: str | None = Field(default=None, description="stdio: the working directory.")
    url: str | None = Field(default=None, description="streamable HTTP: the endpoint URL.")
    headers: dict[Annotated[str, Field(pattern=_HEADER_NAME)], str] = Field(
        default_factory=dict,
        description="streamable HTTP: header name -> the environment variable holding its value.",
    )
    include: tuple[str, ...] = Field(default=(), description="Only these tools (default: all).")
    exclude: tuple[str, ...] = Field(default=(), description="Never these tools.")
    prefix: str = Field(
        default="", pattern=r"^[A-Za-z0-9_-]{0,32}$", description="Put before each tool's name."
    )
    connect_timeout_s: float = Field(default=10.0, gt=0, le=300)
    timeout_s: float = Field(default=60.0, gt=0, description="Per tool call.")
    confirm: bool = Field(
        default=False, description="Each call waits for a person's approval (HTTP service)."
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (stdio) or url (streamable HTTP), not both")
        if self.command is not None:
            bad = sorted(set(self.command) & _SHELL_CHARACTERS)
            if bad or not self.command:
                raise ValueError(
                    f"command {self.command!r} contains shell syntax ({''.join(bad)!r}); it is "
                    "run without a shell: name the program only and put arguments in args"
                )
            if self.headers:
                raise ValueError("headers apply to url servers only")
        else:
            assert self.url is not None
            if not self.url.startswith(("http://", "https://")):
                raise ValueError(f"url {self.url!r} must start with http:// or https://")
            if self.args or self.env or self.cwd:
                raise ValueError("args, env and cwd apply to command (stdio) servers only")
        return self


class LongTermMemorySpec(_Strict):
    """An agent's long-term memory tools: `recall`, and unless read-only `remember`, `forget`.

    Items are its run's tenant's, in one namespace (and, for `recall`, those under it).
    """

    namespace: str = Field(
        default="shared",
        max_length=600,
        description="Where its items go: levels joined by dots (`users.alice`). `{state.key}` "
        "placeholders are filled from the run's shared state at each call, so one agent keeps "
        "each user's items apart (`users.{state.user_id}`).",
    )
    read_only: bool = Field(
        default=False, description="Only `recall`: it reads what others remembered."
    )
    recall_limit: int = Field(default=5, ge=1, le=50, description="Items `recall` returns at most.")


class ContextSpec(_Strict):
    """How a long conversation is kept inside the model's window."""

    max_tokens: int | None = Field(
        default=None, ge=256, description="The budget of a request (default: the model's window)."
    )
    strategy: Literal["none", "drop_oldest_tool_results", "summarize"] = "none"
    keep_last: int = Field(
        default=4, ge=1, le=100, description="The latest messages never dropped or summarized."
    )
    model: Any = Field(
        default=None, description="The model that summarizes (default: the agent's own)."
    )


class RemoteSpec(_Strict):
    """An agent that is another agent system (or any A2A agent), reached over A2A.

    Delegating to it sends the task as an A2A message (with the trace context, the delegation
    chain and the time left); its task's updates become the run's events.
    """

    url: str = Field(description="The agent's service: its card is at `/.well-known/...`.")
    headers: dict[Annotated[str, Field(pattern=_HEADER_NAME)], str] = Field(
        default_factory=dict,
        description="Header name -> the environment variable holding its value (an API key).",
    )
    agent: str | None = Field(
        default=None, description="A Baton service's entry agent to ask (default: its own)."
    )
    connect_timeout_s: float = Field(default=10.0, gt=0, le=300)

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"url {url!r} must start with http:// or https://")
        return url.rstrip("/")


class FileToolsSpec(_Strict):
    """Read-only file tools over one directory tree."""

    base_dir: str = Field(min_length=1, description="Every path is resolved inside it.")
    max_read_bytes: int = Field(default=262_144, ge=1, le=16 * 1024 * 1024)
    max_results: int = Field(default=200, ge=1, le=10_000)


class ToolFace(_Strict):
    """How callers' models see an agent as a tool (the OpenAI Agents SDK's `as_tool`)."""

    name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="The tool's name (default: `delegate_to_<agent>`).",
    )
    description: str | None = Field(
        default=None, max_length=2000, description="What callers are told it does."
    )
    output: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*$",
        description="A field of its JSON answer (`summary`, `result.text`): callers get that "
        "field's value instead of the whole answer.",
    )


def _schema_or_model(value: Any) -> Any:
    """An inline JSON Schema (checked) or a pydantic model's import path, as written."""
    if isinstance(value, str) and ":" not in value:
        raise ValueError(f"{value!r} is not an import path (`package.module:Model`)")
    if isinstance(value, dict):
        if problem := schema_problem(value):
            raise ValueError(f"not a valid JSON Schema: {problem}")
    return value


class AgentCard(_Strict):
    """What other agents (and the router) see of an agent."""

    name: str = Field(pattern=AGENT_NAME_PATTERN)
    description: str = ""
    capabilities: tuple[str, ...] = ()
    confirm: bool = Field(
        default=False, description="Delegations to this agent wait for a person's approval."
    )
    accepts: dict[str, Any] | None = Field(
        default=None,
        description="The JSON Schema of the structured input it takes (a delegation's `input`): "
        "its `input_schema`, a model's imported.",
    )
    tool: ToolFace = Field(
        default_factory=ToolFace, description="How callers' models see it as a tool."
    )


class AgentSpec(AgentCard):
    """One agent of a system, as written in the YAML."""

    model: ModelSpec = Field(default_factory=ModelSpec)
    instructions: str = ""
    tools: tuple[ToolRef, ...] = ()
    delegates: tuple[str, ...] | Literal["*"] = ()
    handoffs: tuple[str, ...] = Field(
        default=(), description="Agents it may hand the conversation over to (they answer)."
    )
    max_steps: int | None = Field(default=None, ge=1)
    output_schema: dict[str, Any] | str | None = Field(
        default=None,
        description="The final answer is JSON of this shape: an inline JSON Schema, or the "
        "import path of a pydantic model (`package.module:Model`).",
    )
    output_retries: int = Field(
        default=2, ge=0, le=10, description="Answers that do not match, told why and asked again."
    )
    context: ContextSpec = Field(default_factory=ContextSpec)
    hooks: tuple[str, ...] = Field(
        default=(), description="`agents.runtime.hooks.Hooks` subclasses, by import path."
    )
    step_rules: tuple[StepRule, ...] = Field(
        default=(), description="On a step, after a tool, below a budget: change the call."
    )
    guardrails: GuardrailsSpec = Field(
        default_factory=GuardrailsSpec,
        description="Checks on its input, output and tool calls (the system's come first).",
    )
    output_mode: Literal["auto", "native", "prompt"] = Field(
        default="auto",
        description="native: the provider's structured-output mode (`response_format`); prompt: "
        "the schema in the instructions; auto: native where litellm says the model has it.",
    )
    mcp: tuple[McpServerSpec, ...] = ()
    files: FileToolsSpec | None = None
    save_as: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][\w-]*$",
        description="Its answer is written to the run's shared state at this key when it "
        "succeeds (ADK's `output_key`): the parsed JSON with an `output_schema`, else the text.",
    )
    memory: Literal["run", "thread"] = Field(
        default="run",
        description="thread: in a thread's runs, the agent sees its own earlier exchanges in "
        "the thread (each task it was given and its answer), as the entry agent sees the "
        "earlier turns; run: it starts fresh each time it is called.",
    )
    long_term_memory: LongTermMemorySpec | None = Field(
        default=None,
        description="Items kept across runs and threads for its tenant, which it reads and "
        "writes with the built-in `recall`, `remember` and `forget` tools (LangGraph's Store, "
        "ADK's memory service); people reach them at `/v1/memory`.",
    )
    ask_user: bool = Field(
        default=False,
        description="It may ask the person who submitted the run a question (the built-in "
        "`ask_user` tool): the run waits, `input_required`, until the answer comes. A remote "
        "agent (`a2a`) passes its task's questions (`input-required`) on so; without it, a "
        "remote task that asks is cancelled.",
    )
    timeouts: Timeouts = Field(default_factory=Timeouts)
    ray: RayOptions = Field(default_factory=RayOptions)
    a2a: RemoteSpec | None = Field(
        default=None, description="A remote agent (A2A): it has no model, tools or delegates."
    )
    workflow: str | Step | None = Field(
        default=None,
        description="Its work is code, not a model: an async function's import path "
        "(`package.module:function`, given a `agents.workflows.Workflow`), or a shape "
        "(sequence, parallel, loop, route). It calls the agents it names (and its `delegates`).",
    )
    input_schema: dict[str, Any] | str | None = Field(
        default=None,
        description="The structured input it takes (a delegation's or a run's `input`): an "
        "inline JSON Schema, or a pydantic model's import path. Checked on arrival.",
    )

    @field_validator("output_schema", "input_schema")
    @classmethod
    def _schemas(cls, value: Any) -> Any:
        return _schema_or_model(value)

    @field_validator("workflow", mode="before")
    @classmethod
    def _workflow(cls, value: Any) -> Any:
        if isinstance(value, str):
            if ":" not in value:
                raise ValueError(
                    f"{value!r} is not an import path (`package.module:function`); a shape is "
                    "a mapping (sequence, parallel, loop, route)"
                )
            return value
        return None if value is None else parse_step(value)

    @model_validator(mode="after")
    def _workflow_has_no_model(self) -> AgentSpec:
        if self.workflow is not None:
            fields = (
                "model", "instructions", "handoffs", "step_rules", "context", "output_mode",
                "output_retries", "a2a",
            )  # fmt: skip
            own = [k for k in fields if k in self.model_fields_set]
            if own:
                raise ValueError(
                    f"a workflow's work is its code (no model of its own): remove {', '.join(own)}"
                )
        return self

    @model_validator(mode="after")
    def _remote_is_a_leaf(self) -> AgentSpec:
        if self.a2a is not None:
            fields = (
                "model", "instructions", "tools", "delegates", "handoffs", "mcp", "files",
                "memory", "long_term_memory",
            )  # fmt: skip
            own = [k for k in fields if k in self.model_fields_set]
            if own:
                raise ValueError(
                    f"a remote agent (a2a) does its work elsewhere: remove {', '.join(own)}"
                )
        return self

    @field_validator("tools", mode="before")
    @classmethod
    def _tools_from_strings(cls, value: Any) -> Any:
        # `- pkg.mod:fn` is the common case; the mapping form adds a retry policy.
        if isinstance(value, list | tuple):
            return [{"function": v} if isinstance(v, str) else v for v in value]
        return value

    @property
    def answered_by(self) -> str:
        """What does its work: its model, its workflow, or the remote agent it stands for."""
        if self.a2a is not None:
            return f"a2a {self.a2a.url}"
        if isinstance(self.workflow, str):
            return f"workflow {self.workflow}"
        if self.workflow is not None:
            return f"workflow ({type(self.workflow).__name__.removesuffix('Step').lower()})"
        return self.model.name

    @property
    def callees(self) -> tuple[str, ...] | Literal["*"]:
        """The agents it may call: its `delegates`, and those its workflow's shape names."""
        if self.delegates == "*":
            return "*"
        named = (
            step_agents(self.workflow)
            if self.workflow and not isinstance(self.workflow, str)
            else []
        )
        return tuple(dict.fromkeys([*self.delegates, *named]))

    def credentials(self, environ: Mapping[str, str]) -> set[str]:
        """The values this agent's config makes credentials, never to be recorded.

        Its model's (by name and by position: `secret_values_in`), the variables its MCP
        servers and its A2A peer are given (`env:`, `headers:`), and the query values of their
        URLs.
        """
        found: set[str] = set()
        for model in self.model.every():
            found |= secret_values_in(model.params)
        names: list[str] = []
        for server in self.mcp:
            names += [*server.env, *server.headers.values()]
            found |= url_query_values(server.url or "")
        if self.a2a is not None:
            names += list(self.a2a.headers.values())
            found |= url_query_values(self.a2a.url)
        return found | {environ[name] for name in names if environ.get(name)}

    def card(self) -> AgentCard:
        """What other agents are told about this one (in their delegation tools)."""
        return AgentCard(
            name=self.name,
            description=self.description,
            capabilities=self.capabilities,
            confirm=self.confirm,
            accepts=self.input_json_schema(),
            tool=self.tool,
        )

    def input_json_schema(self) -> dict[str, Any] | None:
        """Its `input_schema` as JSON Schema (a pydantic model's, imported)."""
        if isinstance(self.input_schema, str):
            from agents.core.imports import import_object

            model = import_object(self.input_schema)
            if not (isinstance(model, type) and issubclass(model, BaseModel)):
                raise ValueError(f"{self.input_schema} is not a pydantic model")
            schema: dict[str, Any] = model.model_json_schema()
            return schema
        return self.input_schema
