"""The web UI in a real headless Chromium (Debian's), served by `baton serve` on 127.0.0.1."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from playwright.sync_api import Page, expect

pytestmark = [pytest.mark.ray, pytest.mark.browser]


def texts(page: Page, selector: str) -> list[str]:
    return [t.strip() for t in page.locator(selector).all_text_contents()]


def test_a_task_submitted_in_the_browser_is_watched_live_to_its_end(api: str, page: Page) -> None:
    answer = page.goto(f"{api}/")
    assert answer is not None
    assert "script-src 'self'" in answer.headers["content-security-policy"]
    page.wait_for_selector("#agent option[value=sleeper]", state="attached")

    def submit_in_the_page(task: str, agent: str) -> str:
        page.fill("#task", task)
        page.select_option("#agent", agent)
        page.click("#run-button")
        page.wait_for_url(re.compile(r"/runs/[0-9a-f]{32}$"))
        return page.url.rsplit("/", 1)[1]

    # While the dozer works (a minute), the page is live: open spans in the waterfall, and the
    # diagram already has the agents that have been called.
    dozing = submit_in_the_page("wait a minute", "dozer")
    try:
        page.wait_for_selector("body[data-state=live]", timeout=15_000)
        page.wait_for_selector("#waterfall .span-row.open", timeout=15_000)
        # (A locator, not `wait_for_function`: the page's CSP forbids the eval that polling
        # needs.)
        expect(page.locator("#diagram svg").filter(has_text="dozer")).to_have_count(
            1, timeout=15_000
        )
        assert texts(page, "#run-status")[0] == "running"
    finally:
        httpx.post(f"{api}/v1/runs/{dozing}/cancel", timeout=30)

    # A run through the team, watched to its end.
    page.goto(f"{api}/")
    page.wait_for_selector("#agent option[value=sleeper]", state="attached")
    run_id = submit_in_the_page("calculate 6 * 7, and wait for it", "coordinator")
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

    # A model call's details: a table with human times, the conversation as a chat, and its
    # place in the run (the parent leads to the agent's span).
    chat = page.locator("#waterfall .span-row[title='chat offline']").first
    chat.click()
    details = page.locator("#span-details")
    rows = dict(zip(texts(page, "#span-details table.attributes th"),
                    texts(page, "#span-details table.attributes td"), strict=False))  # fmt: skip
    assert rows["status"] == "ok" and re.fullmatch(r"[\d.]+ (µs|ms|s)", rows["duration"])
    assert re.search(r"\d{1,2}:\d{2}:\d{2}", rows["started"])
    assert "UNSET" not in details.inner_text()
    roles = texts(page, "#span-details .chat .role")
    assert "user" in roles[:2] and roles[-1].startswith("assistant ·")
    assert "calculate 6 * 7" in details.locator(".chat").first.inner_text()
    details.locator(".places a", has_text="agent ").first.click()
    assert page.inner_text("#span-details h3").startswith("agent · ")

    # Waterfall rows: status and kind, and the tokens and cost of the subtree (the root's are
    # the run's); a filter keeps matching rows and those above them; subtrees fold.
    run = httpx.get(f"{api}/v1/runs/{run_id}").json()
    root = page.locator("#waterfall .span-row").first
    assert root.locator(".status-icon").inner_text() == "✓"
    assert root.locator(".kind-icon").inner_text() == "R"
    usage = run["usage"]
    assert root.locator(".span-usage").inner_text() == (
        f"{usage['input_tokens']}/{usage['output_tokens']} · $0.00"
    )
    visible = "#waterfall .span-row:visible"
    page.fill("#span-filter", "execute_tool calculate")
    assert texts(page, f"{visible} .span-name")[-1].endswith("calculate")
    kept = page.locator(visible).count()
    assert 2 < kept < trace["span_count"]  # the match and the spans above it
    assert page.inner_text("#span-count") == f"{kept} of {trace['span_count']} spans"
    page.fill("#span-filter", "")
    root.locator("button.fold").click()
    assert page.locator(visible).count() == 1
    root.locator("button.fold").click()
    assert page.locator(visible).count() == trace["span_count"]

    # And the run is listed on the runs page.
    page.goto(f"{api}/")
    row = page.locator(f"#runs tr[data-run='{run_id}']")
    row.wait_for()
    # The built-in model is free: $0.00, not "unknown"; and the totals of every listed run.
    assert row.locator("td").nth(7).inner_text() == "$0.00"
    # The version of the team it ran on (this team has no release label: its digest).
    stored = httpx.get(f"{api}/v1/runs/{run_id}").json()
    assert row.locator("td").nth(3).inner_text() == stored["version"]
    totals = page.inner_text("#runs-total")
    shape = r"All \d+ matching runs: tokens \d+/\d+, \d+ model calls, cost \$0\.00"
    assert re.fullmatch(shape, totals), totals


def test_the_agents_page_draws_the_topology(api: str, page: Page) -> None:
    page.goto(f"{api}/agents")
    page.wait_for_selector("#topology svg")
    nodes = " ".join(texts(page, "#topology svg .nodeLabel"))
    assert "coordinator · depth 1" in nodes and "sleeper · depth 2" in nodes
    assert texts(page, "#agents tbody td:first-child") == [
        "coordinator (entry)",
        "analyst",
        "sleeper",
        "dozer",
        "narrator",
        "desk",
        "refunds",
        "parrot",
        "teller",
        "notary",
        "scribe",
        "lead",
        "clerk",
        "vault",
        "pipeline",
        "fanout",
        "profiler",
        "keeper",
    ]
    # The version of the team new runs go to (the only one running).
    served = httpx.get(f"{api}/v1/service").json()
    assert page.inner_text("#versions") == f"Version {served['system_version']} (new runs)"


def test_a_run_page_for_an_unknown_run_says_so(api: str, page: Page, problems: list[str]) -> None:
    page.goto(f"{api}/runs/{'0' * 32}")
    page.wait_for_selector("main > p.error")
    assert "no run" in page.inner_text("main > p.error")
    assert all("404" in p for p in problems)  # the browser notes the failed fetch
    problems.clear()


def test_a_fork_from_an_arrow_is_shown_beside_its_original(api: str, page: Page) -> None:
    def finished_run(task: str) -> str:
        answer = httpx.post(f"{api}/v1/runs", json={"task": task, "agent": "coordinator"})
        run_id = str(answer.json()["id"])
        page.goto(f"{api}/runs/{run_id}")
        page.wait_for_selector("body[data-state=finished]", timeout=30_000)
        return run_id

    other = finished_run("say hello")  # answered at once: no delegation
    original = finished_run("calculate 6 * 7")
    page.select_option("#detail", "full")
    diagram = httpx.get(
        f"{api}/v1/runs/{original}/diagram", params={"format": "json", "detail": "full"}
    ).json()
    spans = {s["span_id"]: s for s in _walk(httpx.get(f"{api}/v1/runs/{original}/trace").json())}
    # The arrow of the analyst's first model call.
    arrow = next(
        i
        for i, span_id in enumerate(diagram["arrows"])
        if spans[span_id]["name"].startswith("chat ")
        and spans[spans[span_id]["parent_span_id"]]["name"] == "invoke_agent analyst"
    )
    # (The full diagram has more arrows than the one it replaces: wait for its last.)
    page.locator("#diagram svg .sequenceNumber").nth(len(diagram["arrows"]) - 1).wait_for()
    page.locator("#diagram svg .sequenceNumber").nth(arrow).click()
    page.click("#fork-button")
    page.wait_for_url(re.compile(rf"/runs/(?!{original})[0-9a-f]{{32}}$"))
    forked = page.url.rsplit("/", 1)[1]
    assert forked != original
    page.wait_for_selector("body[data-compared=yes]", timeout=30_000)
    assert texts(page, "#compare-link") == [f"run {original[:12]}"]
    assert page.locator("#compare-this svg").count() == page.locator("#compare-other svg").count()
    # The offline model answers the same when asked again: the same diagram.
    assert "The same diagram" in page.inner_text("#compare-verdict")
    fork = httpx.get(f"{api}/v1/runs/{forked}").json()
    assert fork["replay_of"] == original and fork["fork"] is True

    # Beside a different run, the first arrow that differs is marked in both diagrams.
    page.goto(f"{api}/runs/{forked}?compare={other}")
    page.wait_for_selector("body[data-compared=yes]", timeout=30_000)
    assert "First difference at arrow" in page.inner_text("#compare-verdict")
    assert page.locator("#compare-this svg .first-difference").count() >= 1
    assert page.locator("#compare-other svg .first-difference").count() >= 1


def _walk(trace: dict[str, object]) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    todo = list(trace["spans"])  # type: ignore[call-overload]
    while todo:
        node = todo.pop()
        found.append(node)
        todo.extend(node["children"])
    return found


def test_a_conversation_started_and_continued_in_the_browser_is_shown_turn_by_turn(
    api: str, page: Page
) -> None:
    def turns_of(thread: str) -> list[dict]:
        return list(httpx.get(f"{api}/v1/threads/{thread}").json()["turns"])

    # Started on the threads page: its first turn (the dozer takes a minute) is drawn live.
    page.goto(f"{api}/threads")
    page.wait_for_selector("#agent option[value=dozer]", state="attached")
    page.fill("#task", "doze off")
    page.select_option("#agent", "dozer")
    page.click("#start-button")
    page.wait_for_url(re.compile(r"/threads/[0-9a-f]{32}$"))
    thread = page.url.rsplit("/", 1)[1]
    dozing = turns_of(thread)[0]["run_id"]
    card = page.locator(f".turn[data-run='{dozing}']")
    expect(card.locator(".diagram svg").filter(has_text="dozer")).to_have_count(1, timeout=15_000)
    assert page.locator("body").get_attribute("data-state") == "live"
    httpx.post(f"{api}/v1/runs/{dozing}/cancel")
    expect(page.locator(f".turn[data-run='{dozing}'][data-status=cancelled]")).to_have_count(
        1, timeout=15_000
    )
    # The next turn from the page's form, to the agent chosen there.
    page.wait_for_selector("#agent option[value=parrot]", state="attached")
    page.fill("#task", "and now?")
    page.select_option("#agent", "parrot")
    page.click("#send-button")
    expect(page.locator(".turn")).to_have_count(2, timeout=15_000)
    assert page.input_value("#task") == ""
    asked = turns_of(thread)[1]
    assert (asked["task"], asked["run_id"] != dozing) == ("and now?", True)
    expect(
        page.locator(f".turn[data-run='{asked['run_id']}'][data-status=succeeded]")
    ).to_have_count(1, timeout=15_000)
    # A turn submitted meanwhile (here through the API) appears, with its answer and diagram.
    answer = httpx.post(f"{api}/v1/threads/{thread}/runs", json={"task": "more", "agent": "parrot"})
    assert answer.status_code == 202, answer.text
    answered = str(answer.json()["id"])
    second = page.locator(f".turn[data-run='{answered}'][data-status=succeeded]")
    expect(second).to_have_count(1, timeout=15_000)
    expect(second.locator(".diagram svg").filter(has_text="parrot")).to_have_count(1)
    assert texts(page, ".turn h2")[0].startswith("Turn 1")
    assert second.locator("pre.answer").inner_text().endswith("answer")
    page.wait_for_selector("body[data-state=finished]")
    # The threads page lists it: what it began with, how many turns.
    page.goto(f"{api}/threads")
    row = page.locator(f"#threads tr[data-thread='{thread}']")
    expect(row.locator("td.turn-count")).to_have_text("3")
    expect(row.locator("td.task")).to_have_text("doze off")
    # The turn's run page names its thread.
    page.goto(f"{api}/runs/{answered}")
    link = page.locator("#thread-link")
    expect(link).to_have_attribute("href", f"/threads/{thread}")


def test_the_thread_and_run_pages_show_the_shared_state_and_who_answered(
    api: str, page: Page
) -> None:
    thread = httpx.post(f"{api}/v1/threads").json()["id"]
    made = httpx.post(
        f"{api}/v1/threads/{thread}/runs", json={"task": "add to the tally", "agent": "keeper"}
    ).json()["id"]
    assert "run_finished" in httpx.get(f"{api}/v1/runs/{made}/events", timeout=30).text
    page.goto(f"{api}/threads/{thread}")
    expect(page.locator("#thread-state-heading")).to_have_text("Shared state (version 1)")
    assert json.loads(page.inner_text("#thread-state")) == {"tally": 1}
    card = page.locator(f".turn[data-run='{made}']")
    expect(card.locator(".turn-agents")).to_have_text("entered at keeper, which answered")
    page.goto(f"{api}/runs/{made}")
    expect(page.locator("#state-heading")).to_be_visible()
    assert json.loads(page.inner_text("#run-state")) == {"tally": 1}


def test_experiments_are_listed_and_one_is_compared_with_another_case_by_case(
    api: str, page: Page
) -> None:
    made = httpx.post(f"{api}/v1/runs", json={"task": "calculate 6 * 7"}, timeout=30).json()
    dataset = f"ui-{made['id'][:6]}"  # (other tests' experiments are on this service too)

    def kept(outcome: str, detail: str) -> str:
        verdicts = [{"name": "answer", "passed": outcome == "pass", "detail": detail}]
        body = {
            "dataset": dataset,
            "dataset_digest": "0" * 64,
            "config": "svc",
            "config_digest": "abc",
            "results": [
                {"case": "multiplies", "outcome": outcome, "run_id": made["id"],
                 "cost_usd": 0.0, "duration_s": 0.2, "tokens": 365, "verdicts": verdicts},
            ],
        }  # fmt: skip
        answer = httpx.post(f"{api}/v1/experiments", json=body, timeout=30)
        assert answer.status_code == 201, answer.text
        return str(answer.json()["id"])

    before, after = kept("fail", "answer: 41"), kept("pass", "")
    page.goto(f"{api}/experiments")
    row = page.locator(f"#experiments tr[data-experiment='{after}']")
    expect(row.locator("td.passed")).to_have_text("1/1 (100%)")
    row.locator("a").click()
    page.wait_for_url(f"{api}/experiments/{after}")
    case = page.locator("#cases tr[data-case='multiplies']")
    expect(case.locator(".outcome")).to_have_text("pass")
    assert case.locator(f"a[href='/runs/{made['id']}']").count() == 1
    page.select_option("#compare-with", before)
    expect(case.locator("td.change")).to_have_text("better")
    expect(case.locator(".outcome")).to_have_text(["pass", "fail"])
