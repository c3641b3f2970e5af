"""Workflows for the tests (`workflow: tests.flows:NAME` in their teams)."""

from __future__ import annotations

import asyncio

from agents.workflows import Workflow


async def one_then_two_at_once(flow: Workflow) -> str:
    """A call, then two at once: the diagram draws one arrow, then a `par`."""
    first = await flow.call("analyst", "calculate 6 * 7")
    second, third = await asyncio.gather(
        flow.call("analyst", "calculate 2 + 3"), flow.call("analyst", "calculate 10 - 1")
    )
    return " | ".join(a.text.splitlines()[-1] for a in (first, second, third))


async def three_in_a_row(flow: Workflow) -> str:
    """Three alike calls one after another: a `loop` in the diagram, never a `par`."""
    for n in range(3):
        await flow.call("analyst", f"calculate {n} + 1")
    return "done"


async def structured(flow: Workflow) -> dict[str, object]:
    """Typed data in and out: the profile's input, a JSON answer."""
    card = await flow.call("profiler", "profile", input={"name": flow.input["name"], "age": 30})
    return {"card": card.data, "asked_by": flow.task}


async def misfit_input(flow: Workflow) -> str:
    """Gives the profiler input its schema refuses: nothing is called."""
    await flow.call("profiler", "profile", input={"name": 5})
    return "not reached"


async def raises(flow: Workflow) -> str:
    """Fails in its own code after a call."""
    await flow.call("analyst", "calculate 1 + 1")
    raise RuntimeError("the ledger of parcels does not add up")


async def calls_a_stranger(flow: Workflow) -> str:
    """Calls an agent it does not list."""
    await flow.call("profiler", "who?")
    return "not reached"


async def counted(flow: Workflow) -> str:
    """Four calls in order (a resumed run must make the same ones)."""
    return await _in_order(flow, ["first", "second", "third", "fourth"])


async def counted_swapped(flow: Workflow) -> str:
    """`counted` changed: its first two calls swapped (a resumed run of `counted` refuses it)."""
    return await _in_order(flow, ["second", "first", "third", "fourth"])


async def _in_order(flow: Workflow, order: list[str]) -> str:
    answers = [await flow.call("worker", f"step {name}") for name in order]
    return "; ".join(a.text.splitlines()[0] for a in answers)


async def card_then_stamp(flow: Workflow) -> dict[str, object]:
    """A card for the input's person, then the clerk's stamp (its call waits for approval)."""
    card = await flow.call("profiler", "make a card", input={"name": flow.input["name"], "age": 7})
    stamped = await flow.call("clerk", f"stamp the card of {flow.input['name']}")
    return {"card": card.data, "stamped": stamped.text}


async def two_naps_at_once(flow: Workflow) -> str:
    """Two calls of the sleeper at once (each a 3 s tool call)."""
    naps = await asyncio.gather(flow.call("sleeper", "nap"), flow.call("sleeper", "nap"))
    return " ".join(n.text for n in naps)


async def saves_its_answers(flow: Workflow) -> str:
    """Saves the scout's answer in the shared state, writes a key itself, and reads both."""
    await flow.call("scout", "pick a city", save_as="city")
    flow.state.set("seen", ["the scout"])
    return f"{flow.state.get('city')} after {flow.state.get('seen')}"
