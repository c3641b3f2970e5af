"""Tools an agent can call: the protocol, and Python functions as tools.

A function tool's JSON schema comes from its type hints (through pydantic), its description
from its docstring; arguments from the model are validated against the same schema. A function
that takes an `idempotency_key` parameter gets `run_id:call_id` there (the model never sees it):
the same key on every retry of one call.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Protocol, TypeVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from agents.core.errors import ToolImportError
from agents.core.imports import ImportProblem, import_object
from agents.core.state import State, StateChange

if TYPE_CHECKING:
    from agents.core.messages import AgentResult, RunContext
    from agents.core.spec import ToolRef

__all__ = [
    "IDEMPOTENCY_KEY",
    "FunctionTool",
    "Tool",
    "ToolCallContext",
    "ToolContext",
    "ToolOutput",
    "idempotent",
    "load_function_tool",
    "load_tool",
]

IDEMPOTENCY_KEY = "idempotency_key"
_IDEMPOTENT_MARK = "__baton_idempotent__"
F = TypeVar("F", bound=Callable[..., Any])


def idempotent(fn: F) -> F:
    """Declare a tool function safe to run again with the same arguments.

    Baton may then retry it, and need not record it before it runs.
    """
    setattr(fn, _IDEMPOTENT_MARK, True)
    return fn


@dataclass(frozen=True)
class ToolCallContext:
    """Who is calling a tool, within which run."""

    run: RunContext
    caller: str
    call_id: str
    child_invocation: str | None = None  # the id a delegation made by this call gives its callee
    replay: bool = False  # the call may have been made before: its callee reads its record
    history: list[dict[str, Any]] | None = None  # the conversation so far (for a hand-off)
    step: int = 0  # the calling turn's model step that asked for the call
    # The steps of the calling turn that handed work to each agent (None: not counted).
    visits: dict[str, set[int]] | None = None
    state: State | None = None  # the shared state as this call sees it (its writes kept)
    invocation: str = ""  # the calling invocation's id

    @property
    def idempotency_key(self) -> str:
        """The same for every attempt at this one call."""
        return f"{self.run.run_id}:{self.call_id}"

    def tool_context(self) -> ToolContext:
        """What a function tool that asks for it (a `ToolContext` parameter) is given."""
        return ToolContext(
            run_id=self.run.run_id,
            thread_id=self.run.thread_id,
            invocation=self.invocation,
            agent=self.caller,
            call_id=self.call_id,
            state=self.state or State({}, self.run.state_spec, self.caller),
        )


@dataclass(frozen=True)
class ToolContext:
    """Where a function tool is called, for one that asks (a parameter typed `ToolContext`).

    The parameter is hidden from the model. `state` reads the run's shared state and writes it
    (`state.set("city", "Paris")`); a write its schema refuses raises `StateError`, which the
    model sees as the tool's error, naming the key.
    """

    run_id: str
    thread_id: str | None
    invocation: str
    agent: str
    call_id: str
    state: State

    @property
    def idempotency_key(self) -> str:
        """The same for every attempt at this one call."""
        return f"{self.run_id}:{self.call_id}"


@dataclass
class ToolOutput:
    """A tool's result as the model will read it, plus the sub-run for delegations."""

    content: str
    is_error: bool = False
    child: AgentResult | None = None
    handoff: bool = False  # the child took the conversation over: its answer is the caller's
    # Control goes back up the chain to this agent: the calling turn ends with `content`.
    hand_back: str | None = None
    changes: list[StateChange] = field(default_factory=list)  # its writes to the shared state


class Tool(Protocol):
    """Anything a model can call: a name, a description and a JSON schema for its arguments."""

    @property
    def name(self) -> str:
        """The name models call the tool by."""

    @property
    def description(self) -> str:
        """What the tool does, for the model."""

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON Schema of the tool's arguments."""

    async def call(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolOutput:
        """Call the tool with validated arguments; errors are returned, not raised."""


def _to_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)


