"""The shipped workflow examples (`configs/examples/`): each runs offline and its dataset passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.orchestrator.evals.test_evals import _eval

pytestmark = [pytest.mark.ray, pytest.mark.long]
EXAMPLES = Path(__file__).resolve().parents[3] / "configs" / "examples"


@pytest.mark.parametrize("example", ["research", "writing", "triage"])
def test_each_example_passes_its_dataset(example: str, ray_address: str, tmp_path: Path) -> None:
    junit = tmp_path / "results.xml"
    done = _eval(
        ray_address, tmp_path, str(EXAMPLES / f"{example}.eval.yaml"),
        "-c", str(EXAMPLES / f"{example}.yaml"), "--json", "--junit", str(junit),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    [result] = json.loads(done.stdout)
    assert result["outcome"] == "pass", result
    assert 'failures="0"' in junit.read_text()
