"""The tool loop on its own: no Ray, real litellm with the built-in scripted and offline models."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agents.core.limits import Limits
from agents.core.messages import AgentResult, Delegation, RunContext, RunStatus
from agents.core.spec import AgentSpec, ModelSpec, Timeouts
from agents.models.base import ModelReply
from agents.runtime.agent import AgentRuntime
from agents.tools.base import FunctionTool, load_function_tool
from agents.tools.delegate import DelegateTool
from tests import testkit
from tests.recording import RecordingClient

pytestmark = pytest.mark.anyio


def scripted(*replies: dict[str, Any], repeat_last: bool = False, **params: Any) -> RecordingClient:
    return RecordingClient(
        ModelSpec(
            name="baton/scripted",
            params={"replies": list(replies), "repeat_last": repeat_last, **params},
        )
    )


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in pairs]}


def delegation(task: str = "do it", chain: tuple[str, ...] = ("a",), **limits: Any) -> Delegation:
    lim = Limits(**limits)
    return Delegation(
        task=task,
        context=RunContext(
            run_id="run-1", chain=chain, deadline=time.time() + lim.deadline_s, limits=lim
        ),
    )


def tool_messages(client: RecordingClient) -> list[str]:
    return [m["content"] for m in client.seen[-1] if m["role"] == "tool"]


def spec(name: str = "a", **kwargs: Any) -> AgentSpec:
    return AgentSpec(name=name, **kwargs)


async def test_several_tool_calls_in_one_step_run_concurrently() -> None:
    slow = load_function_tool("tests.testkit:slow_step")
    client = scripted(
        calls(
            ("slow_step", {"seconds": 0.3}),
            ("slow_step", {"seconds": 0.3}),
            ("slow_step", {"seconds": 0.3}),
        ),
        {"content": "done"},
    )
    result = await AgentRuntime(spec(), client, [slow]).invoke(delegation())
    assert result.status == RunStatus.SUCCEEDED and result.output == "done", result.error
    spans = [tuple(map(float, t.split("-"))) for t in tool_messages(client)]
    assert len(spans) == 3
    assert max(s for s, _ in spans) < min(e for _, e in spans)  # all three overlapped
    wall = max(e for _, e in spans) - min(s for s, _ in spans)
    assert wall < 0.6, f"three 0.3 s tools took {wall:.2f}s: not concurrent"


async def test_parallel_tool_calls_are_bounded_by_max_parallel_tools() -> None:
    slow = load_function_tool("tests.testkit:slow_step")
    client = scripted(
        calls(("slow_step", {"seconds": 0.2}), ("slow_step", {"seconds": 0.2})), {"content": "done"}
    )
    await AgentRuntime(spec(), client, [slow]).invoke(delegation(max_parallel_tools=1))
    first, second = (tuple(map(float, t.split("-"))) for t in tool_messages(client))
    assert second[0] >= first[1] or first[0] >= second[1]  # one after the other


async def test_tool_errors_and_timeouts_go_back_to_the_model_as_tool_results() -> None:
    slow = load_function_tool("tests.testkit:slow_step")
    calc = load_function_tool("configs.tools:calculate")
    client = scripted(
        calls(
            ("slow_step", {"seconds": 5}),
            ("calculate", {"expression": "1/0"}),
            ("nonexistent", {}),
            ("calculate", {"expr": "1"}),
        ),
        {"content": "recovered"},
    )
    agent = spec(timeouts=Timeouts(tool=0.2))
    result = await AgentRuntime(agent, client, [slow, calc]).invoke(delegation())
    assert result.status == RunStatus.SUCCEEDED and result.output == "recovered"
    seen = tool_messages(client)
    assert seen[0] == "error: tool slow_step timed out after 0.2s"
    assert seen[1] == "error: ZeroDivisionError: division by zero"
    assert seen[2] == "error: unknown tool 'nonexistent'"
    assert "invalid arguments for calculate" in seen[3]


async def test_a_model_that_never_stops_calling_tools_ends_at_max_steps() -> None:
    stamp = load_function_tool("tests.testkit:stamp")
    client = scripted(calls(("stamp", {"text": "again"})), repeat_last=True)
    result = await AgentRuntime(spec(max_steps=4), client, [stamp]).invoke(delegation())
    assert result.status == RunStatus.LIMIT_EXCEEDED
    assert result.steps == 4
    assert result.error == "max_steps 4 reached without a final answer"
    assert result.usage.model_calls == 4


async def test_the_run_deadline_stops_a_slow_model() -> None:
    stamp = load_function_tool("tests.testkit:stamp")
    client = scripted(calls(("stamp", {"text": "x"})), repeat_last=True, latency_ms=100)
    started = time.perf_counter()
    result = await AgentRuntime(spec(max_steps=1000), client, [stamp]).invoke(
        delegation(deadline_s=0.5)
    )
    assert result.status == RunStatus.LIMIT_EXCEEDED
    assert "deadline" in (result.error or "")
    assert time.perf_counter() - started < 1.0


@dataclass
class EarlyTimer(RecordingClient):
    """A model call whose wait ends `early` seconds before the run's deadline (wall clock)."""

    deadline: float = 0.0
    early: float = 0.002

    async def complete(self, *args: Any, **kwargs: Any) -> ModelReply:
        await asyncio.sleep(max(self.deadline - time.time() - self.early, 0.0))
        raise TimeoutError