@dataclass
class FunctionTool:
    """A Python callable (sync or async) exposed to models as a tool."""

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    _args_model: type[BaseModel] = field(repr=False, default=BaseModel)
    idempotent: bool = False
    retries: int = 0
    confirm: bool = False  # each call waits for a person's approval
    _takes_key: bool = field(repr=False, default=False)
    _context_param: str | None = field(repr=False, default=None)  # given a `ToolContext`

    @classmethod
    def from_callable(cls, fn: Callable[..., Any], name: str | None = None) -> FunctionTool:
        """A tool for `fn`: its schema from the type hints, its description from the docstring."""
        signature = inspect.signature(fn)
        fields: dict[str, Any] = {}
        takes_key = IDEMPOTENCY_KEY in signature.parameters
        for param in signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            if param.name == IDEMPOTENCY_KEY:
                continue  # Baton's to give, not the model's
            annotation = Any if param.annotation is inspect.Parameter.empty else param.annotation
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (annotation, default)
        # Resolve string annotations (`from __future__ import annotations`) in fn's module.
        hints = inspect.get_annotations(fn, eval_str=True)
        context_param = next((n for n in fields if hints.get(n) is ToolContext), None)
        if context_param is not None:
            del fields[context_param]  # Baton's to give, not the model's
        doc = inspect.getdoc(fn) or ""
        described = _documented(doc)
        for pname, (annotation, default) in list(fields.items()):
            hint = hints.get(pname, annotation)
            fields[pname] = (_with_description(hint, described.get(pname)), default)
        args_model = create_model(
            f"{fn.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields
        )
        schema = args_model.model_json_schema()
        schema.pop("title", None)
        description = doc.split("\n\n")[0].replace("\n", " ").strip() or fn.__name__
        return cls(
            name=name or fn.__name__,
            description=description,
            parameters=schema,
            fn=fn,
            _args_model=args_model,
            idempotent=bool(getattr(fn, _IDEMPOTENT_MARK, False)),
            _takes_key=takes_key,
            _context_param=context_param,
        )

    async def call(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolOutput:
        """Validate the arguments against the schema and call the function."""
        try:
            parsed = self._args_model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            return ToolOutput(f"invalid arguments for {self.name}: {problems}", is_error=True)
        kwargs = {name: getattr(parsed, name) for name in type(parsed).model_fields}
        if self._takes_key:
            kwargs[IDEMPOTENCY_KEY] = ctx.idempotency_key
        if self._context_param is not None:
            kwargs[self._context_param] = ctx.tool_context()
        if inspect.iscoroutinefunction(self.fn):
            result = await self.fn(**kwargs)
        else:
            # Sync tools may block (CPU or I/O); keep the actor's event loop free.
            result = await asyncio.to_thread(self.fn, **kwargs)
        return ToolOutput(_to_text(result))


def _documented(doc: str) -> dict[str, str]:
    """Each parameter's description in a Google, NumPy or Sphinx docstring (`Args:` ...)."""
    import docstring_parser

    try:
        parsed = docstring_parser.parse(doc)
    except docstring_parser.ParseError:
        return {}
    return {p.arg_name: " ".join(p.description.split()) for p in parsed.params if p.description}


def _with_description(hint: Any, documented: str | None) -> Any:
    """The hint, with the parameter's description where the model's schema reads it.

    `Annotated[T, Field(description=...)]` says it already; `Annotated[T, "text"]` (as
    LangChain writes it) and the docstring's words are made one.
    """
    said = documented
    if get_origin(hint) is Annotated:
        base, *extras = get_args(hint)
        if any(isinstance(e, FieldInfo) and e.description for e in extras):
            return hint
        said = next((e for e in extras if isinstance(e, str)), None) or documented
        kept = [e for e in extras if not isinstance(e, str)]
        hint = Annotated[(base, *kept)] if kept else base
    if said is None:
        return hint
    return Annotated[hint, Field(description=said)]


def parameter_descriptions(tool: FunctionTool) -> dict[str, str | None]:
    """Each parameter of a tool, with what the model is told of it (None: nothing)."""
    properties = tool.parameters.get("properties", {})
    return {name: schema.get("description") for name, schema in properties.items()}


def load_function_tool(path: str) -> FunctionTool:
    """Import `package.module:function` (or `package.module.function`) as a tool."""
    try:
        fn = import_object(path)
    except ImportProblem as exc:
        raise ToolImportError(path, exc.reason) from None
    if not callable(fn):
        name = path.partition(":")[2] or path.rpartition(".")[2]
        raise ToolImportError(path, f"{name!r} is not callable")
    try:
        return FunctionTool.from_callable(fn)
    except Exception as exc:  # a hint pydantic cannot turn into a schema
        raise ToolImportError(path, f"cannot derive a JSON schema: {exc}") from exc


def load_tool(ref: ToolRef) -> FunctionTool:
    """The function tool `ref` names, with its run policy (idempotence, retries)."""
    tool = load_function_tool(ref.function)
    tool.idempotent = tool.idempotent if ref.idempotent is None else ref.idempotent
    tool.retries = ref.retries if tool.idempotent else 0
    tool.confirm = ref.confirm
    return tool
