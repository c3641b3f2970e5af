"""A `baton serve` shared by the HTTP and UI tests (the session's Ray, its own SQLite store)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.service import SERVICE_CONFIG, ServiceProcess


@pytest.fixture(scope="session")
def service_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("service")
    (root / "svc.yaml").write_text(SERVICE_CONFIG)
    return root


@pytest.fixture(scope="session")
def api(ray_address: str, service_dir: Path) -> Iterator[str]:
    service = ServiceProcess(
        service_dir / "svc.yaml",
        f"sqlite+aiosqlite:///{service_dir / 'api.db'}",
        ray_address,
        service_dir / "api.log",
        BATON_SSE_HEARTBEAT_S="1",
        # Rate limits are tested on the guarded service; schemathesis would only wait here.
        BATON_RATE_LIMIT_PER_S="10000",
        BATON_RATE_LIMIT_BURST="10000",
    )
    service.start()
    yield service.url
    service.stop()
