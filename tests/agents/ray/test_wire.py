"""What crosses Ray between Baton's processes: a host's reply, its subtree sealed where made."""

from __future__ import annotations

import pytest

from agents.core.messages import AgentResult, RunStatus, Usage
from agents.ray.wire import Arrived, HostCall, HostReply, open_tree, seal, unseal


def _result(agent: str, *children: AgentResult) -> AgentResult:
    return AgentResult(
        agent=agent,
        status=RunStatus.SUCCEEDED,
        output=f"{agent} done",
        usage=Usage(input_tokens=10, output_tokens=1, model_calls=1),
        children=list(children),
    )


def test_a_subtree_crosses_each_process_as_the_bytes_it_was_sealed_in() -> None:
    # c (with its own callee d, in c's process) answers b, b answers a, a answers the
    # orchestrator: three processes, each pickling only the nodes it made.
    from_c = HostReply.of(_result("c", _result("d")), None, {"pc": 3})
    at_b = unseal(seal(from_c), HostReply)
    child = Arrived.of(at_b)  # what b's runtime holds: c's result, its subtree still sealed
    assert (child.agent, child.output, child.children) == ("c", "c done", [])

    from_b = HostReply.of(_result("b", child), None, {"pb": 2, "pc": 3})
    assert from_c.below in from_b.below  # c's subtree, as c sealed it
    from_a = HostReply.of(_result("a", Arrived.of(unseal(seal(from_b), HostReply))), None, {})
    assert from_c.below in from_a.below and from_b.below in from_a.below

    tree = open_tree(unseal(seal(from_a), HostReply))  # the orchestrator reads it all
    assert [node.agent for node in tree.walk()] == ["a", "b", "c", "d"]
    assert not any(isinstance(node, Arrived) for node in tree.walk())
    assert tree.total_usage().model_calls == 4


def test_a_reply_carries_its_result_without_transport_in_it() -> None:
    reply = HostReply.of(_result("a", _result("b")), None, {"pa": 5})
    assert reply.result.children == [] and reply.sent == {"pa": 5}
    dumped = open_tree(reply).model_dump()
    # (The shared state's fields travel pickled, never in the JSON kept of a run's tree.)
    kept = {name for name, field in AgentResult.model_fields.items() if not field.exclude}
    assert kept == set(AgentResult.model_fields) - {"state", "state_changes"}
    assert set(dumped) == kept
    assert not {"spans", "handed_over", "events_sent"} & set(AgentResult.model_fields)


def test_a_sealed_call_is_checked_to_be_what_the_receiver_expects() -> None:
    sealed = seal(HostReply.of(_result("a"), None, {}))
    with pytest.raises(TypeError, match="expected a sealed HostCall, got HostReply"):
        unseal(sealed, HostCall)
