"""The step log's keys, and what a fork from a step keeps of an invocation's record."""

from __future__ import annotations

from agents.core.steps import approval_key, kept_by_fork, model_key, started_key, tool_key

STEPS = [
    model_key(1),
    tool_key(1, "a"),
    model_key(2),
    tool_key(2, "call_1"),
    started_key(2, "call_1"),
    approval_key(2, "call_1"),
    tool_key(2, "call_10"),
    tool_key(2, "call_2"),
    model_key(3),
    tool_key(3, "call_1"),
]


def test_a_fork_from_a_model_step_keeps_the_steps_before_it() -> None:
    assert [k for k in STEPS if kept_by_fork(k, model_key(2))] == [model_key(1), tool_key(1, "a")]


def test_a_fork_from_a_tool_call_keeps_the_reply_that_asked_for_it_and_its_siblings() -> None:
    kept = [k for k in STEPS if kept_by_fork(k, tool_key(2, "call_1"))]
    # Not the call itself (its result, its start, its approval), nor what came after.
    assert kept == [
        model_key(1),
        tool_key(1, "a"),
        model_key(2),
        tool_key(2, "call_10"),
        tool_key(2, "call_2"),
    ]
