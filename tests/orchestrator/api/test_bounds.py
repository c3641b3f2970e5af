"""What a request may make the service hold before it is refused: its head's size, number of
headers and time (431, 408), and, without a key, nothing of its body (401 first); and what bodies
that push size leave it holding once answered (deeply nested JSON, the largest accepted)."""

from __future__ import annotations

import asyncio
import json
import select
import socket

import httpx
import pytest

from tests.service import KEYS, ServiceProcess, rss_mib

pytestmark = [pytest.mark.ray, pytest.mark.anyio]

MCP_ACCEPT = "application/json, text/event-stream"


def _send_head(port: int, head: bytes, then: bytes = b"", repeat: int = 0) -> tuple[bytes, int]:
    """Send `head`, then `then` up to `repeat` times while the service does not answer; its
    answer, and the bytes sent."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sent = 0
        try:
            sock.sendall(head)
            sent += len(head)
            for _ in range(repeat):
                if select.select([sock], [], [], 0)[0]:
                    break  # it answered: stop sending
                sock.sendall(then)
                sent += len(then)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
        return answer, sent


async def test_a_head_of_64_mib_is_refused_431_and_the_service_holds_none_of_it(
    guarded: ServiceProcess,
) -> None:
    before = rss_mib(guarded.pid)
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "
    chunk = b"a" * 65536
    # Four at once, each trying to send a 64 MiB header.
    answers = await asyncio.gather(
        *(asyncio.to_thread(_send_head, guarded.port, head, chunk, 1024) for _ in range(4))
    )
    for answer, sent in answers:
        assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
        assert sent < 8 * 2**20  # refused long before the 64 MiB
    assert rss_mib(guarded.pid) - before < 16
    many = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(
        b"X-H%d: 1\r\n" % i for i in range(150)
    )
    answer, _ = await asyncio.to_thread(_send_head, guarded.port, many + b"\r\n")
    assert answer.startswith(b"HTTP/1.1 431")
    async with httpx.AsyncClient(base_url=guarded.url) as client:
        assert (await client.get("/healthz")).status_code == 200  # and it goes on serving


async def test_a_head_that_does_not_come_in_time_is_answered_408(guarded: ServiceProcess) -> None:
    # BATON_REQUEST_HEAD_TIMEOUT_S is 3 s on this service: half a head, then nothing.
    answer, _ = await asyncio.to_thread(
        _send_head, guarded.port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
    )
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]


async def test_without_a_key_no_body_is_read_or_parsed(guarded: ServiceProcess) -> None:
    async with httpx.AsyncClient(base_url=guarded.url) as client:
        broken = await client.post(
            "/v1/runs", content=b"{not json", headers={"Content-Type": "application/json"}
        )
        assert broken.status_code == 401 and broken.json()["error"]["code"] == "unauthorized"
        # A body declared too large is not read either: 401 before 413.
        huge = await client.post(
            "/v1/runs", content=b"x" * 2_000_000, headers={"Content-Type": "application/json"}
        )
        assert huge.status_code == 401
        keyed = await client.post(
            "/v1/runs",
            content=b"{not json",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEYS[1]}"},
        )
        assert keyed.status_code == 400  # with a key, the body is read and found broken
        a2a = await client.post("/a2a", content=b"{not json")
        assert a2a.status_code == 401


# Growth the size-pushing bodies below may leave in the service: 50 of the largest accepted
# body are 50 MiB sent; kept, or copied per request and not freed, they show well above it.
SIZE_GROWTH_BOUND_MIB = 40.0


async def test_bodies_that_push_size_leave_the_services_memory_bounded(
    api_service: ServiceProcess,
) -> None:
    deep = b"[" * 500_000 + b"]" * 500_000  # half a million levels, under the body limit
    largest = json.dumps({"task": "x" * 99_000, "agent": "analyst"}).encode()
    assert len(deep) < 1_048_576
    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(base_url=api_service.url, timeout=60) as client:
        # The service's own allocations settle after a first round of each.
        await client.post("/v1/runs", content=deep, headers=headers)
        await client.post("/a2a", content=deep, headers={**headers, "A2A-Version": "1.0"})
        await client.post("/mcp", content=deep, headers={**headers, "Accept": MCP_ACCEPT})
        await client.post("/v1/runs", content=largest, headers=headers)
        before = rss_mib(api_service.pid)
        for _ in range(50):
            nested = await client.post("/v1/runs", content=deep, headers=headers)
            assert nested.status_code in (400, 422), nested.text
            a2a = await client.post("/a2a", content=deep, headers={**headers, "A2A-Version": "1.0"})
            assert a2a.json()["error"]["code"] == -32700
            mcp = await client.post("/mcp", content=deep, headers={**headers, "Accept": MCP_ACCEPT})
            assert mcp.status_code < 500, mcp.text
            big = await client.post("/v1/runs", content=largest, headers=headers)
            assert big.status_code in (202, 429), big.text  # accepted, or the queue is full
        grown = rss_mib(api_service.pid) - before
    print(f"size-pushing bodies: service RSS +{grown:.1f} MiB")
    assert grown < SIZE_GROWTH_BOUND_MIB, grown
