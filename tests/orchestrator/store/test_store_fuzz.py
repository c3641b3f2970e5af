"""Schemathesis against a service whose run store is PostgreSQL: what SQLite takes and PostgreSQL
refuses (a NUL character in text, an integer past 64 bits, a string past a column's length) must
be a 4xx, never a 500 (test_api runs the same checks on SQLite)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fuzzing import finish, schemathesis
from tests.postgres import fresh_database
from tests.service import ServiceProcess

pytestmark = [pytest.mark.ray, pytest.mark.long, pytest.mark.heavy]


@pytest.fixture(scope="module")
def on_postgres(ray_address: str, service_dir: Path, postgres_url: str) -> Iterator[str]:
    service = ServiceProcess(
        service_dir / "svc.yaml", fresh_database(postgres_url, "fuzzed"), ray_address,
        service_dir / "fuzzed.log", BATON_INSTANCE_ID="fuzzed",
        BATON_RATE_LIMIT_PER_S="10000", BATON_RATE_LIMIT_BURST="10000",
    )  # fmt: skip
    service.start()
    yield service.url
    service.stop()


def test_every_operation_answers_as_documented_on_postgresql(
    on_postgres: str, tmp_path: Path
) -> None:
    # (Fewer cases than test_api's: what differs here is the store, not the operations. Not the
    # event stream: each fuzzed one waits for its run's end, three quarters of this test's time
    # for nothing the store decides: its bounds are the schema's, fuzzed by test_api.)
    only = ("--phases", "fuzzing", "--exclude-path-regex", "/events$")
    finish([schemathesis(on_postgres, tmp_path / "pg", *only, max_examples=6)])


# Filters and ids with U+0000, which PostgreSQL cannot look up (a 500 quoting the statement).
NUL_REQUESTS = [
    ("/v1/runs?agent=%00", "query parameter agent has U+0000 (NUL) at character 1"),
    ("/v1/runs?status=run%00ning", "query parameter status has U+0000 (NUL) at character 4"),
    ("/v1/usage?tenant=%00", "query parameter tenant has U+0000 (NUL) at character 1"),
    ("/v1/experiments?dataset=%00", "query parameter dataset has U+0000 (NUL) at character 1"),
    ("/v1/experiments/abc%00def", "the path has U+0000 (NUL) at character 20"),
]


def test_a_nul_in_a_filter_or_an_id_is_a_422_naming_it_and_no_answer_quotes_sql(
    on_postgres: str,
) -> None:
    with httpx.Client(base_url=on_postgres, timeout=30) as client:
        for path, said in NUL_REQUESTS:
            answer = client.get(path)
            assert answer.status_code == 422, (path, answer.text)
            assert answer.json()["error"]["message"].startswith(said), (path, answer.text)
        body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"contextId": "a\x00"}}
        error = client.post("/a2a", json=body, headers={"A2A-Version": "1.0"}).json()["error"]
    assert error["code"] == -32602, error
    assert error["message"].startswith("params.contextId has U+0000 (NUL) at character 2")
    assert "SELECT" not in error["message"]
