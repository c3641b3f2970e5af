"""A `baton serve` shared by the HTTP and UI tests (the session's Ray, its own SQLite store)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

from agents.ray.pool import PoolOptions
from orchestrator.access import AccessFile, new_key
from orchestrator.engine import Engine
from orchestrator.render import find_chromium
from orchestrator.system.config import load_config
from tests.oidc_issuer import AUDIENCE, ISSUER, FakeIssuer
from tests.service import KEYS, SERVICE_CONFIG, ServiceProcess


@pytest.fixture(scope="session")
def service_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("service")
    (root / "svc.yaml").write_text(SERVICE_CONFIG)
    return root


@contextmanager
def _serve(
    ray_address: str,
    folder: Path,
    name: str,
    headers: dict[str, str] | None = None,
    store: str | None = None,
    **env: str,
) -> Iterator[ServiceProcess]:
    """`baton serve` on the session's Ray with the shared test config and a SQLite store (its
    own, or that of the service `store` names, whose agents it then shares as a replica)."""
    service = ServiceProcess(
        folder / "svc.yaml",
        f"sqlite+aiosqlite:///{folder / (store or name)}.db",
        ray_address,
        folder / f"{name}.log",
        **env,
    )
    service.start(headers=headers)
    yield service
    service.stop()


@pytest.fixture(scope="session")
def api_service(ray_address: str, service_dir: Path) -> Iterator[ServiceProcess]:
    """The shared test service (`api` is its URL)."""
    with _serve(
        ray_address,
        service_dir,
        "api",
        BATON_SSE_HEARTBEAT_S="1",
        # A blocking A2A send of a long task answers with it working (test_a2a_server).
        BATON_A2A_BLOCKING_WAIT_S="6",
        # A2A push notifications may go to the tests' webhook on 127.0.0.1 (test_a2a_server).
        BATON_A2A_PUSH_ALLOW_PRIVATE="true",
        # Rate limits are tested on the guarded service; schemathesis would only wait here.
        BATON_RATE_LIMIT_PER_S="10000",
        BATON_RATE_LIMIT_BURST="10000",
        # A thread's fourth turn is refused (test_threads).
        BATON_THREAD_MAX_TURNS="3",
    ) as service:
        yield service


@pytest.fixture(scope="session")
def api(api_service: ServiceProcess) -> str:
    return api_service.url


# The same service behind API keys, tight rate limits and a small run queue: a replica of
# `api` (its store, and so its agents' actors: none of its own to start).
@pytest.fixture(scope="session")
def guarded(api: str, ray_address: str, service_dir: Path) -> Iterator[ServiceProcess]:
    with _serve(
        ray_address,
        service_dir,
        "guarded",
        {"Authorization": f"Bearer {KEYS[0]}"},
        store="api",
        BATON_API_KEYS=",".join(KEYS),
        BATON_RATE_LIMIT_PER_S="1",
        BATON_RATE_LIMIT_BURST="8",
        BATON_MAX_CONCURRENT_RUNS="1",
        BATON_MAX_QUEUED_RUNS="1",
        # A request's head that takes longer is answered 408 (test_http_bounds).
        BATON_REQUEST_HEAD_TIMEOUT_S="3",
    ) as service:
        yield service


# Keys of two tenants and of each single role, kept as hashes in an access file: name ->
# (tenant, roles). `tenanted` is a replica of `api` that takes them.
ACCESS = {
    "acme": ("acme", ["submit", "read", "approve"]),
    "globex": ("globex", ["submit", "read", "approve"]),
    "reader": ("acme", ["read"]),
    "submitter": ("acme", ["submit"]),
    "approver": ("acme", ["approve"]),
    "clerk": ("acme", ["submit", "read"]),  # follows its runs, may not approve or answer
    "root": ("ops", ["admin"]),
}


@pytest.fixture(scope="session")
def access_keys(service_dir: Path) -> dict[str, str]:
    """The keys of `ACCESS` (name -> key), their hashes in `service_dir/access.yaml`."""
    keys, file = {}, AccessFile()
    for name, (tenant, roles) in ACCESS.items():
        keys[name], entry = new_key(name, tenant, roles)  # type: ignore[arg-type]
        file.keys.append(entry)
    file.write(service_dir / "access.yaml")
    return keys


@pytest.fixture(scope="session")
def issuer() -> Iterator[FakeIssuer]:
    """An OIDC issuer's keys on 127.0.0.1, whose tokens `tenanted` accepts."""
    issuer = FakeIssuer()
    yield issuer
    issuer.close()


@pytest.fixture(scope="session")
def tenanted(
    api: str,
    ray_address: str,
    service_dir: Path,
    access_keys: dict[str, str],
    issuer: FakeIssuer,
) -> Iterator[ServiceProcess]:
    with _serve(
        ray_address,
        service_dir,
        "tenanted",
        {"Authorization": f"Bearer {access_keys['acme']}"},
        store="api",
        BATON_ACCESS_FILE=str(service_dir / "access.yaml"),
        BATON_SSE_HEARTBEAT_S="1",  # (an open stream rechecks its key at each heartbeat)
        BATON_OIDC_ISSUER=ISSUER,
        BATON_OIDC_AUDIENCE=AUDIENCE,
        BATON_OIDC_JWKS_URL=issuer.jwks_url,
        BATON_RATE_LIMIT_PER_S="10000",
        BATON_RATE_LIMIT_BURST="10000",
    ) as service:
        yield service


@pytest.fixture(scope="session")
def default_engine(ray_address: str) -> Iterator[Engine]:
    """The agents of configs/default.yaml, started once (in the `baton-tests` namespace, where
    `baton run` with the same config finds them too)."""
    engine = Engine(load_config(Path("configs/default.yaml")), PoolOptions(namespace="baton-tests"))
    engine.start()
    yield engine
    engine.stop()


@pytest.fixture
def started(ray_address: str) -> Iterator[list[Engine]]:
    """Engines a test starts (with `tests.testkit.start`), stopped after it."""
    engines: list[Engine] = []
    yield engines
    for engine in engines:
        engine.stop()


# The browser tests' Chromium (Debian's) and pages.


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    chromium = find_chromium()
    if chromium is None:
        pytest.fail("Chromium is not installed; `make test` installs it (apt: chromium)")
    args = ["--disable-gpu", "--disable-background-networking", "--disable-component-update"]
    if os.geteuid() == 0:
        args.append("--no-sandbox")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=args)
        yield launched
        launched.close()


@pytest.fixture
def problems() -> list[str]:
    """Console errors and page errors seen in the test's page."""
    return []


@pytest.fixture
def page(browser: Browser, problems: list[str]) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1600})
    opened = context.new_page()
    opened.on("console", lambda m: _keep_errors(m, problems))
    opened.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    yield opened
    context.close()
    # No script error, no Content-Security-Policy violation, no failed load on any page.
    assert problems == []


def _keep_errors(message: ConsoleMessage, problems: list[str]) -> None:
    if message.type == "error":
        problems.append(message.text)
