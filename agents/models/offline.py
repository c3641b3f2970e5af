"""The built-in offline model: a deterministic stand-in, for running without keys or network.

It is not intelligent. On its first turn it calls every offered tool whose name, description or
capabilities share a significant word with the task (several at once when several match), with
arguments derived from the task and the tool's JSON schema; once tool results are in, it writes a
final answer that lists them. With no matching tool it answers at once.

Asked to grade an answer (`baton eval`'s rubric: the `judgment` answer shape), it scores the share
of the rubric's significant words that the answer has.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agents.core.messages import latest_request
from agents.models.base import CHANGES_STATE
from agents.models.text import terms

__all__ = [
    "ANSWER_HEADING",
    "JUDGMENT",
    "RUBRIC_HEADING",
    "estimate_tokens",
    "offline_reply",
    "scripted_reply",
]

# The answer shape of a judge's call, and the headings of its request: what a judge asks, as the
# offline model reads it (`orchestrator.evals.judge` writes it).
JUDGMENT = "judgment"
RUBRIC_HEADING = "## Rubric"
ANSWER_HEADING = "## Answer"

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_ARITHMETIC = re.compile(r"[-(]*\s*\d[\d\s.+\-*/%()]*")


def estimate_tokens(text: str) -> int:
    """About four characters a token, as tokenizers average on English text."""
    return max(1, len(text) // 4)


def _task(messages: list[dict[str, Any]]) -> str:
    """What to answer now: the latest request (a thread's turn follows the earlier ones)."""
    return latest_request(messages)


# Parameters that name a file or folder: the offline model points them at the base folder (".",
# where file tools and a stdio server resolve relative paths), never at the task's text.
_PATHLIKE = re.compile(r"(^|_)(path|paths|file|filename|dir|directory|folder|repo|root)($|_)")


def _argument(name: str, schema: dict[str, Any], task: str) -> Any:
    """A value for one parameter: what its schema offers first, else one made from the task."""
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    for key in ("enum", "examples"):
        if schema.get(key):
            return schema[key][0]
    kind = schema.get("type")
    if isinstance(kind, list):  # ["string", "null"]: the first real type
        kind = next((k for k in kind if k != "null"), None)
    numbers = [float(n) for n in _NUMBER.findall(task)]
    if kind == "string":
        if "expression" in name or "formula" in name:
            candidates = [
                m.strip() for m in _ARITHMETIC.findall(task) if re.search(r"\d\s*[-+*/%]", m)
            ]
            return max(candidates, key=len) if candidates else task
        return "." if _PATHLIKE.search(name.lower()) else task
    if kind in ("number", "integer"):
        value = numbers[0] if numbers else schema.get("minimum", 0)
        return int(value) if kind == "integer" else value
    if kind == "array":
        items = schema.get("items") or {}
        return numbers if items.get("type") in ("number", "integer") else []
    if kind == "boolean":
        return False
    if kind == "object":
        return _arguments(schema, task)
    return task


def _arguments(parameters: dict[str, Any], task: str) -> dict[str, Any]:
    properties = parameters.get("properties", {})
    required = set(parameters.get("required", []))
    return {
        name: _argument(name, schema, task)
        for name, schema in properties.items()
        if name in required
    }


def _named(tool: str, task: str) -> bool:
    """Whether the task names the tool (`git_commit`, or "git commit")."""
    text = task.lower()
    return tool.lower() in text or tool.lower().replace("_", " ") in text


def _final_answer(task: str, messages: list[dict[str, Any]]) -> str:
    names = {
        call["id"]: call["function"]["name"]
        for m in messages
        if m.get("role") == "assistant"
        for call in m.get("tool_calls") or []
    }
    results = [
        (names.get(m.get("tool_call_id", ""), "tool"), str(m.get("content", "")))
        for m in messages
        if m.get("role") == "tool"
    ]
    lines = [f"Answer to: {task[:200]}"]
    lines += [f"- {name.removeprefix('delegate_to_')}: {text[:600]}" for name, text in results]
    return "\n".join(lines)


def _shaped(schema: dict[str, Any], answer: str) -> Any:
    """A value of the JSON Schema `schema` made from the answer's text (every property set).

    A list of strings is what the answer's tool results listed (a result that is a JSON list
    gives its items), in order.
    """
    if schema.get("type") == "object" or "properties" in schema:
        return {k: _shaped(s, answer) for k, s in schema.get("properties", {}).items()}
    if schema.get("type") == "string" and not ({"enum", "const"} & set(schema)):
        return answer
    if schema.get("type") == "array" and (schema.get("items") or {}).get("type") == "string":
        if not ({"default", "examples"} & set(schema)):
            return _listed(answer)
    return _argument("value", schema, answer)


def _listed(answer: str) -> list[str]:
    """The items of the answer's result lines (`- tool: ["a", "b"]` gives a and b)."""
    items: list[str] = []
    for line in answer.splitlines():
        if not line.startswith("- ") or ": " not in line:
            continue
        said = line.split(": ", 1)[1]
        try:
            found = json.loads(said)
        except json.JSONDecodeError:
            found = said
        items += [str(i) for i in found] if isinstance(found, list) else [str(found)]
    return items


def _judged(request: str) -> dict[str, Any]:
    """A grading: the share of the rubric's significant words found in the answer."""
    rubric, _, answer = request.partition(ANSWER_HEADING)
    wanted = terms(rubric.partition(RUBRIC_HEADING)[2])
    found = wanted & terms(answer)
    score = len(found) / len(wanted) if wanted else 1.0
    missing = ", ".join(sorted(wanted - found)) or "nothing"
    reasoning = (
        f"The answer has {len(found)} of the rubric's {len(wanted)} terms; it lacks {missing}."
    )
    return {"reasoning": reasoning, "score": round(score, 3)}


def offline_reply(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    shape: dict[str, Any] | None = None,
    forced: bool = False,
    name: str | None = None,
) -> dict[str, Any]:
    """The offline model's next message: `{"content": ...}` or `{"tool_calls": [...]}`.

    With `shape` (a JSON Schema) its final answer is JSON of that shape (`name`: the shape's
    name; a `judgment` grades an answer); `forced`: it calls the tools it is offered whatever
    the task says.
    """
    task = _task(messages)
    if shape is not None and name == JUDGMENT:
        return {"content": json.dumps(_judged(task))}
    if forced and tools:
        return {
            "tool_calls": [
                {
                    "name": t["function"]["name"],
                    "arguments": _arguments(t["function"].get("parameters", {}), task),
                }
                for t in tools
            ]
        }
    if any(m.get("role") == "assistant" and m.get("tool_calls") for m in messages):
        answer = _final_answer(task, messages)
        return {"content": json.dumps(_shaped(shape, answer)) if shape else answer}
    wanted = terms(task)
    calls = []
    for tool in tools:
        fn = tool.get("function", {})
        if fn.get(CHANGES_STATE) and not _named(fn.get("name", ""), task):
            continue  # it writes or destroys: only when asked for by name
        if wanted & terms(f"{fn.get('name', '')} {fn.get('description', '')}"):
            calls.append(
                {"name": fn["name"], "arguments": _arguments(fn.get("parameters", {}), task)}
            )
    if calls:
        return {"tool_calls": calls}
    answer = f"No tool matched, so this is a direct reply to: {task[:500]}"
    return {"content": json.dumps(_shaped(shape, answer)) if shape else answer}


def scripted_reply(
    messages: list[dict[str, Any]], replies: list[dict[str, Any]], repeat_last: bool
) -> dict[str, Any]:
    """The reply at position (number of assistant turns so far) in a scripted list."""
    turn = sum(1 for m in messages if m.get("role") == "assistant")
    if turn >= len(replies):
        if not repeat_last or not replies:
            return {"content": f"scripted model has no reply number {turn + 1}"}
        turn = len(replies) - 1
    reply = dict(replies[turn])
    if "tool_calls" in reply:
        reply["tool_calls"] = [
            {
                "name": c["name"],
                "arguments": json.loads(c["arguments"])
                if isinstance(c.get("arguments"), str)
                else c.get("arguments", {}),
            }
            for c in reply["tool_calls"]
        ]
    return reply
