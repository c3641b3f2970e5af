"""The protocols' own test kits against `baton serve`: the A2A TCK and the MCP conformance suite.

    python -m tests.conformance.run a2a|mcp|all

Each kit runs against a real `baton serve` on 127.0.0.1 (its own store in a temporary folder).
A test the kit fails that is not in the kit's list of expected failures here fails the run, and
so does one that is listed but now passes (the list says why each one fails, with the spec's
section: `a2a_expected_failures.yaml`, `mcp_expected_failures.yaml`).

- The A2A TCK is not published on a package index: it is taken from `$A2A_TCK` (a checkout of
  github.com/a2aproject/a2a-tck), else from the copy at the pinned commit below kept beside the
  repository (`../shared/a2a-tck`, copied into `.cache/`: the kit writes into its folder), else
  cloned there. When none can be had, the run says so: a failure on CI (`CI` set), where the
  kit must run; elsewhere the A2A kit is skipped (exit code 0).
- The MCP conformance suite comes from npm (pinned), and runs on Node 22 from npm as well.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import yaml

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CACHE = ROOT / ".cache" / "conformance"

TCK_REPO = "https://github.com/a2aproject/a2a-tck"
# Where a copy of the kit at `TCK_COMMIT` is kept beside the repository (CI cannot clone it).
KEPT_TCK = ROOT.parent / "shared" / "a2a-tck"
TCK_COMMIT = "410ba92"  # "Rename `blocking` to `return_immediately`", A2A 1.0
MCP_SUITE = "@modelcontextprotocol/conformance@0.1.16"
NODE = "node@22"  # the suite needs Node 22 (fs.globSync)
# The TCK's categories that decide compliance; the others are reported, not enforced.
ENFORCED = ("mandatory", "capabilities")


@contextmanager
def serving(config: Path, **env: str) -> Iterator[str]:
    """`baton serve` with `config` on a free port, until the block ends; its base URL."""
    port = free_port()
    url = f"http://localhost:{port}"
    with tempfile.TemporaryDirectory(prefix="baton-conformance-") as folder:
        log = Path(folder) / "serve.log"
        settings = {
            "BATON_STORE_URL": f"sqlite+aiosqlite:///{folder}/runs.db",
            "BATON_NAMESPACE": f"conformance-{port}",
            # The card names the service as its clients reach it.
            "BATON_PUBLIC_URL": url,
            "BATON_RATE_LIMIT_PER_S": "10000",
            "BATON_RATE_LIMIT_BURST": "10000",
        }
        command = [sys.executable, "-m", "orchestrator", "serve", "-c", str(config)]
        with log.open("w") as out:
            serve = subprocess.Popen(
                [*command, "--port", str(port)],
                cwd=ROOT,
                env={**os.environ, **settings, **env},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            _wait_ready(url, serve, log)
            yield url
        finally:
            serve.terminate()
            try:
                serve.wait(timeout=60)
            except subprocess.TimeoutExpired:
                serve.kill()


def _wait_ready(url: str, serve: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if serve.poll() is not None:
            sys.exit(f"baton serve stopped before it was ready:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    sys.exit(f"baton serve was not ready in 120 s:\n{log.read_text()}")


def _expected(name: str) -> tuple[dict[str, str], set[str]]:
    """The kit's tests expected to fail here, each with why; those whose outcome is a race."""
    listed = (yaml.safe_load((HERE / name).read_text()) or {}).get("expected_failures", [])
    flaky = {entry["test"] for entry in listed if entry.get("flaky")}
    return {entry["test"]: entry["why"] for entry in listed}, flaky


def _compare(
    kit: str, failed: set[str], passed: set[str], expected: tuple[dict[str, str], set[str]]
) -> bool:
    """Say what failed unexpectedly and what now passes; True when neither happened."""
    reasons, flaky = expected
    new = sorted(failed - reasons.keys())
    fixed = sorted((passed & reasons.keys()) - flaky)
    for test in new:
        print(f"{kit}: FAILED (not expected): {test}")
    for test in fixed:
        print(f"{kit}: now passes, remove it from the expected failures: {test}")
    for test in sorted(failed & reasons.keys()):
        print(f"{kit}: expected failure: {test}\n    {reasons[test]}")
    return not new and not fixed


