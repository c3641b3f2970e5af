"""The delegation guard: checked before a delegation is dispatched, never after.

A refusal is returned to the calling model as a structured tool error; it never reaches Ray.
"""

from __future__ import annotations

from agents.core.errors import DelegationRefused
from agents.core.messages import RunContext

__all__ = ["check_delegation"]


def _path(chain: tuple[str, ...], *more: str) -> str:
    return " -> ".join((*chain, *more))


def check_delegation(
    *,
    caller: str | None,
    target: str,
    known: bool,
    allowed: bool,
    ctx: RunContext,
    tokens_left: int | None,
    visits: int | None = None,
) -> None:
    """Raise `DelegationRefused` if `caller` may not hand a task to `target` now.

    Args:
        caller: the delegating agent (None for the orchestrator's entry call).
        target: the agent asked to do the work.
        known: whether `target` exists in the system.
        allowed: whether the topology lets `caller` delegate to `target`.
        ctx: the caller's run context (its chain ends with `caller`).
        tokens_left: the run's remaining token budget, None when there is no budget.
        visits: in how many steps the caller's turn has handed work to `target` already
            (None: not counted, as for a workflow's calls).

    An agent up the chain is not refused here when a model names it: that is a hand-back
    (`agents.tools.delegate`). A workflow's code calling one is a cycle.
    """
    chain = ctx.chain

    def refuse(reason, message: str, limit: float | None = None) -> None:  # type: ignore[no-untyped-def]
        raise DelegationRefused(
            reason, message, caller=caller, target=target, chain=chain, limit=limit
        )

    if not known:
        refuse("unknown_agent", f"no agent named {target!r}")
    if not allowed:
        refuse("not_allowed", f"{caller} may not delegate to {target}")
    if target in chain:
        refuse("cycle", f"cycle refused: {_path(chain, target)}")
    if visits is not None and visits >= ctx.limits.max_visits:
        refuse(
            "visits",
            f"visit limit: {caller} handed work to {target} in {visits} steps of one turn "
            f"(max_visits {ctx.limits.max_visits})",
            ctx.limits.max_visits,
        )
    if len(chain) >= ctx.limits.max_depth:
        refuse(
            "depth",
            f"depth limit {ctx.limits.max_depth} reached: {_path(chain)}",
            ctx.limits.max_depth,
        )
    if ctx.time_left() <= 0:
        refuse("deadline", f"run deadline passed; {target} was not called", ctx.limits.deadline_s)
    if tokens_left is not None and tokens_left <= 0:
        refuse(
            "budget",
            f"token budget {ctx.limits.token_budget} spent; {target} was not called",
            ctx.limits.token_budget,
        )
