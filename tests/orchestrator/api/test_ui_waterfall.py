"""The waterfall with thousands of spans, in headless Chromium: only the rows in view are in
the page, and every span can still be reached (scrolled to, selected, filtered, folded)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from bench.ui_waterfall import harness

pytestmark = pytest.mark.browser


def test_a_run_of_thousands_of_spans_keeps_few_rows_in_the_page_and_reaches_any(
    page: Page,
) -> None:
    with harness() as url:
        page.goto(url)
        page.wait_for_function("window.ready === true")
        total = page.evaluate(
            """() => {
                window.data = window.trace(3000);
                window.picked = null;
                const box = document.getElementById("waterfall");
                window.w = new window.Waterfall(box, (id) => { window.picked = id; });
                return window.w.draw(window.data);
            }"""
        )
        assert total == page.evaluate("data.span_count") > 2_900  # every span is shown...
        rows = page.locator("#waterfall .span-row")
        assert 10 < rows.count() < 200  # ... but only those in view (and a margin) are built
        # The last span, far below: selecting it scrolls it into view, marked.
        last = page.evaluate("data.spans[0].children[0].children.at(-1).children[0].span_id")
        page.evaluate("(id) => w.select(id)", last)
        row = page.locator(f"#waterfall .span-row[data-span='{last}']")
        assert row.is_visible() and "selected" in (row.get_attribute("class") or "")
        row.click()
        assert page.evaluate("window.picked") == last
        # A filter finds it (and the spans above it) among thousands; folding hides subtrees.
        assert page.evaluate(f"w.filter({last!r})") == 4  # run, coordinator, tool, worker
        assert page.evaluate("w.filter('')") == total
        assert page.evaluate("w.fold('boss')") == 2
        assert rows.count() == 2
