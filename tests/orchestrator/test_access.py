"""Keys with tenants and roles (an access file of hashes): what each key sees and may do, on
every door (HTTP, SSE, A2A, MCP), against a real `baton serve` (`tenanted`, a replica of `api`)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from orchestrator.access import AccessFile, AccessFileError, AccessFileWatch, KeyRing, new_key
from orchestrator.api.tokens import OidcVerifier
from orchestrator.oidc import OidcOptions, TokenRefused
from tests.oidc_issuer import AUDIENCE, ISSUER, FakeIssuer
from tests.service import ServiceProcess, all_events

pytestmark = [pytest.mark.ray, pytest.mark.anyio]

A2A = {"A2A-Version": "1.0"}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# --- Bearer JWTs of an OIDC issuer ------------------------------------------------------------


def _unsigned(claims: dict[str, Any]) -> str:
    """A token that says `alg: none` (no signature)."""

    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT', 'kid': 'k1'})}.{part(claims)}."


async def test_an_issuers_token_names_its_caller_and_every_bad_one_is_refused_saying_why(
    issuer: FakeIssuer,
) -> None:
    options = OidcOptions(issuer=ISSUER, audience=AUDIENCE, jwks_url=issuer.jwks_url)
    ring = KeyRing(oidc=OidcVerifier(options))
    good = issuer.token("alice", tenant="acme", roles=["read", "nonsense"])
    access = await ring.bearer(f"Bearer {good}")
    assert access is not None
    assert (access.who, access.tenant, access.roles) == ("jwt:alice", "acme", {"read"})
    plain = await ring.bearer(f"Bearer {issuer.token('bob', tenant='acme')}")
    assert plain is not None and plain.roles == {"submit", "read"}  # no roles claim: defaults
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    refused = {
        "the token has expired": issuer.token(tenant="acme", expires_in=-60),
        "the token is not for this service": issuer.token(tenant="acme", aud="someone-else"),
        "not issued by the configured issuer": issuer.token(tenant="acme", iss="https://evil"),
        "Signature verification failed": issuer.token(tenant="acme", key=other_key),
        "algorithm 'none' is not accepted": _unsigned(
            {"iss": ISSUER, "aud": AUDIENCE, "sub": "mallory", "exp": now + 60, "tenant": "acme"}
        ),
        # The issuer's public key used as an HMAC secret (the classic confusion).
        "algorithm 'HS256' is not accepted": jwt.encode(
            {"iss": ISSUER, "aud": AUDIENCE, "sub": "m", "exp": now + 60, "tenant": "acme"},
            "the issuer's public key, used as a shared secret",
            algorithm="HS256",
            headers={"kid": "k1"},
        ),
        "names no tenant": issuer.token(),
    }
    for why, token in refused.items():
        with pytest.raises(TokenRefused) as raised:
            await ring.bearer(f"Bearer {token}")
        assert why in str(raised.value), (why, raised.value)
    assert issuer.fetches <= 2  # the keys are fetched once and kept


async def test_an_issuers_token_sees_its_tenants_runs_only_and_a_bad_one_is_told_why(
    tenanted: ServiceProcess, issuer: FakeIssuer, access_keys: dict[str, str]
) -> None:
    async with httpx.AsyncClient(base_url=tenanted.url, timeout=60) as http:
        token = bearer(issuer.token("carol", tenant="globex", roles="submit read"))
        made = await http.post("/v1/runs", json={"task": "hi", "agent": "parrot"}, headers=token)
        assert made.status_code == 202, made.text
        assert (made.json()["tenant"], made.json()["submitted_by"]) == ("globex", "jwt:carol")
        theirs = await http.post("/v1/runs", json={"task": "hi", "agent": "parrot"},
                                 headers=bearer(access_keys["acme"]))  # fmt: skip
        listed = (await http.get("/v1/runs", headers=token)).json()["runs"]
        assert {r["tenant"] for r in listed} == {"globex"}
        assert made.json()["id"] in {r["id"] for r in listed}
        hidden = await http.get(f"/v1/runs/{theirs.json()['id']}", headers=token)
        assert hidden.status_code == 404
        expired = await http.get(
            "/v1/runs", headers=bearer(issuer.token(tenant="globex", expires_in=-5))
        )
        assert expired.status_code == 401
        assert expired.json()["error"]["message"] == "the token has expired"


# --- The key ring ---------------------------------------------------------------------------


async def test_a_key_is_checked_against_its_hash_and_a_revoked_one_stops_at_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "access.yaml"
    key, entry = new_key("ci", "acme", ["submit", "read"])
    other, other_entry = new_key("ops", "acme", ["admin"])
    AccessFile(keys=[entry, other_entry]).write(path)
    text = path.read_text()
    # (The secret may begin with "_": the key is `baton_{id}_{secret}`.)
    assert key not in text and key.split("_", 2)[2] not in text  # only hashes are kept
    assert path.stat().st_mode & 0o077 == 0
    ring = KeyRing(access=AccessFileWatch(path))
    found = await ring.bearer(f"Bearer {key}")
    assert found is not None
    assert (found.who, found.tenant, sorted(found.roles)) == ("ci", "acme", ["read", "submit"])
    assert found.may("read") and not found.may("approve") and found.tenant_filter == "acme"
    # The right id with another secret, another scheme, garbage: refused.
    assert await ring.identify(key[:-2] + "xx") is None
    assert await ring.bearer(f"Basic {key}") is None
    assert await ring.identify("baton_nothing_here") is None
    # Revoked (the file rewritten without it): refused within the file check's second.
    AccessFile(keys=[other_entry]).write(path)
    for _ in range(30):
        if await ring.identify(key) is None:
            break
        await asyncio.sleep(0.1)
    assert await ring.identify(key) is None
    assert await ring.identify(other) is not None


async def test_an_event_stream_ends_once_its_key_is_revoked(
    tenanted: ServiceProcess, service_dir: Path, access_keys: dict[str, str]
) -> None:
    path = service_dir / "access.yaml"
    key, entry = new_key("short-lived", "acme", ["submit", "read"])
    AccessFile(keys=[*AccessFile.read(path).keys, entry]).write(path)
    auth = bearer(key)
    async with httpx.AsyncClient(base_url=tenanted.url, timeout=60) as http:
        for _ in range(30):  # (the service reads the file again within a second)
            made = await http.post(
                "/v1/runs", json={"task": "doze", "agent": "dozer"}, headers=auth
            )
            if made.status_code != 401:
                break
            await asyncio.sleep(0.1)
        assert made.status_code == 202, made.text
        run_id = made.json()["id"]
        try:
            seen: list[str] = []
            async with http.stream("GET", f"/v1/runs/{run_id}/events", headers=auth) as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("event: ") and not seen:  # following: now revoke it
                        kept = [k for k in AccessFile.read(path).keys if k.name != "short-lived"]
                        AccessFile(keys=kept).write(path)
                    if line.startswith("event: "):
                        seen.append(line.removeprefix("event: "))
            # The stream ended at a heartbeat, its run a minute from its end.
            assert seen and "run_finished" not in seen, seen
            again = await http.get(f"/v1/runs/{run_id}/events", headers=auth)
            assert again.status_code == 401
        finally:
            await http.post(f"/v1/runs/{run_id}/cancel", headers=bearer(access_keys["acme"]))


def test_a_wrong_access_file_is_refused_with_the_place_of_its_mistake(tmp_path: Path) -> None:
    path = tmp_path / "access.yaml"
    path.write_text("keys:\n  - {id: abcdefgh, name: ci, roles: [boss], hash: x}\n")
    with pytest.raises(AccessFileError) as caught:
        AccessFile.read(path)
    said = str(caught.value)
    assert str(path) in said and "keys.0.roles.0" in said and "keys.0.hash" in said
    _, entry = new_key("ci", "acme", ["read"])
    AccessFile(keys=[entry, entry]).write(path)
    with pytest.raises(AccessFileError, match="names two keys"):
        AccessFile.read(path)


# --- Tenants: nothing of one is seen by the other -------------------------------------------


async def _ended(url: str, run_id: str, key: str) -> None:
    events = await all_events(url, run_id, Authorization=f"Bearer {key}")
    assert events[-1][1] == "run_finished", events[-1]


async def test_two_tenants_never_see_each_others_runs_or_threads_on_any_door(
    tenanted: ServiceProcess, access_keys: dict[str, str]
) -> None:
    url = tenanted.url
    acme, globex, root = (bearer(access_keys[n]) for n in ("acme", "globex", "root"))
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        made = await http.post("/v1/runs", json={"task": "hello", "agent": "parrot"}, headers=acme)
        assert made.status_code == 202, made.text
        run = made.json()
        assert (run["tenant"], run["submitted_by"]) == ("acme", "acme")
        await _ended(url, run["id"], access_keys["acme"])
        theirs = (await http.post("/v1/threads", json={}, headers=acme)).json()["id"]
        mine = (await http.post("/v1/threads", json={}, headers=globex)).json()["id"]

        # Every read and act on another tenant's run or thread is a 404, as for no run at all.
        base = f"/v1/runs/{run['id']}"
        for method, path in [
            ("GET", base),
            ("GET", f"{base}/events"),
            ("GET", f"{base}/trace"),
            ("GET", f"{base}/diagram"),
            ("GET", f"{base}/approvals"),
            ("GET", f"{base}/input"),
            ("POST", f"{base}/cancel"),
            ("POST", f"{base}/fork"),
            ("POST", f"{base}/replay"),
            ("GET", f"/v1/threads/{theirs}"),
            ("DELETE", f"/v1/threads/{theirs}"),
        ]:
            answer = await http.request(method, path, headers=globex)
            assert answer.status_code == 404, (method, path, answer.text)
        turn = await http.post(f"/v1/threads/{theirs}/runs", json={"task": "x"}, headers=globex)
        assert turn.status_code == 404 and turn.json()["error"]["code"] == "thread_not_found"
        # Nor comparing one's own run with theirs.
        own = await http.post("/v1/runs", json={"task": "hi", "agent": "parrot"}, headers=globex)
        own_id = own.json()["id"]
        await _ended(url, own_id, access_keys["globex"])
        compared = await http.get(f"/v1/runs/{own_id}/compare?with={run['id']}", headers=globex)
        assert compared.status_code == 404
        # Nor keeping an experiment of their run as one's own.
        experiment = {
            "dataset": "d", "dataset_digest": "0" * 64, "config": "c", "config_digest": "v",
            "results": [{"case": "one", "outcome": "pass", "run_id": run["id"]}],
        }  # fmt: skip
        kept = await http.post("/v1/experiments", json=experiment, headers=globex)
        assert kept.status_code == 404 and kept.json()["error"]["code"] == "run_not_found"

        # Lists are filtered in the store's query: the totals count one's own only.
        seen = (await http.get("/v1/runs", params={"limit": 200}, headers=globex)).json()
        assert {r["tenant"] for r in seen["runs"]} == {"globex"}
        assert seen["total"] == len(seen["runs"])
        threads = (await http.get("/v1/threads", params={"limit": 200}, headers=globex)).json()
        assert [t["id"] for t in threads["threads"]] == [mine] and threads["total"] == 1
        # An admin sees every tenant's.
        every = (await http.get("/v1/runs", params={"limit": 200}, headers=root)).json()
        assert {run["id"], own_id} <= {r["id"] for r in every["runs"]}
        assert (await http.get(base, headers=root)).status_code == 200
        listed = (await http.get("/v1/threads", params={"limit": 200}, headers=root)).json()
        assert {theirs, mine} <= {t["id"] for t in listed["threads"]}

        # A2A: the task is not found, the list holds one's own, a context is not shared.
        async def rpc(method: str, params: dict[str, Any], who: dict[str, str]) -> Any:
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            return (await http.post("/a2a", json=body, headers={**A2A, **who})).json()

        missing = await rpc("GetTask", {"id": run["id"]}, globex)
        assert missing["error"]["code"] == -32001, missing
        assert "result" in await rpc("GetTask", {"id": run["id"]}, acme)
        tasks = (await rpc("ListTasks", {"pageSize": 100}, globex))["result"]
        assert run["id"] not in {t["id"] for t in tasks["tasks"]}
        assert own_id in {t["id"] for t in tasks["tasks"]}
        message = {
            "messageId": "m-tenants-1",
            "role": "ROLE_USER",
            "contextId": theirs,
            "parts": [{"text": "continue their conversation"}],
        }
        # Contexts are each tenant's words: the same contextId is another conversation, which
        # neither tenant's first use takes from the other.
        joined = (await rpc("SendMessage", {"message": message}, globex))["result"]["task"]
        assert joined["contextId"] == theirs
        turns = (await http.get(f"/v1/threads/{theirs}", headers=acme)).json()["turns"]
        assert turns == []  # (not a turn of acme's thread of that id)
        for who in (globex, acme):  # globex took "shared" first; acme's is its own all the same
            shared = {**message, "messageId": uuid.uuid4().hex, "contextId": "shared"}
            task = (await rpc("SendMessage", {"message": shared}, who))["result"]["task"]
            assert task["contextId"] == "shared"
            listed = (await rpc("ListTasks", {"contextId": "shared"}, who))["result"]["tasks"]
            assert [t["id"] for t in listed] == [task["id"]]

    # MCP: another tenant's run is no run.
    async with (
        create_mcp_http_client(headers=globex) as client_http,
        Client(streamable_http_client(f"{url}/mcp", http_client=client_http)) as client,
    ):
        theirs_run = await client.call_tool("get_run", {"run_id": run["id"]})
        assert theirs_run.is_error and "no run" in str(theirs_run.content[0])
        own_run = await client.call_tool("get_run", {"run_id": own_id})
        assert not own_run.is_error


# --- Roles: every route against every role ---------------------------------------------------

# The role each operation of the API needs (a new route must be added here).
NEEDS = {
    ("GET", "/v1/agents"): "read",
    ("GET", "/v1/agents/diagram"): "read",
    ("GET", "/v1/service"): "read",
    ("POST", "/v1/service/versions"): "admin",
    ("GET", "/v1/usage"): "read",
    ("POST", "/v1/runs"): "submit",
    ("GET", "/v1/runs"): "read",
    ("GET", "/v1/runs/{run_id}"): "read",
    ("POST", "/v1/runs/{run_id}/cancel"): "submit",
    ("POST", "/v1/runs/{run_id}/resume"): "submit",
    ("POST", "/v1/runs/{run_id}/replay"): "submit",
    ("POST", "/v1/runs/{run_id}/fork"): "submit",
    ("GET", "/v1/runs/{run_id}/trace"): "read",
    ("GET", "/v1/runs/{run_id}/events"): "read",
    ("GET", "/v1/runs/{run_id}/compare"): "read",
    ("GET", "/v1/runs/{run_id}/diagram"): "read",
    ("GET", "/v1/runs/{run_id}/approvals"): "read",
    ("POST", "/v1/runs/{run_id}/approvals/{call_id}"): "approve",
    ("GET", "/v1/runs/{run_id}/input"): "read",
    ("POST", "/v1/runs/{run_id}/input"): "approve",
    ("POST", "/v1/threads"): "submit",
    ("GET", "/v1/threads"): "read",
    ("GET", "/v1/threads/{thread_id}"): "read",
    ("DELETE", "/v1/threads/{thread_id}"): "submit",
    ("POST", "/v1/threads/{thread_id}/runs"): "submit",
    ("PATCH", "/v1/threads/{thread_id}/state"): "submit",
    ("GET", "/v1/memory/{namespace}"): "read",
    ("GET", "/v1/memory/{namespace}/{key}"): "read",
    ("PUT", "/v1/memory/{namespace}/{key}"): "submit",
    ("DELETE", "/v1/memory/{namespace}/{key}"): "submit",
    ("GET", "/v1/experiments"): "read",
    ("POST", "/v1/experiments"): "submit",
    ("GET", "/v1/experiments/{experiment_id}"): "read",
    ("POST", "/v1/runs/{run_id}/evaluations"): "submit",
}


async def test_every_route_takes_the_keys_with_its_role_and_refuses_the_others(
    tenanted: ServiceProcess, access_keys: dict[str, str]
) -> None:
    async with httpx.AsyncClient(base_url=tenanted.url, timeout=30) as http:
        document = (await http.get("/openapi.json")).json()
        served = {
            (method.upper(), path)
            for path, operations in document["paths"].items()
            if path.startswith("/v1/")
            for method in operations
        }
        assert served == set(NEEDS)
        for (method, path), role in NEEDS.items():
            target = path.replace("{run_id}", "0" * 32).replace("{thread_id}", "0" * 32)
            target = target.replace("{call_id}", "c1").replace("{experiment_id}", "e1")
            target = target.replace("{namespace}", "users").replace("{key}", "k1")
            for name in ("reader", "submitter", "approver", "root"):
                answer = await http.request(
                    method, target, json={}, headers=bearer(access_keys[name])
                )
                allowed = name == "root" or name == {"read": "reader", "submit": "submitter",
                                                     "approve": "approver"}.get(role)  # fmt: skip
                if allowed:
                    assert answer.status_code not in (401, 403), (method, path, name, answer.text)
                else:
                    assert answer.status_code == 403, (method, path, name, answer.text)
                    assert f"lacks the {role!r} role" in answer.json()["error"]["message"]
        # The protocols' doors check the same roles: a reader cannot start a task.
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m-r", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
            },
        }
        refused = await http.post(
            "/a2a", json=body, headers={**A2A, **bearer(access_keys["reader"])}
        )
        assert refused.json()["error"]["data"][0]["metadata"]["reason"] == "forbidden"
    async with (
        create_mcp_http_client(headers=bearer(access_keys["reader"])) as client_http,
        Client(streamable_http_client(f"{tenanted.url}/mcp", http_client=client_http)) as client,
    ):
        submitted = await client.call_tool("submit_task", {"task": "hi", "wait_s": 0})
        assert submitted.is_error and "lacks the 'submit' role" in str(submitted.content[0])


async def test_a_wrong_edit_of_the_access_file_is_said_at_once_and_the_last_good_file_holds(
    tenanted: ServiceProcess, service_dir: Path, access_keys: dict[str, str]
) -> None:
    path = service_dir / "access.yaml"
    good = path.read_text()
    acme, root = bearer(access_keys["acme"]), bearer(access_keys["root"])
    try:
        path.write_text(good.replace("roles:", "roels:", 1))  # a slip of the hand
        async with httpx.AsyncClient(base_url=tenanted.url, timeout=30) as http:
            deadline = time.monotonic() + 10  # (the file is looked at once a second)
            while (ready := (await http.get("/readyz")).json())["checks"].get(
                "access_file"
            ) == "ok":
                assert time.monotonic() < deadline, ready
                await asyncio.sleep(0.2)
            said = ready["checks"]["access_file"]
            assert said.startswith(f"{path}: keys.0") and "the file read before stays" in said
            assert ready["status"] == "ready"  # (reported; the keys read before still work)
            assert (await http.get("/v1/runs", headers=acme)).status_code == 200
            metrics = (await http.get("/metrics", headers=root)).text
            assert re.search(r"^baton_access_file_problems\{.*\} 1\.0$", metrics, re.M), metrics
        log = tenanted.log.read_text()
        assert log.count("BATON_ACCESS_FILE ") == 1 and f"{path}: keys.0" in log
    finally:
        path.write_text(good)
    async with httpx.AsyncClient(base_url=tenanted.url, timeout=30) as http:
        deadline = time.monotonic() + 10
        while (await http.get("/readyz")).json()["checks"].get("access_file") != "ok":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