def _tck() -> Path | None:
    """A checkout of the A2A TCK with its own virtual environment, or None (said why)."""
    given = os.environ.get("A2A_TCK")
    kit = Path(given) if given else CACHE / "a2a-tck"
    if not (kit / "run_tck.py").exists():
        if given:
            sys.exit(f"A2A_TCK={given} is not a checkout of {TCK_REPO} (no run_tck.py)")
        kit.parent.mkdir(parents=True, exist_ok=True)
        if (KEPT_TCK / "run_tck.py").exists():  # (read-only where it is kept)
            shutil.copytree(KEPT_TCK, kit, ignore=shutil.ignore_patterns(".venv", "reports"))
            for path in [kit, *kit.rglob("*")]:
                path.chmod(path.stat().st_mode | 0o200)
        else:
            cloned = subprocess.run(
                ["git", "clone", "--quiet", TCK_REPO, str(kit)], capture_output=True, text=True
            )
            if cloned.returncode != 0:
                shutil.rmtree(kit, ignore_errors=True)
                print(
                    f"A2A TCK: NOT RUN: no copy at {KEPT_TCK}, and cannot clone {TCK_REPO} "
                    f"({cloned.stderr.strip()}); set A2A_TCK to a checkout to run it"
                )
                return None
            subprocess.run(["git", "-C", str(kit), "checkout", "--quiet", TCK_COMMIT], check=True)
    python = kit / ".venv" / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(kit / ".venv")], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-e", str(kit)], check=True)
    return kit


def run_a2a() -> bool:
    """The A2A TCK against the conformance team; True when it went as expected."""
    kit = _tck()
    if kit is None:
        if os.environ.get("CI"):  # where the kit must run, not running it is a failure
            print("A2A TCK: FAILED: CI is set, and the kit could not be had")
            return False
        return True
    # A blocking send answers after half a second with the task still working (the kit follows,
    # lists and cancels the tasks it sends that way); the team's model takes three.
    # Its webhooks are on localhost and example.com (which need not resolve here).
    settings = {"BATON_A2A_BLOCKING_WAIT_S": "0.5", "BATON_A2A_PUSH_ALLOW_PRIVATE": "true"}
    with serving(HERE / "a2a_team.yaml", **settings) as url:
        reports = kit / "reports"
        shutil.rmtree(reports, ignore_errors=True)
        # The kit sends A2A 1.0's methods without saying so: a missing A2A-Version header
        # means 0.3 (A2A 1.0 §3.6.1), so the header is added as the kit allows.
        env = {"A2A_AUTH_TYPE": "custom", "A2A_AUTH_HEADER": "A2A-Version"}
        env |= {"A2A_AUTH_TOKEN": "1.0"}
        started = time.monotonic()
        command = [str(kit / ".venv" / "bin" / "python"), "run_tck.py", "--sut-url", url]
        command += ["--category", "all", "--compliance-report", str(reports / "compliance.json")]
        reports.mkdir()
        with (reports / "tck.log").open("w") as log:
            subprocess.run(command, cwd=kit, env={**os.environ, **env}, stdout=log, stderr=log)
        took = time.monotonic() - started
        print(f"A2A TCK: ran in {took:.0f} s against {url} (its output: {reports / 'tck.log'})")
    failed: set[str] = set()
    passed: set[str] = set()
    for report in sorted(reports.glob("*_jsonrpc_results.json")):
        category = report.name.split("_")[0]
        tests = json.loads(report.read_text())["tests"]
        counts = {o: sum(t["outcome"] == o for t in tests) for o in ("passed", "failed")}
        print(f"A2A TCK {category}: {counts['passed']} passed, {counts['failed']} failed")
        if category in ENFORCED:
            failed |= {t["nodeid"] for t in tests if t["outcome"] == "failed"}
            passed |= {t["nodeid"] for t in tests if t["outcome"] == "passed"}
    if not passed:
        print("A2A TCK: no report: the kit did not run")
        return False
    return _compare("A2A TCK", failed, passed, _expected("a2a_expected_failures.yaml"))


def run_mcp() -> bool:
    """The MCP conformance suite's server scenarios against `/mcp`; True when as expected."""
    with serving(ROOT / "configs" / "default.yaml") as url:
        command = ["npx", "--yes", "-p", NODE, "-p", MCP_SUITE, "conformance", "server"]
        command += ["--url", f"{url}/mcp"]
        command += ["--expected-failures", str(HERE / "mcp_expected_failures.yaml")]
        command += ["--output-dir", str(CACHE / "mcp-results")]
        done = subprocess.run(command, cwd=ROOT)
    return done.returncode == 0


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    kits = {"a2a": run_a2a, "mcp": run_mcp}
    chosen = list(kits) if which == "all" else [which]
    results = [kits[name]() for name in chosen]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
