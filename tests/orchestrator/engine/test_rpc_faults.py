"""Runs on a Ray of the test's own whose actor calls fail as Ray's own fault tests make them fail
(`RAY_testing_rpc_failure` on the calls to the hosts and to the ledger: a request lost before
it reached its actor, or a reply lost after the actor ran the call): every run ends (nearly
all succeed: a lost call is made again), the at-most-once tool ran at most once a run, and a
retried idempotent call reused its key."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = [pytest.mark.heavy]

RUNS = 8
# Calls to actors (agent hosts, ledger shards) fail in every process of that Ray: a quarter of
# them lose their request, a quarter their reply, until each process has failed this many.
FAULTS = {
    "CoreWorkerService.grpc_client.PushTask": {
        "num_failures": 12,
        "req_failure_prob": 25,
        "resp_failure_prob": 25,
    }
}


def test_runs_end_and_effects_happen_once_when_actor_calls_lose_requests_and_replies(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.rpc_faults", json.dumps(FAULTS), str(RUNS), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads((tmp_path / "result.json").read_text())
    runs = result["runs"]
    # Every run ended, as a run ends: none raised out of the engine or was left hanging.
    assert len(runs) == RUNS
    ended = Counter(r["status"] for r in runs.values())
    assert set(ended) <= {"succeeded", "failed"}, runs
    # A call lost on its way to or from an actor that still answers is made again: the runs
    # succeed (one may spend its retries where the faults fall thickest).
    assert ended["succeeded"] >= RUNS - 1, runs
    for run in runs.values():
        if run["status"] == "succeeded":
            assert run["output"] == "done"
            assert run["events"][0] == "run_started" and run["events"][-1] == "run_finished"
        else:  # a failure says why (a call whose effect may have happened is not made again)
            assert run["error"], run
    # The parcels were counted at most once a run, and once by every run that succeeded.
    assert ended["succeeded"] <= len(result["parcels"]) <= RUNS
    # The flaky service's tries: each call's retry reused its first try's key, so every key
    # was tried at least twice, and no run's call was made under two keys.
    tries = Counter(result["keys"])
    assert ended["succeeded"] <= len(tries) <= RUNS, tries
    assert all(n >= 2 for n in tries.values()), tries