@pytest.mark.parametrize(
    ("deadline_s", "early", "status"),
    [(0.3, 0.002, RunStatus.LIMIT_EXCEEDED), (100.0, 99.0, RunStatus.FAILED)],
    ids=["the deadline's timer a moment early", "a time-out with time left"],
)
async def test_a_model_wait_the_deadline_bounds_ends_the_run_at_the_deadline(
    deadline_s: float, early: float, status: RunStatus
) -> None:
    # uvloop's timers tick in milliseconds: a wait bounded by the deadline may end a moment
    # before it by the wall clock. That is the deadline all the same; a time-out long before
    # it is the model's.
    task = delegation(deadline_s=deadline_s)
    model = ModelSpec(name="baton/scripted", params={"replies": [{"content": "x"}]})
    client = EarlyTimer(model, deadline=task.context.deadline, early=early)
    result = await AgentRuntime(spec(), client, []).invoke(task)
    assert result.status == status, result.error


@dataclass
class InProcessDispatcher:
    """Runs delegations on in-process runtimes: the runtime's contract without Ray."""

    runtimes: dict[str, AgentRuntime] = field(default_factory=dict)

    async def dispatch(self, target: str, delegation: Delegation) -> AgentResult:
        return await self.runtimes[target].invoke(delegation)


def offline_team(
    dispatcher: InProcessDispatcher, edges: dict[str, list[str]], descriptions: dict[str, str]
) -> None:
    specs = {n: AgentSpec(name=n, description=d) for n, d in descriptions.items()}
    for name, agent in specs.items():
        tools = [
            DelegateTool(name, specs[t].card(), allowed=True, dispatcher=dispatcher)
            for t in edges.get(name, [])
        ]
        dispatcher.runtimes[name] = AgentRuntime(agent, RecordingClient(ModelSpec()), tools)


async def test_the_offline_model_delegates_to_matching_agents_and_is_handed_control_back() -> None:
    dispatcher = InProcessDispatcher()
    # a -> b -> a at run time (config allow_cycles): b naming a hands control back to it.
    offline_team(
        dispatcher,
        {"a": ["b"], "b": ["a"]},
        {"a": "handles billing questions", "b": "handles billing refunds"},
    )
    result = await dispatcher.runtimes["a"].invoke(delegation("refund this billing charge"))
    assert result.status == RunStatus.SUCCEEDED
    assert [c.agent for c in result.children] == ["b"]
    child = result.children[0]
    assert child.refusals == [] and child.children == []  # no new invocation of a
    assert child.handed_back_to == "a" and child.status == RunStatus.SUCCEEDED
    # a's model was told, as the delegation's result, that control is back with it.
    client = dispatcher.runtimes["a"].model
    assert isinstance(client, RecordingClient)
    [told] = tool_messages(client)
    assert told.startswith("b handed control back to you: ")


