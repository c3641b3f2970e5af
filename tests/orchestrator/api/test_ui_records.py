"""What the UI says about a run is true, in a real headless Chromium: forks and replays say what
they come from and which steps were taken from the record, differences are said in words (as
`baton compare` says them), the live page counts, hand-offs read as hand-offs, short ids work."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from orchestrator.engine import Submission
from orchestrator.store import RunMeta, RunStore
from tests.service import STORY

pytestmark = [pytest.mark.ray, pytest.mark.browser, pytest.mark.heavy]


def texts(page: Page, selector: str) -> list[str]:
    return [t.strip() for t in page.locator(selector).all_text_contents()]


def finished(api: str, page: Page, body: dict[str, object]) -> str:
    """A run submitted over HTTP, its page open once it has ended."""
    run_id = str(httpx.post(f"{api}/v1/runs", json=body).json()["id"])
    page.goto(f"{api}/runs/{run_id}")
    page.wait_for_selector("body[data-state=finished]", timeout=30_000)
    return run_id


def baton(service_dir: Path, *args: str) -> str:
    """`baton ARGS` on the UI's service store; its stdout."""
    env = {**os.environ, "BATON_STORE_URL": f"sqlite+aiosqlite:///{service_dir / 'api.db'}"}
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True, text=True, timeout=60, check=False, env={**env, "COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def detail_rows(page: Page) -> dict[str, str]:
    """The span details' table: name to value."""
    names = texts(page, "#span-details table.attributes th")
    return dict(zip(names, texts(page, "#span-details table.attributes td"), strict=False))


def trace_spans(api: str, run_id: str) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    todo = list(httpx.get(f"{api}/v1/runs/{run_id}/trace").json()["spans"])
    while todo:
        node = todo.pop()
        found.append(node)
        todo.extend(node["children"])
    return found


def test_a_fork_from_a_delegation_keeps_what_came_before_and_says_where_it_came_from(
    api: str, page: Page, service_dir: Path
) -> None:
    original = finished(api, page, {"task": "calculate 6 * 7", "agent": "coordinator"})
    # The run's own span is no step of its record: the page says so before anything runs.
    page.locator("#waterfall .span-row").first.click()
    expect(page.locator("#fork-why")).to_contain_text("not a step of its record")
    assert page.locator("#fork-button").count() == 0
    # The coordinator's delegation to the analyst is one: fork from it.
    page.locator("#waterfall .span-row[title='execute_tool delegate_to_analyst']").click()
    page.click("#fork-button")
    page.wait_for_url(re.compile(rf"/runs/(?!{original})[0-9a-f]{{32}}$"))
    forked = page.url.rsplit("/", 1)[1]
    page.wait_for_selector("body[data-compared=yes]", timeout=30_000)

    # The header says what it is a fork of, and from which step.
    step = "coordinator, step 1: delegated to analyst"
    lineage = page.inner_text("#run-lineage")
    assert lineage.startswith(f"Fork of run {original[:12]}") and step in lineage, lineage
    # The model call that asked for the delegation was taken from the record, not made again;
    # the delegation and what followed ran live. The waterfall and the diagram say which.
    replayed = {
        str(s["span_id"])
        for s in trace_spans(api, forked)
        if s["attributes"].get("baton.step.replayed")  # type: ignore[union-attr]
    }
    assert len(replayed) == 1
    rows = page.locator("#waterfall .span-row.replayed")
    assert {rows.nth(i).get_attribute("data-span") for i in range(rows.count())} == replayed
    assert texts(page, "#waterfall .span-row.replayed .span-time") == ["replayed"]
    page.select_option("#detail", "full")
    expect(page.locator("#diagram svg").filter(has_text="↻ replayed")).to_have_count(1)
    # The offline model answers as before: the same steps.
    assert page.inner_text("#compare-verdict").startswith("The same steps, one for one")

    # The runs list and the CLI label it too.
    page.goto(f"{api}/")
    tag = page.locator(f"#runs tr[data-run='{forked}'] .lineage")
    expect(tag).to_have_text(f"fork of {original[:12]}")
    assert f"(fork of {original[:12]})" in baton(service_dir, "runs", "--limit", "50")
    shown = baton(service_dir, "show", forked[:12])
    assert f"fork of run {original}, live from {step}" in shown


def test_two_runs_differences_are_said_in_words_the_same_in_the_ui_api_and_cli(
    api: str, page: Page, service_dir: Path
) -> None:
    other = finished(api, page, {"task": "say hello", "agent": "coordinator"})  # no delegation
    run = finished(api, page, {"task": "calculate 6 * 7", "agent": "coordinator"})
    page.goto(f"{api}/runs/{run}?compare={other[:12]}")
    page.wait_for_selector("body[data-compared=yes]", timeout=30_000)
    said = texts(page, "#compare-differences li")
    assert "coordinator, step 1: answered directly, now delegates to analyst" in said
    assert "analyst: not called before, now called" in said
    compared = httpx.get(f"{api}/v1/runs/{run}/compare", params={"with": other}).json()
    assert compared["differences"] == said and compared["same"] is False
    printed = baton(service_dir, "compare", run, other).splitlines()
    assert printed[0] == f"run {run[:12]} compared with run {other[:12]}:"
    assert printed[1:] == [f"- {sentence}" for sentence in said]
    verdict = page.inner_text("#compare-verdict")
    assert verdict.startswith(f"{len(said)} differences in its steps")
    assert "First difference" in verdict

    # One diagram above the other, each at its own size (scrolled, not shrunk to fit).
    this, that = page.locator("#compare-this svg"), page.locator("#compare-other svg")
    box_this, box_that = this.bounding_box(), that.bounding_box()
    assert box_this is not None and box_that is not None
    assert box_that["y"] >= box_this["y"] + box_this["height"]
    for svg, box in ((this, box_this), (that, box_that)):
        natural = float(str(svg.get_attribute("viewBox")).split()[2])
        assert abs(box["width"] - natural) < 2, (box["width"], natural)


def test_the_live_page_counts_and_the_answer_grows_where_it_is_read(api: str, page: Page) -> None:
    def submit_in_the_page(agent: str) -> None:
        page.goto(f"{api}/")
        page.wait_for_selector(f"#agent option[value={agent}]", state="attached")
        page.fill("#task", "tell a story")
        page.select_option("#agent", agent)
        page.click("#run-button")  # the form asks for streaming
        page.wait_for_url(re.compile(r"/runs/[0-9a-f]{32}$"))

    # The dozer's tool takes a minute: while it works, its first model call is counted, with
    # its tokens, the entry agent is named, and the clock runs.
    submit_in_the_page("dozer")
    dozing = page.url.rsplit("/", 1)[-1]
    try:
        expect(page.locator("[data-meta=model-calls]")).to_have_text("1", timeout=20_000)
        assert page.locator("body[data-state=live]").count() == 1
        assert page.inner_text("[data-meta=entry]") == "dozer"
        assert re.fullmatch(r"[1-9]\d*/\d+", page.inner_text("[data-meta=tokens]"))
        ticked = page.inner_text("[data-meta=duration]")
        expect(page.locator("[data-meta=duration]")).not_to_have_text(ticked, timeout=5_000)
        # The diagram's note counts the tokens of the calls made so far.
        counted = re.compile(r"dozer: 1 invocation, 1 model call · [1-9]\d*/\d+ tokens")
        diagram = page.locator("#diagram svg").filter(has_text=counted)
        expect(diagram).to_have_count(1, timeout=10_000)
    finally:
        httpx.post(f"{api}/v1/runs/{dozing}/cancel", timeout=30)
    # The narrator's answer grows in the Answer box, as it is written.
    submit_in_the_page("narrator")
    answer = page.locator("#run-answer")
    expect(answer).to_contain_text("word05", timeout=20_000)
    partial = answer.inner_text()
    assert STORY.startswith(partial) and "word39" not in partial
    page.wait_for_selector("body[data-state=finished]", timeout=30_000)
    assert answer.inner_text() == STORY
    assert page.locator("#live-text").is_hidden()  # no other agent wrote
    assert page.inner_text("[data-meta=model-calls]") == "2"


def test_span_details_read_as_a_person_would_say_them(api: str, page: Page) -> None:
    run = finished(api, page, {"task": "calculate 6 * 7", "agent": "coordinator"})
    spans = {str(s["span_id"]): s for s in trace_spans(api, run)}
    rows = page.locator("#waterfall .span-row")
    # Rows lead with what the span is about: the run, an agent, a model, a tool.
    subjects = texts(page, "#waterfall .span-row .subject")
    assert subjects[:3] == ["run", "coordinator", "offline"]
    assert "→ analyst" in subjects and "calculate" in subjects
    # An agent's children are links, each named by kind and subject, and lead to the child.
    page.locator("#waterfall .span-row[title='invoke_agent analyst']").click()
    selected = page.locator("#waterfall .span-row.selected")
    assert selected.get_attribute("title") == "invoke_agent analyst"
    assert selected.evaluate("r => getComputedStyle(r).boxShadow") != "none"  # marked
    analyst = spans[str(selected.get_attribute("data-span"))]
    links = page.locator("#span-details .places li", has_text="children").locator("a")
    assert links.count() == len(analyst["children"]) >= 2  # type: ignore[arg-type]
    assert links.all_text_contents()[:2] == ["model call offline", "tool call calculate"]
    rows_of = detail_rows(page)
    assert rows_of["kind"] == "agent"
    links.nth(0).click()
    # A model call: its kind in words, its time to the millisecond, the tools it offered.
    assert page.inner_text("#span-details h3") == "model call · offline"
    rows_of = detail_rows(page)
    assert rows_of["kind"] == "model call"
    assert re.fullmatch(r"\d{2}:\d{2}:\d{2}\.\d{3}", rows_of["started"]), rows_of["started"]
    offered = page.locator("#span-details ul.tools-offered li code")
    assert "calculate" in offered.all_text_contents()
    assert rows.count() == len(spans)


def test_a_hand_off_reads_as_a_transfer_and_the_agents_page_shows_it(api: str, page: Page) -> None:
    finished(api, page, {"task": "refund my order", "agent": "desk"})
    assert texts(page, "#run-status") == ["succeeded"]
    assert page.inner_text("[data-meta=entry]") == "desk"
    assert page.inner_text("[data-meta=answered-by]") == "refunds"
    diagram = page.inner_text("#diagram")
    assert "transfer_to_refunds" in diagram
    assert "answers for desk" in diagram and "answer from refunds" in diagram
    assert " ok " not in f" {diagram} "

    page.goto(f"{api}/agents")
    page.wait_for_selector("#topology svg")
    assert "hands over" in page.inner_text("#topology")
    row = {
        texts(page, f"#agents tbody tr:nth-child({i}) td:first-child")[0]: i
        for i in range(1, page.locator("#agents tbody tr").count() + 1)
    }
    desk, refunds = (f"#agents tbody tr:nth-child({row[name]})" for name in ("desk", "refunds"))
    assert page.inner_text(f"{desk} td.handoffs") == "refunds"
    assert texts(page, f"{refunds} td.guardrails li") == ["input: no-threats"]
    assert page.inner_text(f"{refunds} td.output-schema") == "JSON: approved, amount"


def test_a_run_page_takes_a_short_id_and_says_when_one_is_ambiguous(
    api: str, page: Page, service_dir: Path, problems: list[str]
) -> None:
    run = finished(api, page, {"task": "say hello", "agent": "coordinator"})
    for short in (run[:12], run[:7]):
        page.goto(f"{api}/runs/{short}")
        page.wait_for_selector("body[data-state=finished]", timeout=30_000)
        assert page.url == f"{api}/runs/{run}"  # named in full from then on
        assert page.inner_text("#run-title") == f"Run {run[:12]}"
        assert page.locator("#waterfall .span-row").count() > 2

    # Two runs that begin alike: their common prefix names neither.
    async def two_alike() -> None:
        store = await RunStore.open(f"sqlite+aiosqlite:///{service_dir / 'api.db'}")
        try:
            for tail in ("0" * 22, "1" * 22):
                await store.add(Submission("alike"), RunMeta(f"abcdef0123{tail}", "svc", {}))
        finally:
            await store.close()

    with ThreadPoolExecutor(1) as pool:  # (the page's event loop runs in this thread)
        pool.submit(asyncio.run, two_alike()).result()
    page.goto(f"{api}/runs/abcdef01")
    page.wait_for_selector("main > p.error")
    said = page.inner_text("main > p.error")
    assert "ambiguous" in said and "abcdef0123000" in said and "abcdef0123111" in said
    assert problems and all("400" in p for p in problems)
    problems.clear()
