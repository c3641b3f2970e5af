"""What a tool's author writes of its parameters (a Google, NumPy or Sphinx docstring, or
`Annotated[T, "text"]`) reaches the model: it is in the tool schema our provider receives over
HTTP, and `baton check` lists it, warning of a parameter described nowhere."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import Field
from typer.testing import CliRunner

from agents.core.messages import Delegation, RunContext, RunStatus
from agents.core.spec import AgentSpec, ModelSpec
from agents.models.client import LiteLLMClient
from agents.runtime.agent import AgentRuntime
from agents.tools.base import load_function_tool
from tests.openai_server import FakeOpenAI


def book_flight(origin: str, destination: str, seats: int = 1) -> str:
    """Book a flight.

    Args:
        origin: IATA code of the departure airport,
            for example "LHR".
        destination: IATA code of the arrival airport.
        seats: how many seats to book.
    """
    return f"booked {seats} {origin}-{destination}"


def convert(amount: float, currency: str) -> str:
    """Convert an amount to euros.

    Parameters
    ----------
    amount : float
        The sum to convert.
    currency : str
        Its ISO 4217 code.
    """
    return f"{amount} {currency}"


def weather(city: str, unit: str = "C") -> str:
    """The weather in a city.

    :param city: the city's name in English.
    :param unit: C or F.
    """
    return f"sunny in {city}"


def lookup(
    user: Annotated[str, "the user's id, as the CRM writes it"],
    field: Annotated[str, Field(description="which field to read")],
    limit: int = 5,
) -> str:
    """Read a user's record (`limit` is described nowhere)."""
    return f"{user}.{field}"


HERE = "tests.agents.tools.test_descriptions"


@pytest.mark.anyio
async def test_docstring_and_annotated_descriptions_reach_the_provider_in_the_tool_schema() -> None:
    fake = FakeOpenAI("book_flight", {"origin": "LHR", "destination": "CDG"})
    tools = [
        load_function_tool(f"{HERE}:{name}")
        for name in ("book_flight", "convert", "weather", "lookup")
    ]
    model = ModelSpec(
        name="openai/gpt-4o-mini", params={"api_base": fake.base_url, "api_key": "sk-test"}
    )
    runtime = AgentRuntime(AgentSpec(name="a"), LiteLLMClient(model), tools)
    ctx = RunContext(run_id="r", chain=("a",), deadline=time.time() + 30)
    try:
        result = await runtime.invoke(Delegation(task="fly me", context=ctx))
    finally:
        fake.close()
    assert result.status == RunStatus.SUCCEEDED, result.error
    sent = {
        t["function"]["name"]: {
            name: p.get("description")
            for name, p in t["function"]["parameters"]["properties"].items()
        }
        for t in fake.requests[0]["body"]["tools"]
    }
    assert sent["book_flight"] == {
        "origin": 'IATA code of the departure airport, for example "LHR".',
        "destination": "IATA code of the arrival airport.",
        "seats": "how many seats to book.",
    }
    assert sent["convert"] == {"amount": "The sum to convert.", "currency": "Its ISO 4217 code."}
    assert sent["weather"] == {"city": "the city's name in English.", "unit": "C or F."}
    assert sent["lookup"] == {
        "user": "the user's id, as the CRM writes it",
        "field": "which field to read",
        "limit": None,
    }
    # The description of the tool itself stays the docstring's first paragraph.
    described = {
        t["function"]["name"]: t["function"]["description"]
        for t in fake.requests[0]["body"]["tools"]
    }
    assert described["book_flight"] == "Book a flight."


def test_baton_check_lists_each_parameter_and_warns_of_one_described_nowhere(
    tmp_path: Path,
) -> None:
    from orchestrator.cli import app

    team = tmp_path / "team.yaml"
    team.write_text(
        "name: travel\nentry: agent\nagents:\n"
        "  - name: agent\n    model: {name: baton/offline}\n    tools:\n"
        f"      - {HERE}:book_flight\n      - {HERE}:lookup\n"
        "  - name: local\n    model: {name: ollama/my-own-model}\n"
        "    output_schema: {type: object}\n"
    )
    done = CliRunner().invoke(app, ["check", str(team), "--offline"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    assert (
        'tool book_flight(origin: IATA code of the departure airport, for example "LHR"., '
        "destination: IATA code of the arrival airport., seats: how many seats to book.)"
    ) in done.output
    assert (
        "tool lookup(user: the user's id, as the CRM writes it, "
        "field: which field to read, limit: -)" in done.output
    )
    assert (
        f"warning: tool lookup ({HERE}:lookup): parameter 'limit' has no description" in done.output
    )
    warnings = [line for line in done.output.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, warnings  # (book_flight's parameters are all described)
    # Per agent, whether its model is asked for JSON natively or in the prompt.
    assert (
        "local: answers JSON: an inline JSON Schema (auto mode: in the prompt: litellm knows no "
        "JSON Schema support of ollama/my-own-model, 2 retries)"
    ) in done.output
