"""Schemathesis against a service whose run store is PostgreSQL: what SQLite takes and PostgreSQL
refuses (a NUL character in text, an integer past 64 bits, a string past a column's length) must
be a 4xx, never a 500 (test_api runs the same checks on SQLite)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

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
