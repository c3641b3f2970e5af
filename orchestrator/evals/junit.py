"""A dataset's results as JUnit XML, which every CI shows: one test case per case's run."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from orchestrator.evals.runner import CaseResult

__all__ = ["write_junit"]


def write_junit(path: Path, dataset: str, results: list[CaseResult]) -> None:
    """Write `results` as one `<testsuite>` named after the dataset."""
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=dataset,
        tests=str(len(results)),
        failures=str(sum(r.outcome == "fail" for r in results)),
        errors=str(sum(r.outcome == "error" for r in results)),
        skipped="0",
        time=f"{sum(r.run.duration_s for r in results if r.run):.3f}",
    )
    for result in results:
        name = (
            result.case.name if result.repeat == 0 else f"{result.case.name} #{result.repeat + 1}"
        )
        case = ET.SubElement(
            suite,
            "testcase",
            classname=dataset,
            name=name,
            time=f"{result.run.duration_s:.3f}" if result.run else "0",
        )
        if result.run is not None:
            properties = ET.SubElement(case, "properties")
            for key, value in (
                ("run_id", result.run.run_id),
                ("cost_usd", f"{result.run.cost_usd:.6f}"),
                ("tokens", str(result.run.tokens)),
            ):
                ET.SubElement(properties, "property", name=key, value=value)
        if result.outcome == "error":
            why = result.error or "; ".join(f"{v.name}: {v.detail}" for v in result.failed)
            ET.SubElement(case, "error", message=why[:500], type="error").text = why
        elif result.outcome == "fail":
            said = "\n".join(f"{v.name}: {v.detail}" for v in result.failed)
            first = result.failed[0]
            message = f"{first.name}: {first.detail}".splitlines()[0][:500]
            ET.SubElement(case, "failure", message=message, type="expectation").text = said
    ET.indent(suites)
    path.write_bytes(ET.tostring(suites, encoding="utf-8", xml_declaration=True))