async def test_a_delegation_the_topology_forbids_is_refused_not_dispatched() -> None:
    dispatcher = InProcessDispatcher()
    offline_team(dispatcher, {}, {"b": "anything"})
    forbidden = DelegateTool("a", AgentSpec(name="b").card(), allowed=False, dispatcher=dispatcher)
    client = scripted(calls((forbidden.name, {"task": "x"})), {"content": "ok"})
    result = await AgentRuntime(
        spec(), client, [], hidden_tools={forbidden.name: forbidden}
    ).invoke(delegation())
    assert [r.reason for r in result.refusals] == ["not_allowed"]
    assert result.children == []


def test_function_tools_expose_only_required_arguments_to_the_offline_model() -> None:
    tool = FunctionTool.from_callable(lambda text, n=1: text)
    assert tool.parameters["required"] == ["text"]


# A cancellation that comes in the very turn of the event loop in which a step ends (a run
# cancelled just as its model answered, or as its tool returned) still stops the invocation.


@dataclass
class CancelledOnReply(RecordingClient):
    """The built-in model through litellm; its reply comes with a cancellation of `victim`."""

    victim: asyncio.Future[Any] | None = None

    async def complete(self, *args: Any, **kwargs: Any) -> ModelReply:
        reply = await super().complete(*args, **kwargs)
        assert self.victim is not None
        self.victim.cancel()  # in this turn, as the reply is handed back
        return reply


def touch_replies(marker: Path, *first: dict[str, Any]) -> list[dict[str, Any]]:
    touch = ("slow_touch", {"path": str(marker), "seconds": 0.2})
    return [*first, calls(touch), {"content": "all done"}]


@pytest.fixture
def victims() -> Iterator[list[asyncio.Future[object]]]:
    yield testkit.victims
    testkit.victims.clear()


async def test_a_run_cancelled_as_its_model_answers_stops_there(tmp_path: Path) -> None:
    marker = tmp_path / "touched"
    client = CancelledOnReply(
        ModelSpec(name="baton/scripted", params={"replies": touch_replies(marker)})
    )
    touch = load_function_tool("tests.testkit:slow_touch")
    job = asyncio.ensure_future(AgentRuntime(spec(), client, [touch]).invoke(delegation()))
    client.victim = job
    with pytest.raises(asyncio.CancelledError):
        await job
    assert not marker.exists()  # the tool the reply asked for never finished
    assert len(client.seen) == 1


# Cancelled within litellm's `acompletion`, between its set-up and the request, as any call can
# be: litellm drops the request's coroutine unawaited, and Python says so as it is collected.
@pytest.mark.filterwarnings("ignore:coroutine 'BuiltinModels.acompletion' was never awaited")
async def test_a_run_cancelled_as_its_tool_returns_stops_there(
    tmp_path: Path, victims: list[asyncio.Future[object]]
) -> None:
    marker = tmp_path / "touched"
    client = scripted(*touch_replies(marker, calls(("answer_as_cancelled", {}))))
    tools = [
        load_function_tool(f"tests.testkit:{n}") for n in ("answer_as_cancelled", "slow_touch")
    ]
    job = asyncio.ensure_future(AgentRuntime(spec(), client, tools).invoke(delegation()))
    victims.append(job)
    with pytest.raises(asyncio.CancelledError):
        await job
    # It stopped at its next step (the model's call, which never answered): no tool after it.
    assert not marker.with_suffix(".started").exists()
