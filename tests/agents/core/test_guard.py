from __future__ import annotations

import pickle
import time

import pytest

from agents.core.errors import DelegationRefused
from agents.core.guard import check_delegation
from agents.core.limits import Limits
from agents.core.messages import RunContext


def _ctx(
    *chain: str, max_depth: int = 5, deadline_in: float = 60.0, budget: int | None = None
) -> RunContext:
    return RunContext(
        run_id="r1",
        chain=chain,
        deadline=time.time() + deadline_in,
        limits=Limits(max_depth=max_depth, token_budget=budget),
    )


def _refusal(**kwargs) -> DelegationRefused:  # type: ignore[no-untyped-def]
    defaults = {"known": True, "allowed": True, "tokens_left": None}
    with pytest.raises(DelegationRefused) as info:
        check_delegation(**{**defaults, **kwargs})
    return info.value


def test_delegation_beyond_max_depth_is_refused_with_the_chain() -> None:
    refused = _refusal(caller="e", target="f", ctx=_ctx("a", "b", "c", "d", "e"))
    assert refused.reason == "depth"
    assert refused.message == "depth limit 5 reached: a -> b -> c -> d -> e"
    assert refused.limit == 5


def test_delegation_back_onto_the_chain_is_refused_as_a_cycle() -> None:
    refused = _refusal(caller="c", target="a", ctx=_ctx("a", "b", "c"))
    assert (refused.reason, refused.message) == ("cycle", "cycle refused: a -> b -> c -> a")


def test_delegation_outside_the_topology_is_refused() -> None:
    refused = _refusal(caller="a", target="b", allowed=False, ctx=_ctx("a"))
    assert refused.reason == "not_allowed"


def test_spent_budget_and_passed_deadline_refuse_before_dispatch() -> None:
    assert (
        _refusal(caller="a", target="b", ctx=_ctx("a", budget=100), tokens_left=0).reason
        == "budget"
    )
    assert _refusal(caller="a", target="b", ctx=_ctx("a", deadline_in=-1)).reason == "deadline"


def test_an_allowed_delegation_within_limits_passes() -> None:
    check_delegation(
        caller="a", target="b", known=True, allowed=True, ctx=_ctx("a"), tokens_left=10
    )


def test_refusals_survive_pickling_across_processes() -> None:
    refused = _refusal(caller="c", target="a", ctx=_ctx("a", "b", "c"))
    copy = pickle.loads(pickle.dumps(refused))
    assert (copy.reason, copy.message, copy.chain) == ("cycle", refused.message, ("a", "b", "c"))
