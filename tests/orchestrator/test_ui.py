"""The web UI in a real headless Chromium (Debian's), served by `baton serve` on 127.0.0.1."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import Page

pytestmark = [pytest.mark.ray, pytest.mark.browser]


def texts(page: Page, selector: str) -> list[str]:
    return [t.strip() for t in page.locator(selector).all_text_contents()]


def test_a_task_submitted_in_the_browser_is_watched_live_to_its_end(api: str, page: Page) -> None:
    answer = page.goto(f"{api}/")
    assert answer is not None
    assert "script-src 'self'" in answer.headers["content-security-policy"]
    page.wait_for_selector("#agent option[value=sleeper]", state="attached")
    page.fill("#task", "calculate 6 * 7, and wait for it")
    page.select_option("#agent", "coordinator")
    page.click("#run-button")
    page.wait_for_url(re.compile(r"/runs/[0-9a-f]{32}$"))
    run_id = page.url.rsplit("/", 1)[1]

    # While the sleeper works (3 s), the page is live: open spans in the waterfall, and the
    # diagram already has the agents that have been called.
    page.wait_for_selector("body[data-state=live]", timeout=15_000)
    page.wait_for_selector("#waterfall .span-row.open", timeout=15_000)
    page.wait_for_function(
        "document.querySelector('#diagram svg')?.textContent.includes('sleeper')", timeout=15_000
    )
    # (On a loaded machine the 3 s run may be over by now: the live checks above stand.)
    assert texts(page, "#run-status")[0] in ("running", "succeeded")

    page.wait_for_selector("body[data-state=finished]", timeout=30_000)
    assert texts(page, "#run-status") == ["succeeded"]
    assert "calculate: 42" in page.inner_text("#run-answer")
    actors = set(texts(page, "#diagram svg text.actor"))
    assert {"Client", "Orchestrator", "coordinator", "analyst", "sleeper"} <= actors

    diagram = httpx.get(f"{api}/v1/runs/{run_id}/diagram", params={"format": "json"}).json()
    trace = httpx.get(f"{api}/v1/runs/{run_id}/trace").json()
    numbers = texts(page, "#diagram svg .sequenceNumber")
    assert numbers == [str(n) for n in range(1, len(diagram["arrows"]) + 1)]
    assert page.locator("#diagram svg .messageText").count() == len(diagram["arrows"])
    # The waterfall shows every span, none still open.
    assert page.locator("#waterfall .span-row").count() == trace["span_count"] > 10
    assert page.locator("#waterfall .span-row.open").count() == 0

    # A numbered arrow leads to its span.
    page.locator("#diagram svg .sequenceNumber").nth(2).click()
    assert diagram["arrows"][2] in page.inner_text("#span-details")
    selected = page.locator("#waterfall .span-row.selected")
    assert selected.get_attribute("data-span") == diagram["arrows"][2]

    # And the run is listed on the runs page.
    page.goto(f"{api}/")
    page.wait_for_selector(f"#runs tr[data-run='{run_id}']")


def test_the_agents_page_draws_the_topology(api: str, page: Page) -> None:
    page.goto(f"{api}/agents")
    page.wait_for_selector("#topology svg")
    nodes = " ".join(texts(page, "#topology svg .nodeLabel"))
    assert "coordinator · depth 1" in nodes and "sleeper · depth 2" in nodes
    assert texts(page, "#agents tbody td:first-child") == [
        "coordinator (entry)",
        "analyst",
        "sleeper",
        "lead",
        "clerk",
        "vault",
    ]


def test_a_run_page_for_an_unknown_run_says_so(api: str, page: Page, problems: list[str]) -> None:
    page.goto(f"{api}/runs/{'0' * 32}")
    page.wait_for_selector("main > p.error")
    assert "no run" in page.inner_text("main > p.error")
    assert all("404" in p for p in problems)  # the browser notes the failed fetch
    problems.clear()
