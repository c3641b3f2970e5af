"""A thread's turn against a run given the same history in its task: what a turn costs.

A real `baton serve` on 127.0.0.1 (one offline agent, SQLite). A thread takes TURNS turns, one
after the other; after each, a plain run is submitted whose task carries the same history (each
earlier turn's task and answer, then the new task), which is what a client without threads
would send. Each is timed from submission to its `run_finished` event (SSE), and its model's
input tokens are read from the run.

Prints the median latency and input tokens of each, and their ratios (turn / plain run): the
floor is the plain run, measured in the same service, the same minute. Tokens twice: as the
offline model reports them (it estimates from the messages' JSON, so each message's keys count),
and as a real tokenizer counts the messages sent (litellm's `token_counter` for gpt-4o-mini:
tiktoken's table, with OpenAI's few tokens of overhead a message).

Run: .venv/bin/python bench/thread_turn.py [TURNS, default 30]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import litellm
import ray

from bench.http_throughput import serve, wait_ready
from orchestrator.cli.client import parse_sse
from tests.ports import free_port

CONFIG = """
name: turns
agents:
  - name: echo
    description: Answers.
"""


async def timed(client: httpx.AsyncClient, path: str, task: str) -> tuple[float, dict[str, object]]:
    """Submit at `path`, follow to the end; seconds taken and the run as stored."""
    began = time.perf_counter()
    answer = await client.post(path, json={"task": task, "agent": "echo"})
    answer.raise_for_status()
    SUBMITS.setdefault(path.startswith("/v1/threads"), []).append(time.perf_counter() - began)
    run_id = answer.json()["id"]
    async with client.stream("GET", f"/v1/runs/{run_id}/events") as stream:
        async for event in parse_sse(stream.aiter_lines()):
            if event.event == "run_finished":
                break
    took = time.perf_counter() - began
    run = (await client.get(f"/v1/runs/{run_id}")).json()
    assert run["status"] == "succeeded", run
    return took, run


SUBMITS: dict[bool, list[float]] = {}


def counted(messages: list[dict[str, str]]) -> int:
    """Tokens of the messages as gpt-4o-mini's tokenizer counts a request of them."""
    return int(litellm.token_counter(model="gpt-4o-mini", messages=messages))


async def measure(url: str, turns: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {
        k: []
        for k in ("turn_s", "plain_s", "turn_tokens", "plain_tokens", "turn_real", "plain_real")
    }
    history: list[str] = []
    sent: list[dict[str, str]] = []  # the thread's messages so far
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        thread = (await client.post("/v1/threads", json={})).json()["id"]
        for n in range(turns):
            task = f"turn {n}: what comes after {n}?"
            took, run = await timed(client, f"/v1/threads/{thread}/runs", task)
            said = "\n".join([*history, f"user: {task}"])
            took_plain, plain = await timed(client, "/v1/runs", said)
            if n >= 1:  # the first turn has no history
                figures["turn_s"].append(took)
                figures["plain_s"].append(took_plain)
                figures["turn_tokens"].append(run["usage"]["input_tokens"])  # type: ignore[index]
                figures["plain_tokens"].append(plain["usage"]["input_tokens"])  # type: ignore[index]
                figures["turn_real"].append(counted([*sent, {"role": "user", "content": task}]))
                figures["plain_real"].append(counted([{"role": "user", "content": said}]))
            history += [f"user: {task}", f"assistant: {run['output']}"]
            sent += [
                {"role": "user", "content": task},
                {"role": "assistant", "content": str(run["output"])},
            ]
    return figures


async def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    ray.init(namespace="baton-bench", include_dashboard=False, logging_level="ERROR")
    address = ray.get_runtime_context().gcs_address
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "turns.yaml"
        config.write_text(CONFIG)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = serve(config, Path(tmp) / "runs.db", address, port)
        try:
            await wait_ready(url)
            figures = await measure(url, turns)
        finally:
            server.terminate()
            server.wait(timeout=60)
    m = {k: statistics.median(v) for k, v in figures.items()}
    print(f"thread turns against plain runs with the same history ({len(figures['turn_s'])} each):")
    print(
        f"  latency (submit to run_finished): turn {m['turn_s'] * 1000:.0f} ms, plain "
        f"{m['plain_s'] * 1000:.0f} ms: {m['turn_s'] / m['plain_s']:.2f}x"
    )
    print(
        f"  of which the submission (POST): turn {statistics.median(SUBMITS[True]) * 1000:.0f} "
        f"ms, plain {statistics.median(SUBMITS[False]) * 1000:.0f} ms"
    )
    print(
        f"  input tokens, the offline model's estimate: turn {m['turn_tokens']:.0f}, plain "
        f"{m['plain_tokens']:.0f}: {m['turn_tokens'] / m['plain_tokens']:.2f}x"
    )
    print(
        f"  input tokens, gpt-4o-mini's tokenizer: turn {m['turn_real']:.0f}, plain "
        f"{m['plain_real']:.0f}: {m['turn_real'] / m['plain_real']:.2f}x"
    )


if __name__ == "__main__":
    asyncio.run(main())
