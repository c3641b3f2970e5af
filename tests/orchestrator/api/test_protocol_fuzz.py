"""Property-based fuzzing of the two JSON-RPC doors the OpenAPI document does not describe, `/a2a`
and `/mcp`: generated bodies (every method the protocols name and others, params of every JSON
shape, ids of every kind, batches, broken envelopes) never get a 5xx, and every JSON answer is a
JSON-RPC answer. Schemathesis covers `/v1` (test_api, test_store_fuzz)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.ray]

A2A_METHODS = [
    "SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask",
    "SubscribeToTask", "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard", "message/send", "message/stream", "tasks/get", "tasks/cancel",
    "tasks/resubscribe", "tasks/pushNotificationConfig/set", "agent/getAuthenticatedExtendedCard",
]  # fmt: skip
MCP_METHODS = [
    "initialize", "ping", "tools/list", "tools/call", "prompts/list", "prompts/get",
    "resources/list", "resources/read", "resources/templates/list", "completion/complete",
    "logging/setLevel", "notifications/initialized", "notifications/cancelled",
    "notifications/progress", "tasks/get", "tasks/list",
]  # fmt: skip

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=24,
)
IDS = st.none() | st.integers() | st.text(max_size=20) | st.floats(allow_nan=False) | JSON
# Params shaped like the real ones, with any value in any place: deeper than random JSON gets.
MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "agent", "ROLE_USER", "x"]) | JSON,
        "parts": st.lists(st.fixed_dictionaries({"text": st.text(max_size=30) | JSON}), max_size=3)
        | JSON,
        "messageId": st.text(max_size=20) | JSON,
    },
    optional={"contextId": st.text(max_size=20) | JSON, "taskId": st.text(max_size=20) | JSON},
)
PARAMS = JSON | st.fixed_dictionaries(
    {},
    optional={
        "message": MESSAGE | JSON,
        "id": st.text(max_size=40) | JSON,
        "name": st.sampled_from(["run_team", "ask_team", "cancel_run", "x"]) | JSON,
        "arguments": st.dictionaries(st.text(max_size=10), JSON, max_size=3) | JSON,
        "pageSize": st.integers(-5, 500) | JSON,
        "pageToken": st.text(max_size=30) | JSON,
        "historyLength": st.integers(-5, 50) | JSON,
        "contextId": st.text(max_size=20) | JSON,
        "configuration": st.dictionaries(st.text(max_size=10), JSON, max_size=3),
        "protocolVersion": st.sampled_from(["2025-06-18", "2025-03-26", "1999"]) | JSON,
        "capabilities": JSON,
        "clientInfo": JSON,
        "_meta": JSON,
    },
)


def envelopes(methods: list[str]) -> st.SearchStrategy[Any]:
    """JSON-RPC requests, mostly well-formed, some not, sometimes in a batch."""
    call = st.fixed_dictionaries(
        {"method": st.sampled_from(methods) | st.text(max_size=30)},
        optional={
            "jsonrpc": st.sampled_from(["2.0", "1.0"]) | JSON,
            "id": IDS,
            "params": PARAMS,
        },
    )
    return call | st.lists(call, min_size=0, max_size=3) | JSON


def check(answer: httpx.Response, body: Any) -> None:
    assert answer.status_code < 500, (answer.status_code, answer.text[:2000], body)
    if answer.headers.get("content-type", "").startswith("application/json") and answer.content:
        said = answer.json()
        for one in said if isinstance(said, list) else [said]:
            assert isinstance(one, dict), said
            if "error" in one and "jsonrpc" in one:
                assert isinstance(one["error"]["code"], int), said


FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def send(http: httpx.Client, path: str, body: Any, headers: dict[str, str]) -> None:
    """Post `body`; a stream's status and first bytes are read, then it is closed."""
    content = json.dumps(body)
    with http.stream("POST", path, content=content, headers=headers) as answer:
        if answer.headers.get("content-type", "").startswith("text/event-stream"):
            assert answer.status_code < 500, answer.status_code
            return
        answer.read()
        check(answer, body)


def test_a2a_never_answers_5xx_to_any_body(api: str) -> None:
    with httpx.Client(base_url=api, timeout=60) as http:

        @FUZZ
        @given(body=envelopes(A2A_METHODS), version=st.sampled_from(["1.0", "0.3", None, "9"]))
        def fuzz(body: Any, version: str | None) -> None:
            headers = {"Content-Type": "application/json"}
            if version is not None:
                headers["A2A-Version"] = version
            send(http, "/a2a", body, headers)

        fuzz()


def test_mcp_never_answers_5xx_to_any_body(api: str) -> None:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=api, timeout=60) as http:
        opened = http.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "fuzz", "version": "1"},
                },
            },
            headers=headers,
        )
        assert opened.status_code == 200, opened.text
        session = opened.headers.get("mcp-session-id")
        if session:
            headers["Mcp-Session-Id"] = session
        headers["MCP-Protocol-Version"] = "2025-06-18"

        @FUZZ
        @given(body=envelopes(MCP_METHODS), with_session=st.booleans())
        def fuzz(body: Any, with_session: bool) -> None:
            sent = dict(headers)
            if not with_session:
                sent.pop("Mcp-Session-Id", None)
            send(http, "/mcp", body, sent)

        fuzz()
