"""litellm's default tokenizer (tiktoken's cl100k table, 0.12-0.3 s of CPU to load) waits for a
use: a process's first model calls no longer pay for it, and counting tokens still works."""

from __future__ import annotations

import subprocess
import sys

import tiktoken

from agents.models.tokenizer import TokenizerOnUse

# A fresh process, as an agent host is: two calls of the built-in model (a tool call, then the
# answer), as a host's warm-up makes them; then a count of tokens, which needs the table.
_PROBE = """
import asyncio, sys
import tiktoken.registry
from agents.core.spec import ModelSpec
from agents.models.base import tool_schema
from agents.models.client import LiteLLMClient

client = LiteLLMClient(ModelSpec(name="baton/offline"))
tool = tool_schema("calculate", "Evaluate arithmetic.", {"expression": {"type": "string"}})
messages = [{"role": "user", "content": "calculate 6 * 7"}]

async def calls() -> None:
    reply = await client.complete(messages, [tool])
    assert reply.tool_calls, reply
    results = [{"role": "tool", "tool_call_id": c.id, "content": "42"} for c in reply.tool_calls]
    answer = await client.complete([*messages, reply.as_message(), *results], [tool])
    assert answer.content and answer.input_tokens > 0, answer

asyncio.run(calls())
print(sorted(tiktoken.registry.ENCODINGS))
print(client.count_tokens(messages) > 0, sorted(tiktoken.registry.ENCODINGS))
"""


def test_a_first_model_call_loads_no_tokenizer_and_counting_loads_it_when_asked() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    after_calls, after_count = done.stdout.splitlines()[-2:]
    assert after_calls == "[]"  # no table loaded by the calls
    assert after_count == "True ['cl100k_base']"


def test_the_stand_in_tokenizes_as_the_table_it_stands_for() -> None:
    stand_in = TokenizerOnUse()
    text = "Baton hands the task to the analyst, who calculates 17 * 23 + 4."
    assert stand_in.encode(text) == tiktoken.get_encoding("cl100k_base").encode(text)
    assert stand_in.loaded
